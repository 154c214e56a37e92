"""Pipeline `import`: evaluation data made elsewhere (arena-hard-auto judgments, battle logs, pairwise
tables, per-prompt scores) -> prompts, models, judgments and scores in the warehouse (one transaction),
with a `runs` row (kind 'import')."""

from __future__ import annotations

from eqarena.options import ImportFormat, ImportOptions, as_parameters
from eqarena.orchestration.progress import stage
from eqarena.tasks.importing import ImportSummary, check_score_judges, read_import
from eqarena.tasks.ingest import write_dataset
from eqarena.tasks.runs import RunLog


def import_data(options: ImportOptions, db: str | None = None) -> ImportSummary:
    """Import `options.paths` in format `options.fmt` (arena-hard-auto, battles, pairwise, scores).

    Idempotent like ingest: rows stored unchanged are skipped, changed ones are reported (overwritten
    only when `options.replace`). A bad row raises DatasetError (file:line) and writes no data; the run
    is still recorded as failed.
    """
    with RunLog(db, "import", as_parameters(options)) as log:
        with log.timed("read"), stage(f"reading {len(options.paths)} file(s) as {options.fmt.value}"):
            imported = read_import(options)
        if options.fmt is ImportFormat.SCORES:
            check_score_judges(db, imported)
        with log.timed("write"), stage("writing to the warehouse"):
            summary = write_dataset(db, imported.dataset, options.replace, log.run_id)
        log.finish(
            parameters={**log.run.parameters, "dataset": summary.dataset},
            data_fingerprint=imported.dataset.fingerprint(),
            message=f"{summary.dataset}: {summary.new} new, {summary.unchanged} unchanged, "
            f"{summary.changed} changed" + "".join(f"; {note}" for note in imported.notes),
        )
    return ImportSummary(summary=summary, notes=imported.notes, judges=imported.dataset.judges)
