"""Steps of the main job (`run`, `refresh`) that are not flows of their own: the judge plan check before
any spend, and the judge options the main job implies (which judge needs judging: `options.is_recorded_judge`)."""

from __future__ import annotations

import sys

from eqarena.judge.plan import PlanSummary
from eqarena.judge.setup import confirm_spend
from eqarena.options import JudgeOptions, MainJobOptions, SpendCaps
from eqarena.orchestration.steps import run_logger, step
from eqarena.tasks.judge_plan import plan_judge_run


def main_job_judge(options: MainJobOptions, dataset: str) -> JudgeOptions:
    """The judge run the main job makes with a provider judge: every missing cell of `dataset`."""
    return JudgeOptions(
        judge=options.judge,
        dataset=dataset,
        samples_per_order=options.samples_per_order,
        caps=SpendCaps(max_cost=options.max_cost),
    )


@step("check_judge_plan")
def check_judge_plan(options: MainJobOptions, judge: JudgeOptions, db: str | None) -> PlanSummary:
    """Print the judge plan (calls, tokens, cost) on stderr and refuse a plan estimated above
    SPEND_CONFIRM_USD unless `options.max_cost` caps it or `options.yes` confirms it (SpendNotConfirmed)."""
    plan = plan_judge_run(judge, db).plan
    print(plan.line(), file=sys.stderr, flush=True)
    run_logger().info(plan.line())
    confirm_spend(plan, options.max_cost, options.yes)
    return plan
