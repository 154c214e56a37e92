"""The plan of a judge run (calls, tokens, cost), read from the warehouse without Prefect.

`eqarena judge --plan` and the main job's spend check only read the warehouse and count what is
missing: this step runs in plain Python (no flow run, no Prefect API, no provider SDK), so it answers
in about a second.
"""

from __future__ import annotations

from contextlib import closing

from eqarena import warehouse
from eqarena.judge.inputs import read_inputs
from eqarena.judge.plan import plan_missing
from eqarena.judge.setup import JudgeOutcome, prepare_judge
from eqarena.options import JudgeOptions


def plan_judge_run(options: JudgeOptions, db: str | None = None) -> JudgeOutcome:
    """The plan of a judge run from a read-only look at the warehouse; sends nothing. The caps are only
    checked, as the run would check them."""
    setup = prepare_judge(options)
    with closing(warehouse.connect(db, read_only=True)) as con:
        inputs = read_inputs(con, options.dataset, options.models, options.prompts)
        plan = plan_missing(
            con,
            setup.spec.judge_id,
            setup.template,
            inputs,
            samples_per_order=options.samples_per_order,
            max_unparsed=options.max_unparsed,
            multi_sample=setup.multi_sample,
            batch=options.runner.batch,
            price=setup.price,
        ).summary()
    return JudgeOutcome(setup.spec.judge_id, None, plan, plan, message="plan only, nothing sent")
