"""The checks that start every generate run, and its outcome.

`prepare_generation` parses and checks a run's options before anything is read or sent; the generate
flow and `eqarena generate --plan` (eqarena/tasks/generate_plan.py) both start with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from eqarena.exceptions import OptionError
from eqarena.generation.plan import AnswerPlanSummary
from eqarena.generation.runner import AnswerStats
from eqarena.llm.pricing import Price, run_price
from eqarena.llm.providers import LIVE_PROVIDERS, JudgeSpec, parse_judge_spec
from eqarena.options import GenerateOptions

MODEL_OPTION = "--model"  # the flag provider specs come from, in error messages


@dataclass(frozen=True)
class GenerateSetup:
    """A generate run's validated choices: which provider answers, stored under which model id, at what
    price, asked with which settings (`generation`: JSON, as stored with each answer)."""

    spec: JudgeSpec
    model_id: str
    price: Price | None
    generation: str

    @property
    def generator(self) -> str:
        """provider:model, without the URL: who answered, as stored with each answer."""
        return self.spec.judge_id


@dataclass(frozen=True)
class GenerateOutcome:
    """What a generate run planned, did (its stats), and left to do."""

    model: str
    run_id: str | None
    plan: AnswerPlanSummary
    left: AnswerPlanSummary
    stats: AnswerStats = field(default_factory=AnswerStats)
    spent_usd: float = 0.0
    stopped_by: str | None = None  # 'max-cost' | 'max-calls' when a cap ended the run early
    message: str = ""


def prepare_generation(options: GenerateOptions) -> GenerateSetup:
    """Parse and check a generate run's options before anything is read or sent."""
    spec = parse_judge_spec(options.model, MODEL_OPTION, LIVE_PROVIDERS)
    if options.batch and spec.provider == "gemini":
        raise OptionError(
            f"--batch uses the OpenAI Batch API: it needs an openai: or openai-compatible: model, not {spec.judge_id}"
        )
    price = run_price(spec.provider, spec.model, options.prices, options.caps.max_cost)
    settings = {"max_tokens": options.generation.max_tokens, "temperature": options.generation.temperature}
    return GenerateSetup(spec, options.model_id or spec.model, price, json.dumps(settings, sort_keys=True))
