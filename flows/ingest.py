"""Flow `ingest`: a bundled dataset or an arena-hard directory -> prompts, models, responses and
recorded judgments in the warehouse (one transaction), with a `runs` row (kind 'ingest')."""

from __future__ import annotations

import uuid
from dataclasses import replace as with_fields
from datetime import datetime, timezone
from time import perf_counter

from prefect import flow

from flows.run_context import current_flow_run_id
from tasks.ingest import IngestSummary, package_versions, read_dataset, record_run, write_dataset
from warehouse.runs import RunRecord


def new_run_id(kind: str) -> str:
    return f"{kind}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


@flow(name="ingest")
def ingest_flow(
    dataset: str = "vicuna80",
    replace: bool = False,
    db: str | None = None,
    name: str | None = None,
) -> IngestSummary:
    """Ingest `dataset` (a bundled dataset name or a directory) under `name` (default: its own name).

    Idempotent: rows already stored unchanged are skipped; rows whose content changed are counted and
    reported, and overwritten only when `replace`. Invalid input raises DatasetError (file:line) and
    writes no data; the run is still recorded as failed.
    """
    run = RunRecord(
        flow_run_id=current_flow_run_id(), run_id=new_run_id("ingest"), kind="ingest", status="running",
        started_at=datetime.now(timezone.utc),
        parameters={"dataset": dataset, "replace": replace, "name": name},
        versions=package_versions())
    record_run(db, run)
    timings: dict[str, float] = {}
    try:
        t0 = perf_counter()
        data = read_dataset(dataset, name)
        timings["read"] = perf_counter() - t0
        t0 = perf_counter()
        summary = write_dataset(db, data, replace, run.run_id)
        timings["write"] = perf_counter() - t0
    except Exception as exc:
        record_run(db, with_fields(run, status="failed", finished_at=datetime.now(timezone.utc),
                                   timings=timings, message=str(exc)))
        raise
    record_run(db, with_fields(
        run, status="ok", finished_at=datetime.now(timezone.utc), timings=timings,
        data_fingerprint=data.fingerprint(),
        message=f"{summary.dataset}: {summary.new} new, {summary.unchanged} unchanged, {summary.changed} changed"))
    return summary
