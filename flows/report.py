"""Flow `report`: one rate run from the warehouse → one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger

from flows.run_context import publish_report_link
from tasks.report import load_report_data, write_report

DEFAULT_OUT_DIR = "out"


@flow(name="report")
def report_flow(db: str | None = None, run_id: str | None = None, out_dir: str = DEFAULT_OUT_DIR) -> Path:
    """Write the HTML report of rate run `run_id` (default: the latest finished one) into `out_dir`."""
    data = load_report_data(db, run_id)
    path = write_report(data, out_dir)
    publish_report_link(data.run["run_id"], data.run["parameters"].get("dataset", "dataset"), Path(path))
    get_run_logger().info(f"report of run {data.run['run_id']}: {path}")
    return path
