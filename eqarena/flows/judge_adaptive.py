"""Flow `judge-adaptive` (`eqarena judge --adaptive`): judge only the cells that matter for the NE ranking.

read inputs -> held judgments of this judge + template -> rounds of adaptive judging
(eqarena/solvers/sparse/adaptive.py: selection, rating, stop rule) -> runs row
"""

from prefect import flow

from eqarena.judge.setup import prepare_judge
from eqarena.options import JudgeOptions, as_parameters
from eqarena.orchestration.runtime import judge_run_name
from eqarena.tasks.judge import JudgeSession
from eqarena.tasks.judge_adaptive import AdaptiveOutcome, judge_adaptively
from eqarena.tasks.runs import RunLog


@flow(name="judge-adaptive", flow_run_name=judge_run_name)
def adaptive_judge_flow(options: JudgeOptions, db: str | None = None) -> AdaptiveOutcome:
    """Judge `options.dataset` adaptively with `options.judge` until every adjacent pair of the NE model
    ranking is ordered, or tied within `options.adaptive.indifference`, with probability at least
    `options.adaptive.stop_probability`, or `options.caps.max_calls` calls were made."""
    setup = prepare_judge(options)
    with JudgeSession(db, options, setup) as session:
        parameters = as_parameters(options)
        parameters.update(
            dataset=session.inputs.dataset,
            models=list(session.inputs.models),
            prompts=len(session.inputs.prompts),
            template_hash=setup.template.hash,
        )
        log = RunLog(db, "judge", parameters, start=False)
        session.record(log.run)
        return judge_adaptively(session, log)
