"""Importing per-prompt score tables (a benchmark's per-question results), stored as scores.

Layouts (CSV, TSV, Parquet, JSONL or JSON; score_layouts.py):
- long: columns `prompt_id` (or `question_id` / `task`, or `--id-column`), `model`, `score`;
- wide: `prompt_id` (or `question_id` / `task`, or `--id-column`) and one column of scores per model;
- models-by-tasks: `model` (or `--id-column`) and one column of scores per task, each task a prompt.
Empty (and NaN) cells are missing scores: the pairs they take part in stay unjudged on that prompt.

The payoff of king a over rebel b on prompt p is a function of their scores s = score / `scale`:
- `clip-diff` (default): clip(s_a - s_b, -1, 1), so a score gap of `scale` or more is decisive;
- `sign`: sign(s_a - s_b), who scored higher, as in a win/loss/tie battle.
The scores are stored as given, one row per (prompt, model) in table `scores`, under the judge
`--judge` (default `scores:<file name>`) with the payoff and scale as its template hash; the tensor
assembly derives u_king(p, a, b) as the payoff above (antisymmetric by construction) without ever
storing the M (M - 1) ordered pairs of a prompt (warehouse/tensor.py).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from eqarena.datasets.records import SCORE_SCHEMA, Dataset, DatasetError, Prompt
from eqarena.exceptions import OptionError
from eqarena.importers.result import Imported
from eqarena.importers.score_layouts import long_scores
from eqarena.importers.tables import first_duplicate
from eqarena.options import ImportLayout, InputLimits, ScorePayoff


def payoff_template(payoff: ScorePayoff, scale: float) -> str:
    """The template hash recorded for scores turned into payoffs by `payoff` at `scale`."""
    return f"scores:{ScorePayoff(payoff).value}/scale={scale:g}"


def read_score_table(
    paths: list[Path],
    name: str | None,
    judge: str | None,
    payoff: ScorePayoff = ScorePayoff.CLIP_DIFF,
    scale: float = 1.0,
    layout: ImportLayout | None = None,
    id_name: str | None = None,
    limits: InputLimits = InputLimits(),
) -> Imported:
    """Every non-empty score of the tables at `paths` in `layout` (module docstring; None: long or wide
    by the columns), the prompt id in column `id_name` when given; a prompt needs two scores."""
    payoff = ScorePayoff(payoff)
    if not scale > 0:
        raise OptionError(f"--scale must be positive; got {scale}")
    template = payoff_template(payoff, scale)
    frames: list[pl.DataFrame] = []
    prompts: dict[str, Prompt] = {}
    notes = []
    for path in paths:
        scores = long_scores(path, layout, id_name, limits)
        first_duplicate(
            scores, ["prompt_id", "model"], lambda r: f"score of model {r['model']!r} on prompt {r['prompt_id']!r}"
        )
        for prompt_id in scores["prompt_id"].unique(maintain_order=True).to_list():
            prompts.setdefault(prompt_id, Prompt(prompt_id=prompt_id, text=None))
        frames.append(
            scores.drop_nulls("score").select(
                pl.lit(judge or f"scores:{path.stem}").alias("judge"),
                pl.lit(template).alias("template_hash"),
                "prompt_id",
                pl.col("model").alias("model_id"),
                "score",
                pl.lit(payoff.value).alias("payoff"),
                pl.lit(float(scale)).alias("scale"),
            )
        )
        missing = scores["score"].null_count()
        if missing:
            notes.append(f"{path}: {missing} empty score cell(s); their pairs stay unjudged on those prompts")
    table = pl.concat(frames).cast(SCORE_SCHEMA)
    judged = table.group_by("judge", "prompt_id").len().filter(pl.col("len") >= 2)
    if judged.height == 0:
        raise DatasetError(f"{paths[0]}: no prompt has scores of two models")
    dataset = Dataset(
        name=name or paths[0].stem, source=", ".join(map(str, paths)), prompts=tuple(prompts.values()), scores=table
    )
    return Imported(dataset, tuple(notes))
