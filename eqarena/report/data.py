"""What the report shows of one rate run (`ReportData`, read by tasks/report.py), and the small lookups
every section uses."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from eqarena.report.analyses import CloneReport, RiskReport
from eqarena.report.category_table import CategoryTable
from eqarena.report.diagnosis import Diagnosis
from eqarena.warehouse.ratings import (
    Coverage,
    EquilibriumRow,
    FamilyContribution,
    IntervalRow,
    MarginalRow,
    PayoffCell,
    RankProbability,
    RatingRow,
)
from eqarena.warehouse.runs import RunRecord

BATTLES = "battles"  # what a model-rating method's own bootstrap resamples


@dataclass(frozen=True, eq=False)
class ReportData:
    """Everything the report shows, read from the warehouse for one rate run."""

    run: RunRecord
    models: list[str]
    ratings: list[RatingRow]
    equilibria: list[EquilibriumRow]
    marginals: list[MarginalRow]
    mean_payoffs: dict[str, float]
    contributions_by_family: list[FamilyContribution]
    coverage: Coverage
    top_prompts: list[str]
    top_payoffs: list[PayoffCell]
    prompt_texts: dict[str, str]
    clones: CloneReport | None = None
    risk: RiskReport | None = None
    intervals: list[IntervalRow] = field(default_factory=list)
    rank_probabilities: list[RankProbability] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    lead_diagnosis: Diagnosis | None = None  # the method the verdict leads with instead, where it does
    categories: CategoryTable | None = None  # per-category ratings of a run rated with --by


def by(rows: list, *keys: str) -> dict:
    """Rows keyed by the value(s) of their fields `keys`."""
    out: dict = {}
    for r in rows:
        out[tuple(getattr(r, k) for k in keys) if len(keys) > 1 else getattr(r, keys[0])] = r
    return out


def king_frame(d: ReportData) -> pl.DataFrame:
    """Every method's king ratings with the headline interval: a model-rating method's own, an equilibrium
    method's over resampled prompts (columns method, action, rank, rating, ci_lo, ci_hi, p_top1)."""
    intervals = {(i.method, i.model_id): i for i in d.intervals if i.scheme == "prompts"}
    rows = []
    for r in (r for r in d.ratings if r.player == "king"):
        i = intervals.get((r.method, r.action))
        rows.append(
            (
                r.method,
                r.action,
                r.rank,
                r.rating,
                r.ci_lo if r.ci_lo is not None else getattr(i, "lo", None),
                r.ci_hi if r.ci_hi is not None else getattr(i, "hi", None),
                getattr(i, "p_top1", None),
            )
        )
    return pl.DataFrame(
        rows,
        schema={
            "method": pl.Utf8,
            "action": pl.Utf8,
            "rank": pl.Int64,
            "rating": pl.Float64,
            "ci_lo": pl.Float64,
            "ci_hi": pl.Float64,
            "p_top1": pl.Float64,
        },
        orient="row",
    )
