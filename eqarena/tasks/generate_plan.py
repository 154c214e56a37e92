"""The plan of a generate run (calls, tokens, cost), read from the warehouse without Prefect.

`eqarena generate --plan` only reads the warehouse and counts what is missing: this step runs in plain
Python (no flow run, no Prefect API, no provider SDK), so it answers in about a second.
"""

from __future__ import annotations

from contextlib import closing

from eqarena import warehouse
from eqarena.generation.plan import plan_answers
from eqarena.generation.setup import GenerateOutcome, prepare_generation
from eqarena.options import GenerateOptions
from eqarena.warehouse.catalog import choose_dataset


def plan_generate_run(options: GenerateOptions, db: str | None = None) -> GenerateOutcome:
    """The plan of a generate run from a read-only look at the warehouse; sends nothing."""
    setup = prepare_generation(options)
    with closing(warehouse.connect(db, read_only=True)) as con:
        plan = plan_answers(
            con,
            dataset=choose_dataset(con, options.dataset),
            model_id=setup.model_id,
            generator=setup.generator,
            prompt_count=options.prompts,
            max_tokens=options.generation.max_tokens or 0,
            price=setup.price,
            batch=options.batch,
        ).summary()
    return GenerateOutcome(setup.model_id, None, plan, plan, message="plan only, nothing sent")
