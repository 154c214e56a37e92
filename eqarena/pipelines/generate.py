"""Pipeline `generate`: ask a model for its answers to the prompts of a dataset it has not answered yet and
store each answer as it arrives, so the judge can compare it with the other models (`eqarena refresh`
then judges only the cells involving it); a re-run continues where the last one stopped and pays for
nothing twice.

    plan (unanswered prompts only) -> register the model -> collect open batch jobs
        -> generate_chunk per chunk of prompts | new batch jobs (--batch)
        -> plan again (what is left) -> runs row (kind generate) and the readers' snapshot
"""

from __future__ import annotations

from eqarena.generation.setup import GenerateOutcome, prepare_generation
from eqarena.llm.budget import Budget
from eqarena.options import GenerateOptions, as_parameters
from eqarena.tasks.generate import GenerateSession, generate_message
from eqarena.tasks.runs import RunLog


def generate(options: GenerateOptions, db: str | None = None, progress: bool = True) -> GenerateOutcome:
    """Answer every chosen prompt of `options.dataset` that model `options.model_id` has no answer to yet,
    with `options.model` (a spec: openai:MODEL, gemini:MODEL, openai-compatible:MODEL@BASE_URL), live or
    with `options.batch` through the OpenAI Batch API. `progress` draws a progress bar on stderr."""
    setup = prepare_generation(options)
    with GenerateSession(db, options, setup) as session:
        plan = session.plan()
        if not plan.requests and not session.open_batch_jobs():
            return GenerateOutcome(
                setup.model_id,
                None,
                plan.summary(),
                plan.summary(),
                message=f"nothing to do: {setup.model_id} has answered every chosen prompt",
            )
        parameters = as_parameters(options)
        parameters.update(
            dataset=session.dataset, model_id=setup.model_id, generator=setup.generator, prompts=len(plan.prompts)
        )
        provider = session.provider()
        log = RunLog(db, "generate", parameters, start=False)
        session.register_model()
        session.record(log.run)
        budget = Budget(max_cost_usd=options.caps.max_cost, max_samples=options.caps.max_calls)
        failure = None
        try:
            session.generate(provider, plan, log.run_id, budget, progress)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            stats = session.stats
            left = session.plan()
            stopped_by = budget.exhausted_by if left.requests else None
            message = generate_message(left, stats, budget, stopped_by, failure)
            log.timings["generate"] = stats.seconds
            status = "interrupted" if isinstance(failure, KeyboardInterrupt) else "failed" if failure else "ok"
            session.record(log.record(status, message=message))
        return GenerateOutcome(
            setup.model_id, log.run_id, plan.summary(), left.summary(), stats, budget.spent_usd, stopped_by, message
        )
