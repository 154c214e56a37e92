"""Tasks of the import flow: read evaluation data made elsewhere, and check it fits the warehouse."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from eqarena import warehouse
from eqarena.datasets.records import DatasetError
from eqarena.importers.arena_hard_auto import read_arena_hard_judgments
from eqarena.importers.battles import read_battles
from eqarena.importers.limits import check_bounds
from eqarena.importers.pairwise import read_pairwise_table
from eqarena.importers.preferences import read_preference_table
from eqarena.importers.result import Imported
from eqarena.importers.scores import read_score_table
from eqarena.options import ImportFormat, ImportLayout, ImportOptions
from eqarena.orchestration.steps import step
from eqarena.tasks.ingest import IngestSummary
from eqarena.warehouse.catalog import judge_templates


@dataclass(frozen=True)
class ImportSummary:
    """What an import wrote, the notes for the user (what was skipped and why), and the judges it holds."""

    summary: IngestSummary
    notes: tuple[str, ...]
    judges: tuple[str, ...]


@step("read_import")
def read_import(options: ImportOptions) -> Imported:
    """Read and validate `options.paths` as `options.fmt` within `options.limits`; DatasetError names
    file:line (or the field over a bound)."""
    files = [Path(p) for p in options.paths]
    if not files:
        raise DatasetError("no input file given")
    imported = _read(files, options)
    check_bounds(imported.dataset, options.limits)
    return imported


def _read(files: list[Path], options: ImportOptions) -> Imported:
    limits = options.limits
    if options.fmt is ImportFormat.ARENA_HARD_AUTO:
        return read_arena_hard_judgments(files, options.dataset, options.baseline)
    if options.fmt is ImportFormat.BATTLES:
        return read_battles(files, options.dataset, options.judge, options.named_battles)
    if options.fmt is ImportFormat.PAIRWISE:
        if options.layout is ImportLayout.PREFERENCES:
            return read_preference_table(
                files, options.dataset, options.judge, options.baseline, options.id_column, limits
            )
        return read_pairwise_table(files, options.dataset, options.judge, options.id_column)
    return read_score_table(
        files, options.dataset, options.judge, options.payoff, options.scale, options.layout, options.id_column, limits
    )


@step("check_score_judges")
def check_score_judges(db: str | None, imported: Imported) -> None:
    """Refuse scores imported under a judge that already holds scores turned into payoffs another way:
    the rate flow pools a judge's judgments, so the two payoffs would be averaged."""
    data = imported.dataset
    wanted = dict(data.scores.select("judge", "template_hash").unique().iter_rows())
    with closing(warehouse.connect(db, read_only=True)) as con:
        stored = judge_templates(con, data.name, sorted(wanted))
    for judge, hashes in stored.items():
        other = [h for h in hashes if h != wanted[judge]]
        if other:
            raise DatasetError(
                f"judge {judge!r} already holds scores on {data.name!r} imported with {other[0]} "
                f"(this import: {wanted[judge]}); import under another --judge"
            )
