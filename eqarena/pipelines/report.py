"""Pipeline `report`: one rate run from the warehouse -> one self-contained HTML file."""

from __future__ import annotations

from concurrent.futures import Executor
from pathlib import Path

from eqarena.options import DEFAULT_OUT_DIR
from eqarena.orchestration.runtime import publish_report_link
from eqarena.orchestration.steps import run_logger
from eqarena.report.directory import report_dir
from eqarena.tasks.report import load_report_data, write_report


def report(
    run_id: str | None = None, out_dir: str = DEFAULT_OUT_DIR, db: str | None = None, drawing: Executor | None = None
) -> Path:
    """Write the HTML report of rate run `run_id` (default: the latest finished one) into `out_dir`;
    `drawing`: helper processes that draw its figures too (`report.drawing`), if any."""
    report_dir(out_dir)  # before any work: a file in the way is said at once
    data = load_report_data(db, run_id)
    path = write_report(data, out_dir, drawing)
    publish_report_link(data.run.run_id, data.run.parameters.get("dataset", "dataset"), Path(path))
    run_logger().info(f"report of run {data.run.run_id}: {path}")
    return path
