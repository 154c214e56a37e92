"""Tasks of the import flow: read evaluation data made elsewhere, and check it fits the warehouse."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE

import warehouse
from tasks.datasets import DatasetError
from tasks.importers.arena_hard_auto import read_arena_hard_judgments
from tasks.importers.battles import read_battles
from tasks.importers.pairwise import read_pairwise_table
from tasks.importers.result import Imported
from tasks.importers.scores import read_score_table
from warehouse.catalog import judge_templates

FORMATS = ("arena-hard-auto", "battles", "pairwise", "scores")


@dataclass(frozen=True)
class ImportOptions:
    """How to read the files: the dataset name, the judge id (battles, pairwise, scores), the baseline
    (arena-hard-auto v0.1), and the payoff of two scores (scores)."""

    dataset: str | None = None
    judge: str | None = None
    baseline: str | None = None
    payoff: str = "clip-diff"
    scale: float = 1.0


@task(name="read_import", cache_policy=NONE)
def read_import(fmt: str, paths: list[str], options: ImportOptions) -> Imported:
    """Read and validate `paths` as `fmt` (one of FORMATS); DatasetError names file:line."""
    files = [Path(p) for p in paths]
    if not files:
        raise DatasetError("no input file given")
    if fmt == "arena-hard-auto":
        return read_arena_hard_judgments(files, options.dataset, options.baseline)
    if fmt == "battles":
        return read_battles(files, options.dataset, options.judge)
    if fmt == "pairwise":
        return read_pairwise_table(files, options.dataset, options.judge)
    if fmt == "scores":
        return read_score_table(files, options.dataset, options.judge, options.payoff, options.scale)
    raise ValueError(f"unknown import format {fmt!r} (choose from {', '.join(FORMATS)})")


@task(name="check_score_judges", cache_policy=NONE)
def check_score_judges(db: str | None, imported: Imported) -> None:
    """Refuse scores imported under a judge that already holds scores turned into payoffs another way:
    the rate flow pools a judge's judgments, so the two payoffs would be averaged."""
    data = imported.dataset
    wanted = {j.judge: j.template_hash for j in data.judgments}
    with closing(warehouse.connect(db, read_only=True)) as con:
        stored = judge_templates(con, data.name, sorted(wanted))
    for judge, hashes in stored.items():
        other = [h for h in hashes if h != wanted[judge]]
        if other:
            raise DatasetError(
                f"judge {judge!r} already holds scores on {data.name!r} imported with {other[0]} "
                f"(this import: {wanted[judge]}); import under another --judge")
