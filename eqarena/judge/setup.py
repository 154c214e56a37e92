"""The checks that start every judge run, its outcome, and the main job's spend confirmation.

`prepare_judge` parses and checks a run's options before anything is read or sent; the judge flow,
the adaptive flow and `eqarena judge --plan` (eqarena/tasks/judge_plan.py) all start with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eqarena.exceptions import EqarenaError, OptionError
from eqarena.judge.plan import PlanSummary
from eqarena.judge.runner import RunStats
from eqarena.judge.templates import Template, load_template
from eqarena.llm.pricing import Price, run_price
from eqarena.llm.providers import JudgeSpec, parse_judge_spec
from eqarena.options import JudgeOptions, Runner

SPEND_CONFIRM_USD = 1.0  # the main job asks for --max-cost or --yes above this estimated judging cost


@dataclass(frozen=True)
class JudgeOutcome:
    """What a judge run planned, did (its stats), and left to do."""

    judge: str
    run_id: str | None
    plan: PlanSummary
    left: PlanSummary | None = None
    stats: RunStats = field(default_factory=RunStats)
    spent_usd: float = 0.0
    stopped_by: str | None = None  # 'max-cost' | 'max-calls' when a cap ended the run early
    batch_jobs: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class JudgeSetup:
    """A judge run's validated choices: who judges, with which template, at what price."""

    spec: JudgeSpec
    template: Template
    price: Price | None
    multi_sample: bool


def default_multi_sample(spec: JudgeSpec) -> bool:
    """OpenAI and Gemini accept several samples per request; for other servers ask one at a time
    (llama.cpp ignores `n`; a refusal or a short answer switches to one sample per request anyway)."""
    return spec.provider in ("openai", "gemini")


def prepare_judge(options: JudgeOptions) -> JudgeSetup:
    """Parse and check a judge run's options before anything is read or sent."""
    spec = parse_judge_spec(options.judge)
    runner = options.runner
    if spec.provider == "recorded" and (runner.batch or runner.runner is Runner.DASK):
        raise OptionError(
            f"{options.judge} replays stored judgments from this process; it cannot be combined "
            "with --batch or --runner dask"
        )
    template = load_template(options.template)
    price = run_price(spec.provider, spec.model, options.prices, options.caps.max_cost)
    if runner.batch and spec.provider == "gemini":
        raise OptionError(
            f"--batch uses the OpenAI Batch API: it needs an openai: or openai-compatible: judge, not {spec.judge_id}"
        )
    multi = default_multi_sample(spec) if options.multi_sample is None else options.multi_sample
    return JudgeSetup(spec, template, price, multi)


class SpendNotConfirmed(EqarenaError, ValueError):
    """The judge plan would cost more than SPEND_CONFIRM_USD and nobody capped or confirmed it."""


def confirm_spend(plan: PlanSummary, max_cost: float | None, yes: bool) -> None:
    """Refuse a plan estimated above SPEND_CONFIRM_USD unless `max_cost` caps it or `yes` confirms it."""
    cost = plan.cost_usd
    if cost is not None and cost > SPEND_CONFIRM_USD and max_cost is None and not yes:
        raise SpendNotConfirmed(
            f"{plan.line()}: more than ${SPEND_CONFIRM_USD:.2f}, so nothing was sent; "
            f"cap the spend with --max-cost USD or confirm it with --yes"
        )
