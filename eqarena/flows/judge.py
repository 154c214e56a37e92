"""Flows `judge` and `judge-adaptive`: the judge pipelines (eqarena/pipelines/judge.py) as Prefect flows."""

from prefect import flow

from eqarena.judge.setup import JudgeOutcome
from eqarena.options import JudgeOptions
from eqarena.orchestration.runtime import judge_run_name
from eqarena.pipelines import judge as pipeline
from eqarena.tasks.judge_adaptive import AdaptiveOutcome


@flow(name="judge", flow_run_name=judge_run_name)
def judge_flow(options: JudgeOptions, db: str | None = None, progress: bool = True) -> JudgeOutcome:
    """Judge every missing (prompt, model pair, order, sample) of `options.dataset` with `options.judge`;
    `progress` draws a progress bar on stderr."""
    return pipeline.judge(options, db, progress)


@flow(name="judge-adaptive", flow_run_name=judge_run_name)
def adaptive_judge_flow(options: JudgeOptions, db: str | None = None) -> AdaptiveOutcome:
    """Judge `options.dataset` adaptively with `options.judge` (`eqarena judge --adaptive`)."""
    return pipeline.judge_adaptive(options, db)
