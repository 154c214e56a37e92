"""Flow `import`: evaluation data made elsewhere (arena-hard-auto judgments, battle logs, pairwise
tables, per-prompt scores) -> prompts, models and judgments in the warehouse (one transaction), with a
`runs` row (kind 'import')."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as with_fields
from datetime import datetime, timezone
from time import perf_counter

from prefect import flow

from flows.ingest import new_run_id
from flows.run_context import current_flow_run_id
from tasks.importing import ImportOptions, check_score_judges, read_import
from tasks.ingest import IngestSummary, package_versions, record_run, write_dataset
from warehouse.runs import RunRecord


@dataclass(frozen=True)
class ImportSummary:
    summary: IngestSummary
    notes: tuple[str, ...]
    judges: tuple[str, ...]


@flow(name="import")
def import_flow(
    fmt: str,
    paths: list[str],
    dataset: str | None = None,
    judge: str | None = None,
    baseline: str | None = None,
    payoff: str = "clip-diff",
    scale: float = 1.0,
    replace: bool = False,
    db: str | None = None,
) -> ImportSummary:
    """Import `paths` in format `fmt` (arena-hard-auto, battles, pairwise, scores) into dataset `dataset`.

    Idempotent like ingest: rows stored unchanged are skipped, changed ones are reported (overwritten
    only when `replace`). A bad row raises DatasetError (file:line) and writes no data; the run is
    still recorded as failed.
    """
    options = ImportOptions(dataset=dataset, judge=judge, baseline=baseline, payoff=payoff, scale=scale)
    run = RunRecord(
        flow_run_id=current_flow_run_id(), run_id=new_run_id("import"), kind="import", status="running",
        started_at=datetime.now(timezone.utc),
        parameters={"format": fmt, "paths": paths, "dataset": dataset, "judge": judge,
                    "baseline": baseline, "payoff": payoff, "scale": scale, "replace": replace},
        versions=package_versions())
    record_run(db, run)
    timings: dict[str, float] = {}
    try:
        t0 = perf_counter()
        imported = read_import(fmt, paths, options)
        timings["read"] = perf_counter() - t0
        if fmt == "scores":
            check_score_judges(db, imported)
        t0 = perf_counter()
        summary = write_dataset(db, imported.dataset, replace, run.run_id)
        timings["write"] = perf_counter() - t0
    except Exception as exc:
        record_run(db, with_fields(run, status="failed", finished_at=datetime.now(timezone.utc),
                                   timings=timings, message=str(exc)))
        raise
    judges = tuple(sorted({j.judge for j in imported.dataset.judgments}))
    record_run(db, with_fields(
        run, status="ok", finished_at=datetime.now(timezone.utc), timings=timings,
        data_fingerprint=imported.dataset.fingerprint(),
        message=f"{summary.dataset}: {summary.new} new, {summary.unchanged} unchanged, {summary.changed} changed"
                + "".join(f"; {note}" for note in imported.notes)))
    return ImportSummary(summary=summary, notes=imported.notes, judges=judges)
