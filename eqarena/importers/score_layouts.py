"""The layouts of a per-prompt score table, each read as (prompt_id, model, score, where) rows.

- long: a row per score: the prompt id column, `model`, `score`;
- wide: a row per prompt: the prompt id column and one column of scores per model;
- models-by-tasks: a row per model, as LiveBench publishes its tables: the model column (`model`)
  and one column of scores per task or category; each task column becomes a prompt.

The id column (the prompt's, or for models-by-tasks the model's) is `--id-column` when given, else
the first of the usual names the table has. Empty and NaN cells are missing scores (score null).
Without a layout, a table with `model` and `score` columns is long, any other is wide.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from eqarena.datasets.records import DatasetError
from eqarena.exceptions import OptionError
from eqarena.importers.limits import refuse_many_models
from eqarena.importers.tables import WHERE, id_column, numeric_column, numeric_columns, read_table, text_column
from eqarena.options import ImportLayout, InputLimits

PROMPT_ID_COLUMNS = ("prompt_id", "question_id", "task")
MODEL_ID_COLUMNS = ("model", "model_name")
NOT_SCORES = ("prompt_id", WHERE, "prompt_text", "instruction", "category")
COLUMNS = ["prompt_id", "model", "score", WHERE]


def long_scores(
    path: Path, layout: ImportLayout | None = None, id_name: str | None = None, limits: InputLimits = InputLimits()
) -> pl.DataFrame:
    """(prompt_id, model, score, where) rows of the score table at `path` in `layout` (module docstring);
    a table with more model columns or rows than `limits.models` is refused before its cells are parsed."""
    layout = ImportLayout(layout) if layout else None
    if layout is ImportLayout.PREFERENCES:
        raise OptionError("--layout preferences is a pairwise layout (import pairwise FILE --layout preferences)")
    frame = read_table(path)
    if layout is ImportLayout.MODELS_BY_TASKS:
        refuse_many_models(frame.height, limits, f"{path} (a row per model)")
        return _models_by_tasks(frame, path, id_name)
    if layout is None and _alpacaeval_preferences(frame):
        raise DatasetError(
            f"{path}: an AlpacaEval preference table (an instruction column, every value 0 or in [1, 2]): "
            f"preferences over a baseline are judgments, read by `eqarena import pairwise {path} --layout "
            "preferences --baseline MODEL`; to read the values as scores anyway, pass --layout wide"
        )
    if layout is None and id_name is None and _one_row_per_model(frame):
        model = next(c for c in MODEL_ID_COLUMNS if c in frame.columns)
        raise DatasetError(
            f"{path}: no prompt id column (prompt_id, question_id or task), and a {model} column: a table with "
            f"one row per model and a column per task? pass --layout models-by-tasks (or --id-column to name "
            f"the prompt id column)"
        )
    prompt = id_column(frame, path, id_name, PROMPT_ID_COLUMNS)
    frame = text_column(frame, prompt)
    if prompt != "prompt_id":  # another id column named by --id-column wins
        frame = frame.drop("prompt_id", strict=False).rename({prompt: "prompt_id"})
    if layout is ImportLayout.LONG or (layout is None and {"model", "score"} <= set(frame.columns)):
        return _long(frame, path)
    refuse_many_models(len([c for c in frame.columns if c not in NOT_SCORES]), limits, f"{path} (a column per model)")
    return _wide(frame, path)


def _alpacaeval_preferences(frame: pl.DataFrame) -> bool:
    """AlpacaEval's per-instruction layout: an `instruction` or `instruction_idx` column, and every other
    cell empty, 0 (a draw) or a preference in [1, 2] (`importers.preferences`)."""
    if not {"instruction", "instruction_idx"} & set(frame.columns):
        return False
    values = [c for c in frame.columns if c not in (*NOT_SCORES, "instruction_idx")]
    if not values:
        return False
    cells = frame.select(pl.concat_list(pl.col(values).cast(pl.Float64, strict=False)).explode().drop_nulls())
    v = cells.to_series()
    return v.len() > 0 and bool(((v == 0) | ((v >= 1) & (v <= 2))).all())


def _one_row_per_model(frame: pl.DataFrame) -> bool:
    """A table with a model column, no prompt id column and no score column: LiveBench's layout."""
    columns = set(frame.columns)
    return not columns & set(PROMPT_ID_COLUMNS) and bool(columns & set(MODEL_ID_COLUMNS)) and "score" not in columns


def _long(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    missing = [c for c in ("model", "score") if c not in frame.columns]
    if missing:
        have = ", ".join(c for c in frame.columns if c != WHERE)
        raise DatasetError(f"{path}: missing column {', '.join(missing)} for the long layout (columns: {have})")
    frame = text_column(frame, "model")
    return numeric_column(frame, "score", required=False, nan_is_empty=True).select(COLUMNS)


def _wide(frame: pl.DataFrame, path: Path) -> pl.DataFrame:
    models = [c for c in frame.columns if c not in NOT_SCORES]
    if len(models) < 2:
        raise DatasetError(
            f"{path}: a wide score table needs a column per model (at least two), "
            f"or use the long layout (prompt_id, model, score)"
        )
    return _unpivot(frame, models, "prompt_id", "model")


def _models_by_tasks(frame: pl.DataFrame, path: Path, id_name: str | None) -> pl.DataFrame:
    model = id_column(frame, path, id_name, MODEL_ID_COLUMNS)
    frame = text_column(frame, model).rename({model: "model"})
    tasks = [c for c in frame.columns if c not in ("model", WHERE)]
    if not tasks:
        raise DatasetError(f"{path}: a models-by-tasks table needs a column of scores per task (none found)")
    return _unpivot(frame, tasks, "model", "prompt_id")


def _unpivot(frame: pl.DataFrame, columns: list[str], index: str, name: str) -> pl.DataFrame:
    """The score columns `columns` (checked numeric) as rows: the column's name becomes `name`."""
    frame = numeric_columns(frame, columns, required=False, nan_is_empty=True)
    return frame.unpivot(index=[index, WHERE], on=columns, variable_name=name, value_name="score").select(COLUMNS)
