"""Tasks of the ingest flow: find and read a dataset, write it to the warehouse, record the run."""

from __future__ import annotations

from contextlib import closing, contextmanager
from dataclasses import dataclass
from dataclasses import replace as replace_fields
from pathlib import Path
from typing import Callable, Iterator

import polars as pl
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from eqarena import warehouse
from eqarena.datasets.arena_hard import arena_hard_files, is_arena_hard_dir, read_arena_hard
from eqarena.datasets.bundled import bundle_files, is_bundle_dir, read_bundle, seed_dir, seed_names
from eqarena.datasets.records import Dataset, DatasetError, input_size, model_family, text_sha256
from eqarena.importers.limits import check_bounds
from eqarena.options import InputLimits
from eqarena.orchestration.steps import step
from eqarena.warehouse.catalog import (
    JUDGMENTS,
    MODELS,
    PROMPT_PLACEHOLDERS,
    PROMPT_TAGS,
    PROMPTS,
    RESPONSES,
    SCORES,
    TableChanges,
    transaction,
    write_rows,
)

LARGE_INPUT_BYTES = 1_000_000  # inputs at least this big get a progress bar (on a terminal)


@dataclass(frozen=True)
class IngestSummary:
    """What an ingest did, per table (prompts, models, responses, judgments, and scores when there are)."""

    dataset: str
    source: str
    run_id: str
    replace: bool
    tables: tuple[TableChanges, ...]

    @property
    def new(self) -> int:
        return sum(t.new for t in self.tables)

    @property
    def unchanged(self) -> int:
        return sum(t.unchanged for t in self.tables)

    @property
    def changed(self) -> int:
        return sum(t.changed for t in self.tables)


def resolve_source(dataset: str) -> tuple[str, Path]:
    """('bundle' | 'arena-hard', directory) for a bundled dataset name or a directory path."""
    bundled = seed_dir(dataset)
    if bundled is not None:
        return "bundle", bundled
    path = Path(dataset)
    if is_bundle_dir(path):
        return "bundle", path
    if is_arena_hard_dir(path):
        return "arena-hard", path
    if path.is_dir():
        raise DatasetError(f"{path}: not an arena-hard directory (no question.jsonl)")
    raise DatasetError(
        f"dataset {dataset!r} is neither a bundled dataset ({', '.join(seed_names())}) nor a directory "
        "(arena-hard layout: question.jsonl + model_answer/*.jsonl)"
    )


@step("read_dataset")
def read_dataset(dataset: str, name: str | None = None, limits: InputLimits | None = None) -> Dataset:
    """Read and validate a bundled dataset or an arena-hard directory within `limits` (default:
    InputLimits()); DatasetError names file:line, or the bound and its option.

    The dataset is called `name`, else the bundle's own name, else the directory's name.
    """
    kind, directory = resolve_source(dataset)
    files = bundle_files(directory) if kind == "bundle" else arena_hard_files(directory)
    total = input_size(files)
    with _progress_bar(total, f"reading {directory.name}") as advance:
        if kind == "bundle":
            data = read_bundle(directory, name, advance)
        else:
            data = read_arena_hard(directory, name or directory.resolve().name, advance)
    check_bounds(data, limits or InputLimits())
    return data


@step("write_dataset")
def write_dataset(db: str | None, data: Dataset, replace: bool, run_id: str) -> IngestSummary:
    """Write prompts, models, responses and recorded judgments in one transaction (nothing on failure)."""
    name = data.name
    prompts = [
        {"dataset": name, "prompt_id": p.prompt_id, "category": p.category, "cluster": p.cluster, "text": p.text}
        for p in data.prompts
        if p.text is not None
    ]
    placeholders = [
        {"dataset": name, "prompt_id": p.prompt_id, "category": p.category, "cluster": p.cluster, "text": ""}
        for p in data.prompts
        if p.text is None
    ]
    models = [{"model_id": m, "family": model_family(m)} for m in data.models]
    responses = [
        {
            "dataset": name,
            "prompt_id": r.prompt_id,
            "model_id": r.model_id,
            "response_id": r.response_id,
            "text": r.text,
            "text_sha256": text_sha256(r.text),
        }
        for r in data.responses
    ]
    labels = (pl.lit(name).alias("dataset"), pl.lit(run_id).alias("run_id"))
    judgments = data.judgments.with_columns(*labels)
    scores = data.scores.with_columns(*labels)
    with closing(warehouse.connect(db)) as con, transaction(con):
        tables = tuple(
            write_rows(con, spec, rows, replace=replace)
            for spec, rows in (
                (PROMPTS, prompts),
                (MODELS, models),
                (RESPONSES, responses),
                (JUDGMENTS, judgments),
                (SCORES, scores),
            )
            if spec is not SCORES or scores.height
        )
        if data.tags.height:  # after the prompts (placeholders included) they label
            tags = data.tags.with_columns(pl.lit(name).alias("dataset"))
            tables += (write_rows(con, PROMPT_TAGS, tags),)
        if placeholders:
            added = write_rows(con, PROMPT_PLACEHOLDERS, placeholders)
            tables = (
                replace_fields(
                    tables[0], new=tables[0].new + added.new, unchanged=tables[0].unchanged + added.unchanged
                ),
                *tables[1:],
            )
    return IngestSummary(dataset=name, source=data.source, run_id=run_id, replace=replace, tables=tables)


@contextmanager
def _progress_bar(total: int, description: str) -> Iterator[Callable[[int], None] | None]:
    """An `advance(n_bytes)` callback drawing a rich bar on stderr for large inputs on a terminal;
    None otherwise."""
    console = Console(stderr=True)
    if total < LARGE_INPUT_BYTES or not console.is_terminal:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        bar = progress.add_task(description, total=total)
        yield lambda n: progress.advance(bar, n)
