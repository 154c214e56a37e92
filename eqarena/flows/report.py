"""Flow `report`: the report pipeline (eqarena/pipelines/report.py) as a Prefect flow."""

from pathlib import Path

from prefect import flow

from eqarena.options import DEFAULT_OUT_DIR
from eqarena.pipelines.report import report


@flow(name="report")
def report_flow(run_id: str | None = None, out_dir: str = DEFAULT_OUT_DIR, db: str | None = None) -> Path:
    """Write the HTML report of rate run `run_id` (default: the latest finished one) into `out_dir`."""
    return report(run_id, out_dir, db)
