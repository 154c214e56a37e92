"""Flows `run` (the main job), `judge-missing` and `analyses`: the pipelines of
eqarena/pipelines/run.py as Prefect flows."""

from prefect import flow

from eqarena import options as opts
from eqarena.options import MainJobOptions
from eqarena.orchestration.runtime import main_job_run_name
from eqarena.pipelines import run as pipeline
from eqarena.pipelines.run import RunSummary


@flow(name="judge-missing")
def judge_missing(options: MainJobOptions, dataset: str, db: str | None = None) -> tuple[list[str], int, str]:
    """The main job's judge step: (judges to rate, judge calls, what it did)."""
    return pipeline.judge_missing(options, dataset, db)


@flow(name="analyses")
def run_analyses(
    options: opts.AnalysesOptions,
    rate_run_id: str,
    methods: tuple[str, ...],
    db: str | None = None,
    skip: tuple[str, ...] = (),
) -> dict[str, list[str]]:
    """The chosen robustness analyses of a rate run; returns each kind's summary lines."""
    return pipeline.run_analyses(options, rate_run_id, methods, db, skip)


@flow(name="run", flow_run_name=main_job_run_name)
def run_flow(options: MainJobOptions = MainJobOptions(), db: str | None = None) -> RunSummary:
    """The main job on `options.source` with `options.judge`: ingest, judge, rate, analyses, report."""
    return pipeline.main_job(options, db)
