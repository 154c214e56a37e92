"""Pipelines `judge` and `judge-adaptive`: plan the missing judge calls, make them (live or through the
Batch API) and store each judgment as it returns; a re-run continues where the last one stopped and
pays for nothing twice.

    judge:          read inputs -> plan (missing cells only) -> judge_chunk per chunk of prompts | batch
                    jobs -> plan again (what is left) -> runs row
    judge-adaptive: read inputs -> held judgments of this judge + template -> rounds of adaptive judging
                    (eqarena/solvers/sparse/adaptive.py: selection, rating, stop rule) -> runs row

With `options.runner.runner` dask the live calls are made on Dask workers while this process keeps
dispatching, rate-limiting and writing them (eqarena/judge/dask_calls.py).
"""

from __future__ import annotations

from eqarena.judge.runner import RunStats
from eqarena.judge.setup import JudgeOutcome, prepare_judge
from eqarena.llm.budget import Budget
from eqarena.options import JudgeOptions, as_parameters
from eqarena.orchestration.commands import subflow
from eqarena.tasks.judge import JudgeSession, judge_message
from eqarena.tasks.judge_adaptive import AdaptiveOutcome, judge_adaptively
from eqarena.tasks.runs import RunLog


@subflow  # the main job's judge step: its own flow run inside the main job's flow run
def judge(options: JudgeOptions, db: str | None = None, progress: bool = True) -> JudgeOutcome:
    """Judge every missing (prompt, model pair, order, sample) of `options.dataset` with `options.judge`
    (a spec: openai:MODEL, gemini:MODEL, openai-compatible:MODEL@BASE_URL, recorded:JUDGE), with
    `options.samples_per_order` samples with each model as assistant A (paper Section 3.1: 4 + 4).
    `progress` draws a progress bar on stderr."""
    setup = prepare_judge(options)
    with JudgeSession(db, options, setup) as session:
        plan = session.plan()
        if plan.samples == 0 and not session.open_batch_jobs():
            return JudgeOutcome(
                setup.spec.judge_id,
                None,
                plan.summary(),
                plan.summary(),
                message="nothing to do: every planned cell is judged",
            )
        log = _start_run_log(db, session, multi_sample=setup.multi_sample)
        budget = Budget(max_cost_usd=options.caps.max_cost, max_samples=options.caps.max_calls)
        stats, jobs, failure = RunStats(), (), None
        try:
            stats, jobs = session.judge(plan, log.run_id, budget, progress)
        except BaseException as exc:
            failure = exc
            if not options.runner.batch:
                stats = session.stats
            raise
        finally:
            left = session.plan()
            stopped_by = budget.exhausted_by if left.samples else None
            message = judge_message(plan, left, stats, budget, stopped_by, failure)
            log.timings["judge"] = stats.seconds
            status = "interrupted" if isinstance(failure, KeyboardInterrupt) else "failed" if failure else "ok"
            session.record(log.record(status, data_fingerprint=setup.template.hash, message=message))
        return JudgeOutcome(
            setup.spec.judge_id,
            log.run_id,
            plan.summary(),
            left.summary(),
            stats,
            budget.spent_usd,
            stopped_by,
            jobs,
            message,
        )


def judge_adaptive(options: JudgeOptions, db: str | None = None) -> AdaptiveOutcome:
    """Judge `options.dataset` adaptively with `options.judge` until every adjacent pair of the NE model
    ranking is ordered, or tied within `options.adaptive.indifference`, with probability at least
    `options.adaptive.stop_probability`, or `options.caps` (calls, cost) are spent."""
    setup = prepare_judge(options)
    with JudgeSession(db, options, setup) as session:
        return judge_adaptively(session, _start_run_log(db, session))


def _start_run_log(db: str | None, session: JudgeSession, **extra) -> RunLog:
    """The run's log, its `runs` row recorded as running: the options, what the session judges, `extra`."""
    inputs = session.inputs
    parameters = as_parameters(session.options)
    parameters.update(
        dataset=inputs.dataset,
        models=list(inputs.models),
        prompts=len(inputs.prompts),
        template_hash=session.setup.template.hash,
        **extra,
    )
    log = RunLog(db, "judge", parameters, start=False)
    session.record(log.run)
    return log
