"""Importing per-prompt score tables (a benchmark's per-question results) as pairwise payoffs.

Layouts (CSV, TSV, Parquet, JSONL or JSON):
- long: columns `prompt_id` (or `question_id` / `task`), `model`, `score`;
- wide: `prompt_id` (or `question_id` / `task`) and one column of scores per model.
Empty cells are missing scores: the pairs they take part in stay unjudged on that prompt.

The payoff of king a over rebel b on prompt p is a function of their scores s = score / `scale`:
- `clip-diff` (default): clip(s_a - s_b, -1, 1), so a score gap of `scale` or more is decisive;
- `sign`: sign(s_a - s_b), who scored higher, as in a win/loss/tie battle.
Each ordered pair is stored as one judgment (`sample_index` 0) by the judge `--judge` (default
`scores:<file name>`), with the payoff and scale as its template hash and the two raw scores as its
raw text, so u_king(p, a, b) is exactly the payoff above (antisymmetric by construction).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from eqarena.datasets.records import Dataset, DatasetError, Prompt, RecordedJudgment
from eqarena.importers.result import Imported
from eqarena.importers.tables import WHERE, first_duplicate, numeric_column, read_table, text_column
from eqarena.options import ScorePayoff

_ID_COLUMNS = ("prompt_id", "question_id", "task")


def payoff_template(payoff: ScorePayoff, scale: float) -> str:
    """The template hash recorded for scores turned into payoffs by `payoff` at `scale`."""
    return f"scores:{ScorePayoff(payoff).value}/scale={scale:g}"


def read_score_table(paths: list[Path], name: str | None, judge: str | None,
                     payoff: ScorePayoff = ScorePayoff.CLIP_DIFF, scale: float = 1.0) -> Imported:
    """Every (prompt, ordered model pair) with both scores as a recorded judgment (module docstring)."""
    payoff = ScorePayoff(payoff)
    if not scale > 0:
        raise ValueError(f"--scale must be positive; got {scale}")
    template = payoff_template(payoff, scale)
    judgments: list[RecordedJudgment] = []
    prompts: dict[str, Prompt] = {}
    notes = []
    for path in paths:
        scores = _long_scores(path)
        first_duplicate(scores, ["prompt_id", "model"],
                        lambda r: f"score of model {r['model']!r} on prompt {r['prompt_id']!r}")
        judge_id = judge or f"scores:{path.stem}"
        for prompt_id in scores["prompt_id"].unique(maintain_order=True).to_list():
            prompts.setdefault(prompt_id, Prompt(prompt_id=prompt_id, text=None))
        judgments.extend(_pair_judgments(scores.drop_nulls("score"), judge_id, template, payoff, scale))
        missing = scores["score"].null_count()
        if missing:
            notes.append(f"{path}: {missing} empty score cell(s); their pairs stay unjudged on those prompts")
    if not judgments:
        raise DatasetError(f"{paths[0]}: no prompt has scores of two models")
    dataset = Dataset(name=name or paths[0].stem, source=", ".join(map(str, paths)),
                      prompts=tuple(prompts.values()), judgments=tuple(judgments))
    return Imported(dataset, tuple(notes))


def _long_scores(path: Path) -> pl.DataFrame:
    """(prompt_id, model, score, where) rows of a long or wide score table; score may be null."""
    frame = read_table(path)
    id_column = next((c for c in _ID_COLUMNS if c in frame.columns), None)
    if id_column is None:
        have = ", ".join(c for c in frame.columns if c != WHERE)
        raise DatasetError(f"{path}: missing column prompt_id (or question_id / task) (columns: {have})")
    frame = text_column(frame, id_column).rename({id_column: "prompt_id"})
    if "model" in frame.columns and "score" in frame.columns:
        frame = text_column(frame, "model")
        return numeric_column(frame, "score", required=False).select("prompt_id", "model", "score", WHERE)
    models = [c for c in frame.columns if c not in ("prompt_id", WHERE, "prompt_text", "category")]
    if len(models) < 2:
        raise DatasetError(f"{path}: a wide score table needs a column per model (at least two), "
                           f"or use the long layout (prompt_id, model, score)")
    for model in models:
        frame = numeric_column(frame, model, required=False)
    return frame.unpivot(index=["prompt_id", WHERE], on=models, variable_name="model", value_name="score") \
        .select("prompt_id", "model", "score", WHERE)


def _pair_judgments(scores: pl.DataFrame, judge: str, template: str, payoff: str,
                    scale: float) -> list[RecordedJudgment]:
    pairs = scores.join(scores, on="prompt_id", suffix="_b").filter(pl.col("model") != pl.col("model_b"))
    gap = (pl.col("score") - pl.col("score_b")) / scale
    value = gap.clip(-1.0, 1.0) if payoff == "clip-diff" else gap.sign()
    pairs = pairs.with_columns(value.alias("payoff"))
    return [
        RecordedJudgment(judge=judge, template_hash=template, prompt_id=prompt_id, model_a=a, model_b=b,
                         sample_index=0, verdict=None, score=float(u),
                         raw_text=json.dumps({"score_a": sa, "score_b": sb}))
        for prompt_id, a, b, sa, sb, u in pairs.select(
            "prompt_id", "model", "model_b", "score", "score_b", "payoff").iter_rows()
    ]
