"""Importing a generic long table of pairwise judgments (CSV, TSV, Parquet, JSONL or JSON), and the
conversion of validated pairwise rows to recorded judgments that the battle importer shares.

Columns (one row per judgment):
- `prompt_id` (or `question_id`), `model_a` (shown as assistant A), `model_b`;
- `score`: A's score in [-1, 1], or `verdict`: a label (`A>>B` ... `B>>A`, or `model_a` / `model_b` /
  `tie`); when both columns exist, an empty score falls back to the verdict;
- optional `judge` (default: `--judge`, else `imported:<file name>`), `sample` (a non-negative
  integer; default: the row's occurrence among rows of the same judge, prompt and ordered pair),
  `prompt_text` (the prompt itself), `category` (the prompt's category, for `rate --category` and
  `rate --by category`; one per prompt: rows of a prompt that name two categories are an error).
`--id-column` names the prompt id column instead. A row whose verdict is `error` and that has no score
(a judge call that failed, as in MT-bench's judgment files) is stored with status `unparsed` and no
score, like an arena-hard-auto game without a label; the import's notes count them.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from eqarena.datasets.records import Dataset, Prompt
from eqarena.importers.labels import known_labels, verdict_score
from eqarena.importers.result import Imported
from eqarena.importers.tables import (
    WHERE,
    fail_where,
    first_duplicate,
    id_column,
    numeric_column,
    read_table,
    require_columns,
    text_column,
)

TEMPLATE_TAG = "imported"
PAIR_COLUMNS = ["judge", "prompt_id", "model_a", "model_b"]
PROMPT_ID_COLUMNS = ("prompt_id", "question_id")
FAILED_VERDICTS = ("error",)  # a judge call that failed: kept as an unparsed judgment


def read_pairwise_table(paths: list[Path], name: str | None, judge: str | None, id_name: str | None = None) -> Imported:
    """Every row of the long tables at `paths` as a recorded judgment (see module docstring), the
    prompt id in column `id_name` when given."""
    frames = [_read_one(path, judge or f"imported:{path.stem}", id_name) for path in paths]
    notes = []
    for path, frame in zip(paths, frames):
        failed = frame.filter(pl.col("status") == "unparsed").height
        if failed:
            notes.append(f"{path}: {failed} row(s) with verdict 'error' stored as unparsed (no score)")
    frame = pl.concat(frames, how="diagonal_relaxed")
    dataset = name or paths[0].stem
    return Imported(to_dataset(frame, dataset, ", ".join(map(str, paths)), TEMPLATE_TAG), tuple(notes))


def _read_one(path: Path, judge: str, id_name: str | None) -> pl.DataFrame:
    frame = read_table(path)
    prompt = id_column(frame, path, id_name, PROMPT_ID_COLUMNS)
    if prompt != "prompt_id":
        frame = frame.drop("prompt_id", strict=False).rename({prompt: "prompt_id"})
    require_columns(frame, path, ["prompt_id", "model_a", "model_b"])
    if "score" not in frame.columns and "verdict" not in frame.columns:
        require_columns(frame, path, ["score or verdict"])
    for column in ("prompt_id", "model_a", "model_b"):
        frame = text_column(frame, column)
    frame = frame.with_columns(
        pl.col("judge").cast(pl.Utf8).str.strip_chars().fill_null(judge)
        if "judge" in frame.columns
        else pl.lit(judge).alias("judge")
    )
    frame = frame.with_columns(
        pl.when(pl.col("judge") == "").then(pl.lit(judge)).otherwise(pl.col("judge")).alias("judge")
    )
    frame = with_scores(frame, FAILED_VERDICTS)
    if "sample" in frame.columns:
        frame = numeric_column(frame, "sample", required=False)
        fail_where(
            frame,
            pl.col("sample").is_not_null() & ((pl.col("sample") < 0) | (pl.col("sample") % 1 != 0)),
            lambda r: f"sample {r['sample']} must be a non-negative integer",
        )
    text = pl.col("prompt_text").cast(pl.Utf8) if "prompt_text" in frame.columns else pl.lit(None, pl.Utf8)
    given = pl.col("verdict").cast(pl.Utf8) if "verdict" in frame.columns else pl.lit(None, pl.Utf8)
    raw = pl.when(pl.col("status") == "unparsed").then(given).otherwise(None)
    frame = frame.with_columns(text.alias("prompt_text"), raw.alias("raw_text"))
    return with_categories(frame) if "category" in frame.columns else frame


def with_categories(frame: pl.DataFrame) -> pl.DataFrame:
    """`category` as text (empty cells: none), checked to name one category per prompt."""
    category = pl.col("category").cast(pl.Utf8).str.strip_chars()
    frame = frame.with_columns(pl.when(category == "").then(None).otherwise(category).alias("category"))
    first = frame.select(pl.col("category").drop_nulls().first().over("prompt_id"))["category"]
    fail_where(
        frame.with_columns(first.alias("_first")),
        pl.col("category") != pl.col("_first"),
        lambda r: f"prompt {r['prompt_id']!r} has category {r['category']!r} here but {r['_first']!r} on an "
        "earlier row (one category per prompt)",
    )
    return frame


def with_scores(frame: pl.DataFrame, failed: tuple[str, ...] = ()) -> pl.DataFrame:
    """Add `label`, `score` (A's, in [-1, 1]) and `status` from a `score` column and/or a `verdict`
    column; a row without a score whose verdict is one of `failed` (any case) gets status 'unparsed'."""
    if "score" in frame.columns:
        frame = numeric_column(frame, "score", required="verdict" not in frame.columns)
        fail_where(frame, pl.col("score").abs() > 1, lambda r: f"score {r['score']} is outside [-1, 1]")
    else:
        frame = frame.with_columns(pl.lit(None, pl.Float64).alias("score"))
    verdict = pl.col("verdict").cast(pl.Utf8) if "verdict" in frame.columns else pl.lit(None, pl.Utf8)
    frame = frame.with_columns(verdict.alias("_verdict"))
    # Each distinct verdict spelling is parsed once (a battle log has millions of rows, a few spellings).
    spellings = frame["_verdict"].drop_nulls().unique().to_list()
    parsed = {v: verdict_score(v) for v in spellings if v.strip()}
    known = [v for v, p in parsed.items() if p is not None]
    labels = pl.col("_verdict").replace_strict(known, [parsed[v][0] for v in known], default=None, return_dtype=pl.Utf8)
    scores = pl.col("_verdict").replace_strict(
        known, [parsed[v][1] for v in known], default=None, return_dtype=pl.Float64
    )
    frame = frame.with_columns(
        labels.alias("label"),
        pl.coalesce(pl.col("score"), scores).alias("score"),
        (pl.col("_verdict").is_not_null() & (pl.col("_verdict").str.strip_chars() != "")).alias("_verdict_given"),
    )
    unparsed = pl.col("score").is_null() & pl.col("_verdict").str.strip_chars().str.to_lowercase().is_in(list(failed))
    frame = frame.with_columns(
        pl.when(unparsed.fill_null(False)).then(pl.lit("unparsed")).otherwise(pl.lit("ok")).alias("status")
    )
    fail_where(
        frame,
        pl.col("score").is_null() & pl.col("_verdict_given") & (pl.col("status") == "ok"),
        lambda r: f"unknown verdict {r['verdict']!r} (known: {known_labels()})",
    )
    fail_where(frame, pl.col("score").is_null() & (pl.col("status") == "ok"), lambda r: "no score and no verdict")
    return frame.drop("_verdict_given", "_verdict")


def to_dataset(frame: pl.DataFrame, name: str, source: str, template_hash: str) -> Dataset:
    """Validated pairwise rows (judge, prompt_id, model_a, model_b, score, label, status, raw_text,
    prompt_text, optional sample) as a Dataset; sample indices count occurrences when not given."""
    fail_where(
        frame, pl.col("model_a") == pl.col("model_b"), lambda r: f"model_a and model_b are both {r['model_a']!r}"
    )
    occurrence = pl.int_range(pl.len()).over(PAIR_COLUMNS)
    if "sample" in frame.columns:
        given = frame["sample"].is_not_null()
        if given.any() and not given.all():
            fail_where(frame, pl.col("sample").is_null(), lambda r: "empty sample (give it on every row or none)")
        frame = frame.with_columns(pl.col("sample").cast(pl.Int64))
    else:
        frame = frame.with_columns(occurrence.alias("sample"))
    first_duplicate(
        frame,
        [*PAIR_COLUMNS, "sample"],
        lambda r: f"judgment (judge {r['judge']!r}, prompt {r['prompt_id']!r}, "
        f"{r['model_a']!r} vs {r['model_b']!r}, sample {r['sample']})",
    )
    # A prompt's text: the first non-empty one given (prompts in order of first appearance); its category.
    category = pl.col("category") if "category" in frame.columns else pl.lit(None, pl.Utf8).alias("category")
    texts = frame.group_by("prompt_id", maintain_order=True).agg(
        pl.col("prompt_text").filter(pl.col("prompt_text").is_not_null() & (pl.col("prompt_text") != "")).first(),
        category.drop_nulls().first(),
    )
    prompts = tuple(Prompt(prompt_id=p, text=t, category=c) for p, t, c in texts.iter_rows())
    judgments = frame.select(
        "judge",
        pl.lit(template_hash).alias("template_hash"),
        "prompt_id",
        "model_a",
        "model_b",
        pl.col("sample").cast(pl.Int64).alias("sample_index"),
        "status",
        pl.col("label").alias("verdict"),
        "score",
        pl.col("raw_text").cast(pl.Utf8),
    )
    return Dataset(name=name, source=source, prompts=prompts, judgments=judgments)


def scalar_json(frame: pl.DataFrame, skip: set[str]) -> pl.Series:
    """A compact JSON record per row of the frame's other scalar columns, keys sorted, empty fields left
    out (kept as each judgment's raw text)."""
    kept = sorted(c for c, t in frame.schema.items() if c not in skip and c != WHERE and not t.is_nested())
    if not kept:
        return pl.Series("raw_text", ["{}"] * frame.height, dtype=pl.Utf8)
    encoded = frame.select(pl.struct(kept).struct.json_encode().alias("raw_text"))["raw_text"]
    # json_encode writes empty fields as null: drop them, as a record of what was given.
    return encoded.str.replace_all(r'"(?:[^"\\]|\\.)*":null,?', "").str.replace(r",}$", "}")
