"""The answer first: which model is best, how sure the run is, and whether the methods agree, as plain
sentences from one rate run's model ratings (the frame `warehouse.ratings.read_rating_table` returns:
method, action, rank, rating, ci_lo, ci_hi, p_top1, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from eqarena.methods import (
    AT_MOST_ZERO,
    HEADLINE,
    NO_SPREAD,
    format_interval,
    format_rating,
    is_equilibrium,
    label,
    ordered,
)

if TYPE_CHECKING:
    from eqarena.report.diagnosis import Diagnosis


@dataclass(frozen=True)
class Verdict:
    method: str  # the headline method
    best: tuple[str, ...]  # its top-ranked model(s); more than one is a tie
    lines: tuple[str, ...]


def headline_method(methods: list[str]) -> str:
    """NE if the run rated it, else CCE, else its first equilibrium method, else its first method."""
    for name in HEADLINE:  # the paper's headline ratings, when the run has them
        if name in methods:
            return name
    return next((m for m in methods if is_equilibrium(m)), methods[0])


def lead_method(methods: list[str], found: Diagnosis | None = None) -> str:
    """The method the answer and its tables lead with: the headline method, unless its diagnosis found it
    unfit to rank the models and names a rated method to lead with instead (`report.diagnosis`)."""
    if found is not None and found.lead in methods:
        return found.lead
    return headline_method(methods)


def _interval(method: str, lo, hi) -> str:
    """The interval as a clause (`methods.format_interval`'s cases said in words)."""
    if lo is None or hi is None:
        return ""
    shown = format_interval(method, lo, hi)
    if NO_SPREAD in shown:
        return "the same in the central 95% of replicates"
    if AT_MOST_ZERO in shown:
        return f"95% interval {format_rating(method, lo)} to 0, the most an equilibrium rating can be"
    return f"95% interval {format_rating(method, lo)} to {format_rating(method, hi)}"


def _names(models: list[str]) -> str:
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + f" and {models[-1]}"


def verdict(table: pl.DataFrame, found: Diagnosis | None = None) -> Verdict:
    """The headline sentences of a run's king ratings (module docstring), led by `lead_method`: where the
    diagnosis `found` of the headline method says it cannot rank the models, a first sentence says so
    and why."""
    methods = ordered(table["method"].unique().to_list())
    method = lead_method(methods, found)
    instead = []
    if found is not None and method != found.method:
        instead = [
            f"Leading with {label(method)}: the {label(found.method)} does not rank these models reliably "
            f"({'; '.join(found.unfit)}; see below)."
        ]
    rows = table.filter(pl.col("method") == method).sort("rank", "action")
    top = rows.filter(pl.col("rank") == 1)
    best = top["action"].to_list()
    first = top.row(0, named=True)
    facts = [f"rating {format_rating(method, first['rating'])}"]
    if shown := _interval(method, first["ci_lo"], first["ci_hi"]):
        facts.append(shown)
    if len(best) == 1 and first["p_top1"] is not None:
        facts.append(f"P(top 1) {first['p_top1']:.0%} over resampled prompts")
    if len(best) == 1:
        lines = [f"Best model by {label(method)}: {best[0]} ({', '.join(facts)})."]
    else:
        lines = [f"{_names(best)} tie first by {label(method)} ({', '.join(facts)})."]
    contenders = rows.filter(pl.col("p_top1").is_not_null() & (pl.col("p_top1") >= 0.05)).sort(
        "p_top1", descending=True
    )
    if len(best) == 1 and first["p_top1"] is not None and first["p_top1"] < 0.9 and contenders.height > 1:
        shares = ", ".join(f"{r['action']} {r['p_top1']:.0%}" for r in contenders.iter_rows(named=True))
        lines.append(f"The top spot is not settled: P(top 1) {shares}.")
    lines.append(_agreement(table, methods, best))
    return Verdict(method, tuple(best), tuple(instead + lines))


def _agreement(table: pl.DataFrame, methods: list[str], best: list[str]) -> str:
    """One sentence: do the other methods put the same model(s) first?"""
    firsts = {
        m: sorted(table.filter((pl.col("method") == m) & (pl.col("rank") == 1))["action"].to_list()) for m in methods
    }
    if all(set(best) <= set(f) for f in firsts.values()):
        if len(methods) == 1:
            return "Only one method was rated."
        ties = "; ".join(
            f"{label(m)} ties {_names([x for x in f if x not in best])} with it"
            for m, f in firsts.items()
            if set(f) - set(best)
        )
        return f"All {len(methods)} methods rank {_names(best)} first" + (f" ({ties})." if ties else ".")
    apart = {m: f for m, f in firsts.items() if not set(best) <= set(f)}
    if len(best) > 1 and all(set(f) <= set(best) for f in apart.values()):  # each picks among the tied
        picks: dict[tuple[str, ...], list[str]] = {}
        for m, f in apart.items():
            picks.setdefault(tuple(f), []).append(label(m))
        said = "; ".join(
            f"{_names(names)} {'puts' if len(names) == 1 else 'put'} {_names(list(f))} first"
            for f, names in picks.items()
        )
        return f"The other methods break the tie: {said}."
    others = "; ".join(f"{label(m)}: {_names(f)}" for m, f in apart.items())
    return f"The methods disagree on the top: {others}."
