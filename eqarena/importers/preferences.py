"""Importing preference tables against a baseline (`import pairwise --layout preferences`), the layout of
AlpacaEval's per-instruction results: one row per instruction, an id column (`prompt_id`, `question_id`
or `instruction_idx`, or `--id-column`), and one column per model holding its preference over the
baseline `--baseline` in [1, 2]: 1 = the baseline is preferred, 2 = the model is, 1.5 = a tie; 0 is
AlpacaEval's other way of writing a draw (`alpaca_eval.metrics.get_winrate`: "0 or 1.5 for draw") and
is read as 1.5.

Each non-empty cell is a judgment of the model against the baseline on that prompt, with the score
s = 2 (preference - 1.5) in [-1, 1], stored in both orders (the model as A with s, the baseline as A
with -s, sample 0 each), so a rate run with `--orders both` counts the (model, baseline) cell as judged;
pairs of two models stay unjudged (rate with `--missing impute`). Empty and NaN cells are no judgment;
a column named as the baseline is skipped; `instruction` or `prompt_text` is the prompt's text.
The judge is `--judge` (default `imported:<file name>`), the template hash `preferences`; each
judgment's raw text records the preference as given.

These are pairwise judgments, not scores: they are stored as judgments (no `--payoff` or `--scale`),
hence a layout of the `pairwise` format.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from eqarena.datasets.records import DatasetError
from eqarena.importers.limits import refuse_many_models
from eqarena.importers.pairwise import to_dataset
from eqarena.importers.result import Imported
from eqarena.importers.tables import WHERE, fail_where, id_column, numeric_columns, read_table, text_column
from eqarena.options import InputLimits

TEMPLATE_TAG = "preferences"
DRAW_AS_ZERO = 0.0  # AlpacaEval writes a draw as 0 or 1.5
ID_COLUMNS = ("prompt_id", "question_id", "instruction_idx")
TEXT_COLUMNS = ("instruction", "prompt_text")
NOT_MODELS = (WHERE, "prompt_id", "category", *TEXT_COLUMNS)


def read_preference_table(
    paths: list[Path],
    name: str | None,
    judge: str | None,
    baseline: str,
    id_name: str | None = None,
    limits: InputLimits = InputLimits(),
) -> Imported:
    """Every non-empty preference of the tables at `paths` as two judgments (see module docstring)."""
    if not baseline:
        raise DatasetError("a preferences table needs --baseline (the model every column is compared with)")
    frames, notes = [], []
    for path in paths:
        frame, note = _read_one(path, judge or f"imported:{path.stem}", baseline, id_name, limits)
        frames.append(frame)
        notes.extend(note)
    frame = pl.concat(frames, how="diagonal_relaxed")
    if frame.height == 0:
        raise DatasetError(f"{paths[0]}: no preferences (every cell is empty)")
    dataset = to_dataset(frame, name or paths[0].stem, ", ".join(map(str, paths)), TEMPLATE_TAG)
    return Imported(dataset, tuple(notes))


def _read_one(
    path: Path, judge: str, baseline: str, id_name: str | None, limits: InputLimits
) -> tuple[pl.DataFrame, list[str]]:
    frame = read_table(path)
    prompt = id_column(frame, path, id_name, ID_COLUMNS)
    frame = text_column(frame, prompt)
    if prompt != "prompt_id":
        frame = frame.drop("prompt_id", strict=False).rename({prompt: "prompt_id"})
    text = next((c for c in TEXT_COLUMNS if c in frame.columns), None)
    frame = frame.with_columns((pl.col(text).cast(pl.Utf8) if text else pl.lit(None, pl.Utf8)).alias("prompt_text"))
    models = [c for c in frame.columns if c not in NOT_MODELS]
    notes = []
    if baseline in models:
        models.remove(baseline)
        notes.append(f"{path}: skipped the column of the baseline {baseline!r}")
    if not models:
        raise DatasetError(f"{path}: no model columns (a preferences table has a column per model)")
    refuse_many_models(len(models) + 1, limits, f"{path} (a column per model, and the baseline)")
    frame = numeric_columns(frame, models, required=False, nan_is_empty=True)
    cells = (
        frame.with_row_index("_row")
        .unpivot(
            index=["_row", "prompt_id", "prompt_text", WHERE], on=models, variable_name="model", value_name="preference"
        )
        .sort("_row", maintain_order=True)
    )
    fail_where(
        cells,
        ((pl.col("preference") < 1) | (pl.col("preference") > 2)) & (pl.col("preference") != DRAW_AS_ZERO),
        lambda r: f"preference {r['preference']:g} of {r['model']!r} is outside [1, 2] "
        f"(1: {baseline} preferred, 2: the model preferred, 1.5 or 0: a draw)",
    )
    empty = cells["preference"].null_count()
    if empty:
        notes.append(f"{path}: {empty} empty preference cell(s); those models stay unjudged on those prompts")
    draws = int((cells["preference"] == DRAW_AS_ZERO).sum())
    if draws:
        notes.append(f"{path}: {draws} preference(s) of 0, AlpacaEval's draw, read as 1.5")
    given = pl.col("preference")
    cells = cells.drop_nulls("preference").with_columns(
        ((pl.when(given == DRAW_AS_ZERO).then(1.5).otherwise(given) - 1.5) * 2).alias("score")
    )
    common = [
        pl.lit(judge).alias("judge"),
        "prompt_id",
        "prompt_text",
        pl.lit(0).cast(pl.Int64).alias("sample"),
        pl.lit(None, pl.Utf8).alias("label"),
        pl.lit("ok").alias("status"),
        pl.format("preference {}", pl.col("preference")).alias("raw_text"),
        WHERE,
    ]
    forward = cells.select(*common, pl.col("model").alias("model_a"), pl.lit(baseline).alias("model_b"), "score")
    reverse = cells.select(
        *common,
        pl.lit(baseline).alias("model_a"),
        pl.col("model").alias("model_b"),
        pl.when(pl.col("score") == 0).then(0.0).otherwise(-pl.col("score")).alias("score"),
    )
    return pl.concat([forward, reverse]), notes
