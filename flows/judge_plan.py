"""The checks and the plan that start every judge run, without Prefect.

`eqarena judge --plan` only reads the warehouse and counts what is missing: `plan_judge_run` does
that in plain Python (no flow run, no Prefect API, no provider SDK), so it answers in about a second.
The judge flow (`flows.judge`) starts with the same `prepare_judge` checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import warehouse
from tasks.judge.inputs import read_inputs
from tasks.judge.plan import plan_missing
from tasks.judge.pricing import Price, PriceError, load_prices
from tasks.judge.providers import JudgeSpec, parse_judge_spec
from tasks.judge.templates import Template, load_template


@dataclass(frozen=True)
class JudgeOutcome:
    """What a judge run planned, did, and left to do. `plan` / `left` are JudgePlan.summary() dicts."""

    judge: str
    run_id: str | None
    plan: dict
    left: dict | None = None
    stats: dict = field(default_factory=dict)
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


def prepare_judge(judge: str, template: str, prices: str | None, *, max_cost: float | None = None,
                  max_calls: int | None = None, batch: bool = False,
                  multi_sample: bool | None = None) -> JudgeSetup:
    """Parse and check a judge run's options before anything is read or sent."""
    spec = parse_judge_spec(judge)
    chosen_template = load_template(template)
    price = load_prices(prices).lookup(spec.provider, spec.model)
    if max_cost is not None and price is None:
        raise PriceError(
            f"--max-cost: no price for {spec.judge_id}; give one with --prices FILE "
            f"([{spec.provider}.\"{spec.model}\"] input = ..., output = ... in USD per million tokens)"
        )
    if (max_cost is not None and max_cost < 0) or (max_calls is not None and max_calls < 0):
        raise ValueError("--max-cost and --max-calls must not be negative")
    if batch and spec.provider == "gemini":
        raise ValueError(f"--batch uses the OpenAI Batch API: it needs an openai: or openai-compatible: judge, "
                         f"not {spec.judge_id}")
    multi = default_multi_sample(spec) if multi_sample is None else multi_sample
    return JudgeSetup(spec, chosen_template, price, multi)


def plan_judge_run(
    judge: str,
    dataset: str,
    models: list[str] | None = None,
    prompts: int | None = None,
    samples_per_order: int = 4,
    template: str = "pairwise5",
    max_unparsed: int | None = None,
    batch: bool = False,
    multi_sample: bool | None = None,
    prices: str | None = None,
    db: str | None = None,
    max_cost: float | None = None,
    max_calls: int | None = None,
) -> JudgeOutcome:
    """The plan of a judge run (calls, tokens, cost) from a read-only look at the warehouse; sends nothing.
    `max_cost` and `max_calls` are only checked, as the run would check them."""
    setup = prepare_judge(judge, template, prices, max_cost=max_cost, max_calls=max_calls, batch=batch,
                          multi_sample=multi_sample)
    con = warehouse.connect(db, read_only=True)
    try:
        inputs = read_inputs(con, dataset, models, prompts)
        plan = plan_missing(con, setup.spec.judge_id, setup.template, inputs, samples_per_order=samples_per_order,
                            max_unparsed=max_unparsed, multi_sample=setup.multi_sample, batch=batch,
                            price=setup.price).summary()
    finally:
        con.close()
    return JudgeOutcome(setup.spec.judge_id, None, plan, plan, message="plan only, nothing sent")


SPEND_CONFIRM_USD = 1.0  # the main job asks for --max-cost or --yes above this estimated judging cost


class SpendNotConfirmed(ValueError):
    """The judge plan would cost more than SPEND_CONFIRM_USD and nobody capped or confirmed it."""


def plan_line(plan: dict) -> str:
    """'judge plan: 1,200 calls, ~2,400,000 tokens, ~$0.84' (the cost is unknown without a price)."""
    cost = "cost unknown (no price for this judge)" if plan["cost_usd"] is None else f"~${plan['cost_usd']:.2f}"
    return (f"judge plan for {plan['judge']} on {plan['dataset']}: {plan['calls']:,} calls, "
            f"~{plan['tokens_in'] + plan['tokens_out']:,} tokens, {cost}")


def confirm_spend(plan: dict, max_cost: float | None, yes: bool) -> None:
    """Refuse a plan estimated above SPEND_CONFIRM_USD unless `max_cost` caps it or `yes` confirms it."""
    cost = plan["cost_usd"]
    if cost is not None and cost > SPEND_CONFIRM_USD and max_cost is None and not yes:
        raise SpendNotConfirmed(
            f"{plan_line(plan)}: more than ${SPEND_CONFIRM_USD:.2f}, so nothing was sent; "
            f"cap the spend with --max-cost USD or confirm it with --yes")
