"""Pipeline `ingest`: a bundled dataset or an arena-hard directory -> prompts, models, responses and
recorded judgments in the warehouse (one transaction), with a `runs` row (kind 'ingest')."""

from __future__ import annotations

from eqarena.options import IngestOptions, as_parameters
from eqarena.orchestration.progress import stage
from eqarena.tasks.ingest import IngestSummary, read_dataset, write_dataset
from eqarena.tasks.runs import RunLog


def ingest(options: IngestOptions = IngestOptions(), db: str | None = None) -> IngestSummary:
    """Ingest `options.source` (a bundled dataset name or a directory) under `options.name` (default:
    its own name).

    Idempotent: rows already stored unchanged are skipped; rows whose content changed are counted and
    reported, and overwritten only when `options.replace`. Invalid input raises DatasetError
    (file:line) and writes no data; the run is still recorded as failed.
    """
    with RunLog(db, "ingest", as_parameters(options)) as log:
        with log.timed("read"):
            data = read_dataset(options.source, options.name, options.limits)
        with log.timed("write"), stage("writing to the warehouse"):
            summary = write_dataset(db, data, options.replace, log.run_id)
        log.finish(
            parameters={**log.run.parameters, "dataset": summary.dataset},
            data_fingerprint=data.fingerprint(),
            message=f"{summary.dataset}: {summary.new} new, {summary.unchanged} unchanged, {summary.changed} changed",
        )
    return summary
