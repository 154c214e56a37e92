"""SQL for the catalog tables (prompts, models, responses) and imported judgments: writing rows with
change detection, and reading them back.

A write hands the incoming rows to DuckDB as Arrow (a temporary view, no copy) and compares them
with the stored ones by key: `new` rows are inserted, `unchanged` rows are left alone, `changed` rows
(same key, other content) are reported and only overwritten when asked to. The caller owns the
transaction (see `transaction`), so a failed ingest writes nothing.
"""

from __future__ import annotations

from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import duckdb
import polars as pl

from eqarena.exceptions import NotFoundError

MAX_REPORTED_KEYS = 10
_POLARS_TYPES = {"VARCHAR": pl.Utf8, "INTEGER": pl.Int64, "DOUBLE": pl.Float64}


@dataclass(frozen=True)
class TableSpec:
    """How rows of one table are compared: key columns, compared content, other columns written."""

    table: str
    types: dict[str, str]  # column -> DuckDB type, in insert order
    key: tuple[str, ...]
    content: tuple[str, ...]
    untracked: tuple[str, ...] = ()  # written with new (or replaced) rows, never compared

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.key, *self.content, *self.untracked)


PROMPTS = TableSpec(
    "prompts",
    {"dataset": "VARCHAR", "prompt_id": "VARCHAR", "category": "VARCHAR", "cluster": "VARCHAR", "text": "VARCHAR"},
    key=("dataset", "prompt_id"),
    content=("category", "cluster", "text"),
)
MODELS = TableSpec("models", {"model_id": "VARCHAR", "family": "VARCHAR"}, key=("model_id",), content=("family",))
RESPONSES = TableSpec(
    "responses",
    {
        "dataset": "VARCHAR",
        "prompt_id": "VARCHAR",
        "model_id": "VARCHAR",
        "response_id": "VARCHAR",
        "text": "VARCHAR",
        "text_sha256": "VARCHAR",
    },
    key=("dataset", "prompt_id", "model_id"),
    content=("response_id", "text", "text_sha256"),
)
JUDGMENTS = TableSpec(
    "judgments",
    {
        "judge": "VARCHAR",
        "template_hash": "VARCHAR",
        "dataset": "VARCHAR",
        "prompt_id": "VARCHAR",
        "model_a": "VARCHAR",
        "model_b": "VARCHAR",
        "sample_index": "INTEGER",
        "status": "VARCHAR",
        "verdict": "VARCHAR",
        "score": "DOUBLE",
        "raw_text": "VARCHAR",
        "run_id": "VARCHAR",
    },
    key=("judge", "template_hash", "dataset", "prompt_id", "model_a", "model_b", "sample_index"),
    content=("status", "verdict", "score", "raw_text"),
    untracked=("run_id",),
)
SCORES = TableSpec(
    "scores",
    {
        "judge": "VARCHAR",
        "template_hash": "VARCHAR",
        "dataset": "VARCHAR",
        "prompt_id": "VARCHAR",
        "model_id": "VARCHAR",
        "score": "DOUBLE",
        "payoff": "VARCHAR",
        "scale": "DOUBLE",
        "run_id": "VARCHAR",
    },
    key=("judge", "template_hash", "dataset", "prompt_id", "model_id"),
    content=("score", "payoff", "scale"),
    untracked=("run_id",),
)
# Prompts known only by id (imported judgments or scores without the prompt's text): inserted when
# the dataset does not hold the prompt yet, never compared with or overwriting a stored text.
PROMPT_PLACEHOLDERS = TableSpec(PROMPTS.table, PROMPTS.types, key=PROMPTS.key, content=(), untracked=PROMPTS.content)
PROMPT_TAGS = TableSpec(
    "prompt_tags",
    {"dataset": "VARCHAR", "prompt_id": "VARCHAR", "grouping": "VARCHAR", "tag": "VARCHAR"},
    key=("dataset", "prompt_id", "grouping", "tag"),
    content=(),
)
TABLES = {spec.table: spec for spec in (PROMPTS, MODELS, RESPONSES, JUDGMENTS, SCORES, PROMPT_TAGS)}


@dataclass(frozen=True)
class TableChanges:
    """What writing a batch of rows did to one table."""

    table: str
    new: int = 0
    unchanged: int = 0
    changed: int = 0
    replaced: int = 0  # changed rows overwritten (replace=True)
    changed_keys: tuple[tuple, ...] = field(default=())  # up to MAX_REPORTED_KEYS examples


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK when the block raises."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def write_rows(
    con: duckdb.DuckDBPyConnection, spec: TableSpec, rows: Sequence[dict] | pl.DataFrame, *, replace: bool = False
) -> TableChanges:
    """Insert rows whose key is new; count unchanged and changed ones; overwrite changed ones if `replace`.

    `rows`: dicts, or a polars frame, with every column of `spec`; duplicate keys within `rows` are the
    caller's error. The rows reach DuckDB in bulk (Arrow), never row by row.
    """
    frame = (
        rows
        if isinstance(rows, pl.DataFrame)
        else pl.DataFrame(
            {c: [row[c] for row in rows] for c in spec.columns},
            schema={c: _POLARS_TYPES[spec.types[c]] for c in spec.columns},
        )
    )
    if frame.height == 0:
        return TableChanges(spec.table)
    stage, incoming = f"_stage_{spec.table}", f"_incoming_{spec.table}"
    # The rows stay in Arrow memory: DuckDB scans them through a view, without a copy in a temp table.
    con.register(incoming, frame.select(spec.columns).to_arrow())
    try:
        casts = ", ".join(f"CAST({c} AS {spec.types[c]}) AS {c}" for c in spec.columns)
        con.execute(f"CREATE OR REPLACE TEMP VIEW {stage} AS SELECT {casts} FROM {incoming}")
        changes = _merge_stage(con, spec, stage, frame.height, replace)
    except BaseException:
        with suppress(duckdb.Error):  # an aborted transaction refuses the clean-up; its rollback does it
            con.unregister(incoming)
        raise
    con.execute(f"DROP VIEW IF EXISTS {stage}")
    con.unregister(incoming)
    return changes


