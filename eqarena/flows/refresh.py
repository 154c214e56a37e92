"""Flow `refresh`: the incremental main job (eqarena/pipelines/refresh.py) as a Prefect flow, the one
`eqarena serve` schedules and prefect.yaml deploys."""

from prefect import flow

from eqarena.flows.judge import judge_flow
from eqarena.options import MainJobOptions
from eqarena.orchestration.runtime import main_job_run_name
from eqarena.pipelines.refresh import RefreshSummary, refresh


@flow(name="refresh", flow_run_name=main_job_run_name)
def refresh_flow(
    options: MainJobOptions = MainJobOptions(), db: str | None = None, wait_s: float | None = None
) -> RefreshSummary:
    """Bring the ratings of `options.source` by `options.judge` up to date, doing only what new data
    requires; `wait_s` bounds the wait for a refresh already writing the warehouse (default:
    $EQARENA_WAIT, else 60 s). A provider judge judges in the judge flow, a subflow of this one."""
    return refresh(options, db, wait_s, judge_step=judge_flow)
