"""Flow `run` (the main job): the pipeline of eqarena/pipelines/run.py as a Prefect flow."""

from prefect import flow

from eqarena.flows.judge import judge_flow
from eqarena.options import MainJobOptions
from eqarena.orchestration.runtime import main_job_run_name
from eqarena.pipelines import run as pipeline
from eqarena.pipelines.run import RunSummary


@flow(name="run", flow_run_name=main_job_run_name)
def run_flow(options: MainJobOptions = MainJobOptions(), db: str | None = None) -> RunSummary:
    """The main job on `options.source` with `options.judge`: ingest, judge, rate, analyses, report; a
    provider judge judges in the judge flow, a subflow of this one."""
    return pipeline.main_job(options, db, judge_step=judge_flow)