def _merge_stage(
    con: duckdb.DuckDBPyConnection, spec: TableSpec, stage: str, total: int, replace: bool
) -> TableChanges:
    on_key = " AND ".join(f"t.{c} = s.{c}" for c in spec.key)
    differs = " OR ".join(f"t.{c} IS DISTINCT FROM s.{c}" for c in spec.content) or "FALSE"
    new, changed = con.execute(
        f"SELECT count(*) FILTER (WHERE t.{spec.key[0]} IS NULL), "
        f"count(*) FILTER (WHERE t.{spec.key[0]} IS NOT NULL AND ({differs})) "
        f"FROM {stage} s LEFT JOIN {spec.table} t ON {on_key}"
    ).fetchall()[0]
    changed_keys = (
        tuple(
            con.execute(
                f"SELECT {', '.join('s.' + c for c in spec.key)} FROM {stage} s JOIN {spec.table} t ON {on_key} "
                f"WHERE {differs} ORDER BY ALL LIMIT {MAX_REPORTED_KEYS}"
            ).fetchall()
        )
        if changed
        else ()
    )
    columns = ", ".join(spec.columns)
    con.execute(
        f"INSERT INTO {spec.table} ({columns}) SELECT {columns} FROM {stage} s "
        f"WHERE NOT EXISTS (SELECT 1 FROM {spec.table} t WHERE {on_key})"
    )
    replaced = 0
    if replace and changed:
        assignments = ", ".join(f"{c} = s.{c}" for c in (*spec.content, *spec.untracked))
        con.execute(f"UPDATE {spec.table} t SET {assignments} FROM {stage} s WHERE {on_key} AND ({differs})")
        replaced = changed
    return TableChanges(
        spec.table,
        new=new,
        unchanged=total - new - changed,
        changed=changed,
        replaced=replaced,
        changed_keys=changed_keys,
    )


def datasets(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Names of the datasets with prompts, sorted."""
    return [r[0] for r in con.execute("SELECT DISTINCT dataset FROM prompts ORDER BY dataset").fetchall()]


def choose_dataset(con: duckdb.DuckDBPyConnection, requested: str | None) -> str:
    """`requested` if the warehouse holds prompts or judgments of it; with None, the warehouse's only
    such dataset. LookupError naming the datasets held otherwise."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT dataset FROM prompts UNION SELECT dataset FROM judgments ORDER BY dataset"
        ).fetchall()
    ]
    if requested is not None:
        if requested in names:
            return requested
        raise NotFoundError(
            f"dataset {requested!r} has no prompts in the warehouse (datasets: "
            f"{', '.join(names) or 'none'}); run `eqarena ingest --dataset {requested}` first"
        )
    if len(names) == 1:
        return names[0]
    if not names:
        raise NotFoundError("the warehouse holds no dataset yet: run `eqarena ingest` first")
    raise NotFoundError(f"the warehouse holds {len(names)} datasets ({', '.join(names)}): choose one with --dataset")


def dataset_prompt_texts(con: duckdb.DuckDBPyConnection, dataset: str) -> dict[str, str]:
    """prompt_id -> text of a dataset's prompts, by prompt_id."""
    return dict(
        con.execute("SELECT prompt_id, text FROM prompts WHERE dataset = ? ORDER BY prompt_id", [dataset]).fetchall()
    )


def dataset_response_texts(
    con: duckdb.DuckDBPyConnection, dataset: str, models: Sequence[str] | None = None
) -> dict[tuple[str, str], str]:
    """(prompt_id, model_id) -> text of a dataset's responses, optionally of some models only."""
    query = "SELECT prompt_id, model_id, text FROM responses WHERE dataset = ?"
    params: list = [dataset]
    if models is not None:
        query += " AND list_contains(?, model_id)"
        params.append(list(models))
    return {(p, m): text for p, m, text in con.execute(query + " ORDER BY prompt_id, model_id", params).fetchall()}


def dataset_model_ids(con: duckdb.DuckDBPyConnection, dataset: str) -> list[str]:
    """The models with a response in the dataset, by model_id."""
    return [
        m
        for (m,) in con.execute(
            "SELECT model_id FROM models WHERE model_id IN "
            "(SELECT model_id FROM responses WHERE dataset = ?) ORDER BY model_id",
            [dataset],
        ).fetchall()
    ]


def judge_templates(con: duckdb.DuckDBPyConnection, dataset: str, judges: Sequence[str]) -> dict[str, list[str]]:
    """The template hashes each of `judges` has judgments or scores with on `dataset` (judges without any
    omitted)."""
    scores = " UNION SELECT judge, template_hash FROM scores WHERE dataset = $dataset" if has_scores(con) else ""
    rows = con.execute(
        f"SELECT judge, list(DISTINCT template_hash ORDER BY template_hash) FROM ("
        f"SELECT judge, template_hash FROM judgments WHERE dataset = $dataset{scores}) "
        f"WHERE list_contains($judges, judge) GROUP BY judge ORDER BY judge",
        {"dataset": dataset, "judges": list(judges)},
    ).fetchall()
    return {judge: list(hashes) for judge, hashes in rows}


def has_scores(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse has the `scores` table (a read-only connection to a warehouse written by an
    older eqarena may not: it is created by migration 008)."""
    return bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'scores' AND table_schema = 'main'"
        ).fetchone()[0]
    )
