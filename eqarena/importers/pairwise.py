"""Importing a generic long table of pairwise judgments (CSV, TSV, Parquet, JSONL or JSON), and the
conversion of validated pairwise rows to recorded judgments that the battle importer shares.

Columns (one row per judgment):
- `prompt_id` (or `question_id`), `model_a` (shown as assistant A), `model_b`;
- `score`: A's score in [-1, 1], or `verdict`: a label (`A>>B` ... `B>>A`, or `model_a` / `model_b` /
  `tie`); when both columns exist, an empty score falls back to the verdict;
- optional `judge` (default: `--judge`, else `imported:<file name>`), `sample` (a non-negative
  integer; default: the row's occurrence among rows of the same judge, prompt and ordered pair),
  `prompt_text` (the prompt itself).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from eqarena.datasets.records import Dataset, Prompt, RecordedJudgment
from eqarena.importers.labels import known_labels, verdict_score
from eqarena.importers.result import Imported
from eqarena.importers.tables import (
    WHERE,
    fail_where,
    first_duplicate,
    numeric_column,
    read_table,
    require_columns,
    text_column,
)

TEMPLATE_TAG = "imported"
PAIR_COLUMNS = ["judge", "prompt_id", "model_a", "model_b"]


def read_pairwise_table(paths: list[Path], name: str | None, judge: str | None) -> Imported:
    """Every row of the long tables at `paths` as a recorded judgment (see module docstring)."""
    frames = [_read_one(path, judge or f"imported:{path.stem}") for path in paths]
    frame = pl.concat(frames, how="diagonal_relaxed")
    dataset = name or paths[0].stem
    return Imported(to_dataset(frame, dataset, ", ".join(map(str, paths)), TEMPLATE_TAG))


def _read_one(path: Path, judge: str) -> pl.DataFrame:
    frame = read_table(path)
    if "prompt_id" not in frame.columns and "question_id" in frame.columns:
        frame = frame.rename({"question_id": "prompt_id"})
    require_columns(frame, path, ["prompt_id", "model_a", "model_b"])
    if "score" not in frame.columns and "verdict" not in frame.columns:
        require_columns(frame, path, ["score or verdict"])
    for column in ("prompt_id", "model_a", "model_b"):
        frame = text_column(frame, column)
    frame = frame.with_columns(pl.col("judge").cast(pl.Utf8).str.strip_chars().fill_null(judge)
                               if "judge" in frame.columns else pl.lit(judge).alias("judge"))
    frame = frame.with_columns(pl.when(pl.col("judge") == "").then(pl.lit(judge)).otherwise(pl.col("judge"))
                               .alias("judge"))
    frame = with_scores(frame)
    if "sample" in frame.columns:
        frame = numeric_column(frame, "sample", required=False)
        fail_where(frame, pl.col("sample").is_not_null() & ((pl.col("sample") < 0) | (pl.col("sample") % 1 != 0)),
                   lambda r: f"sample {r['sample']} must be a non-negative integer")
    text = pl.col("prompt_text").cast(pl.Utf8) if "prompt_text" in frame.columns else pl.lit(None, pl.Utf8)
    return frame.with_columns(text.alias("prompt_text"), pl.lit(None, pl.Utf8).alias("raw_text"))


def with_scores(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `label` and `score` (A's, in [-1, 1]) from a `score` column and/or a `verdict` column."""
    if "score" in frame.columns:
        frame = numeric_column(frame, "score", required="verdict" not in frame.columns)
        fail_where(frame, pl.col("score").abs() > 1, lambda r: f"score {r['score']} is outside [-1, 1]")
    else:
        frame = frame.with_columns(pl.lit(None, pl.Float64).alias("score"))
    verdicts = frame["verdict"].cast(pl.Utf8).to_list() if "verdict" in frame.columns else [None] * frame.height
    parsed = [verdict_score(v) if v is not None and v.strip() else None for v in verdicts]
    frame = frame.with_columns(
        pl.Series("label", [p[0] if p else None for p in parsed], dtype=pl.Utf8),
        pl.coalesce(pl.col("score"), pl.Series("_verdict_score", [p[1] if p else None for p in parsed],
                                                   dtype=pl.Float64)).alias("score"),
        pl.Series("_verdict_given", [v is not None and bool(v.strip()) for v in verdicts], dtype=pl.Boolean),
    )
    fail_where(frame, pl.col("score").is_null() & pl.col("_verdict_given"),
               lambda r: f"unknown verdict {r['verdict']!r} (known: {known_labels()})")
    fail_where(frame, pl.col("score").is_null(), lambda r: "no score and no verdict")
    return frame.drop("_verdict_given")


def to_dataset(frame: pl.DataFrame, name: str, source: str, template_hash: str) -> Dataset:
    """Validated pairwise rows (judge, prompt_id, model_a, model_b, score, label, raw_text, prompt_text,
    optional sample) as a Dataset; sample indices count occurrences when not given."""
    fail_where(frame, pl.col("model_a") == pl.col("model_b"),
               lambda r: f"model_a and model_b are both {r['model_a']!r}")
    occurrence = pl.int_range(pl.len()).over(PAIR_COLUMNS)
    if "sample" in frame.columns:
        given = frame["sample"].is_not_null()
        if given.any() and not given.all():
            fail_where(frame, pl.col("sample").is_null(), lambda r: "empty sample (give it on every row or none)")
        frame = frame.with_columns(pl.col("sample").cast(pl.Int64))
    else:
        frame = frame.with_columns(occurrence.alias("sample"))
    first_duplicate(frame, [*PAIR_COLUMNS, "sample"],
                    lambda r: f"judgment (judge {r['judge']!r}, prompt {r['prompt_id']!r}, "
                              f"{r['model_a']!r} vs {r['model_b']!r}, sample {r['sample']})")
    prompts: dict[str, Prompt] = {}
    for prompt_id, text in frame.select("prompt_id", "prompt_text").iter_rows():
        if prompt_id not in prompts or (prompts[prompt_id].text is None and text):
            prompts[prompt_id] = Prompt(prompt_id=prompt_id, text=text or None)
    judgments = tuple(
        RecordedJudgment(judge=judge, template_hash=template_hash, prompt_id=prompt_id, model_a=a, model_b=b,
                         sample_index=int(sample), verdict=label, score=float(score), raw_text=raw)
        for judge, prompt_id, a, b, sample, label, score, raw in frame.select(
            "judge", "prompt_id", "model_a", "model_b", "sample", "label", "score", "raw_text").iter_rows())
    return Dataset(name=name, source=source, prompts=tuple(prompts.values()), judgments=judgments)


def scalar_json(row: dict, skip: set[str]) -> str:
    """A compact JSON record of a source row's other fields (kept as the judgment's raw text)."""
    kept = {k: v for k, v in row.items() if k not in skip and k != WHERE and v is not None}
    return json.dumps(kept, ensure_ascii=False, sort_keys=True, default=str)
