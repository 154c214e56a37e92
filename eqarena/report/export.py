"""A rate run's model ratings as a leaderboard to share: CSV, JSON or markdown (`eqarena export`).

One row per model, in the order of the method the answer leads with (`report.verdict.lead_method`:
NE, else CCE, ...; another where the diagnosis finds the NE unfit to rank the models). Per method m
of the run (registry order), the columns `m_rank`, `m_rating`, `m_ci_lo`, `m_ci_hi` (its 95%
interval: a model-rating method's own, an equilibrium's over resampled prompts) and `m_p_top1` (the
share of prompt replicates in which the model ranks first; equilibria with a bootstrap); empty where
the run has none. The markdown table is the console's: the leading method's rank, rating, interval
and P(top 1), then every other method's rank.
"""

from __future__ import annotations

import json

import polars as pl

from eqarena.exceptions import OptionError
from eqarena.methods import format_interval, format_rating, interval_note, label, ordered
from eqarena.report.verdict import headline_method

EXPORT_FORMATS = ("csv", "json", "markdown")
FIELDS = ("rank", "rating", "ci_lo", "ci_hi", "p_top1")


def leaderboard(rows: pl.DataFrame, lead: str | None = None) -> tuple[pl.DataFrame, list[str], str]:
    """The wide table (module docstring) of a run's rating rows (`warehouse.ratings.read_rating_table`),
    its methods in registry order, and the method it is ordered by: `lead` (`report.diagnosis.Diagnosis.lead`)
    where the run rated it, else the headline method."""
    methods = ordered(rows["method"].unique().to_list())
    headline = lead if lead in methods else headline_method(methods)
    order = rows.filter(pl.col("method") == headline).sort("rank", "action")["action"].to_list()
    board = pl.DataFrame({"model": order})
    for method in methods:
        part = rows.filter(pl.col("method") == method).select(
            pl.col("action").alias("model"), *(pl.col(f).alias(f"{method}_{f}") for f in FIELDS)
        )
        board = board.join(part, on="model", how="left", maintain_order="left")
    return board, methods, headline


def export_text(rows: pl.DataFrame, fmt: str, run_id: str, dataset: str, lead: str | None = None) -> str:
    """The leaderboard of run `run_id` (on `dataset`) as `fmt`: csv, json or markdown, ordered as
    `leaderboard(rows, lead)`."""
    if fmt not in EXPORT_FORMATS:
        raise OptionError(f"--format must be one of {', '.join(EXPORT_FORMATS)}; got {fmt!r}")
    board, methods, headline = leaderboard(rows, lead)
    if fmt == "csv":
        return board.write_csv()
    if fmt == "json":
        models = [
            {"model": r["model"], **{m: {f: r[f"{m}_{f}"] for f in FIELDS} for m in methods}}
            for r in board.iter_rows(named=True)
        ]
        document = {"run_id": run_id, "dataset": dataset, "headline": headline, "methods": methods, "models": models}
        return json.dumps(document, indent=2) + "\n"
    return _markdown(board, methods, headline, run_id, dataset)


def _markdown(board: pl.DataFrame, methods: list[str], headline: str, run_id: str, dataset: str) -> str:
    others = [m for m in methods if m != headline]
    header = ["rank", "model", label(headline), "95% interval", "P(top 1)", *(f"rank by {label(m)}" for m in others)]
    lines = [f"Model ratings of {dataset} (eqarena run {run_id}), ordered by {label(headline)}.", ""]
    align = ["---" if h == "model" else "---:" for h in header]
    lines += ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    shown = []
    for r in board.iter_rows(named=True):
        lo, hi, top1 = r[f"{headline}_ci_lo"], r[f"{headline}_ci_hi"], r[f"{headline}_p_top1"]
        interval = format_interval(headline, lo, hi)
        cells = [
            str(r[f"{headline}_rank"]),
            _cell(r["model"]),
            format_rating(headline, r[f"{headline}_rating"]),
            interval,
            f"{top1:.0%}" if top1 is not None else "–",
            *(str(r[f"{m}_rank"]) if r[f"{m}_rank"] is not None else "–" for m in others),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        shown.append(interval)
    if said := interval_note(shown):
        lines += ["", f"In the interval column, {said}."]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """`text` safe in a markdown table cell (a pipe would end the cell)."""
    return text.replace("\\", "\\\\").replace("|", "\\|")
