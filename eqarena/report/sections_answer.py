"""The answer sections: the verdict panel (who is best, how sure, whether the methods agree, the
robustness sentences and, for odd equilibria, the diagnosis) and the ratings with their intervals."""

from __future__ import annotations

import numpy as np
import polars as pl

from eqarena import methods as methods_registry
from eqarena.report import figures, interactive
from eqarena.report import html as page
from eqarena.report.analysis_headlines import report_headlines
from eqarena.report.data import BATTLES, ReportData, king_frame
from eqarena.report.diagnosis_panel import diagnosis_html
from eqarena.report.drawing import figure_uri
from eqarena.report.layout import section
from eqarena.report.verdict import lead_method, verdict


def verdict_panel(d: ReportData) -> str:
    """The answer first: who is best by the method it leads with (`verdict.lead_method`), how sure, whether
    the methods agree."""
    table = king_frame(d)
    if table.is_empty():
        return ""
    answer = verdict(table, d.diagnosis)
    lines = [*answer.lines, *report_headlines(d.clones, d.risk, answer.method)]
    return (
        '<section id="verdict" class="verdict"><h2>Verdict</h2>'
        + "".join(f"<p>{page.escape(line)}</p>" for line in lines)
        + diagnosis_html(d.diagnosis)
        + diagnosis_html(d.lead_diagnosis, anchor="diagnosis-lead")
        + "</section>"
    )


def ratings_section(d: ReportData, methods: list[str], eq_methods: list[str]) -> str:
    """One table in the order of the method the verdict leads with (rating, interval, P(top 1), the other
    methods' ranks), the interactive ratings-with-intervals figure and the rank-probability heatmap."""
    kings = king_frame(d)
    if kings.is_empty():
        return section("ratings", '<p class="note">No model ratings in this run.</p>')
    head = lead_method(methods, d.diagnosis)
    others = [m for m in methods if m != head]
    ranks = {(r["method"], r["action"]): r["rank"] for r in kings.iter_rows(named=True)}
    order = kings.filter(pl.col("method") == head).sort("rank", "action")
    rows = []
    for r in order.iter_rows(named=True):
        shown = methods_registry.format_interval(head, r["ci_lo"], r["ci_hi"])
        rows.append(
            [
                r["action"],
                r["rank"],
                methods_registry.format_rating(head, r["rating"]),
                shown,
                None if r["p_top1"] is None else f"{r['p_top1']:.0%}",
            ]
            + [ranks.get((m, r["action"])) for m in others]
        )
    name = methods_registry.label(head)
    table = page.table(
        ["model", f"{name} rank", f"{name} rating", "95% interval", "P(top 1)"]
        + [f"{methods_registry.label(m)} rank" for m in others],
        rows,
    )
    boots = d.intervals[0].replicates if d.intervals else d.run.parameters.get("bootstrap")
    intervals = (
        f"Intervals are 95% bootstrap percentile intervals ({page.escape(boots)} replicates), widened "
        "where needed to hold the rating shown: over "
        "resampled prompts for an equilibrium method, over resampled battles for Bradley-Terry; P(top 1) "
        "is the share of replicates that rank the model first."
        if isinstance(boots, int) and boots >= 2
        else "No intervals: the run was rated with --bootstrap below 2."
    )
    said = methods_registry.interval_note(row[3] for row in rows)
    note = (
        f'<p class="note">Ordered by {page.escape(name)}, the method the verdict leads with. {intervals} '
        + (f"In the interval column, {page.escape(said)}. " if said else "")
        + "Equilibrium ratings are deviation gains (0 in the support, negative outside). "
        'The full tables are folded away below (<a href="#intervals">all intervals</a>, '
        '<a href="#model-ratings">all methods</a>).</p>'
    )
    models = order["action"].to_list()
    body = (
        note
        + table
        + interactive.figure(
            interactive.ratings_with_intervals(models, _intervals(d, methods, kings)),
            "ratings-intervals",
            "Every method's ratings with 95% bootstrap intervals (hover for exact values; equilibrium methods: "
            "dots over prompts, squares over judgments)",
        )
    )
    probs = _rank_probabilities(d, eq_methods, models)
    if probs:
        body += page.figure(
            figure_uri(figures.rank_probability_heatmaps, models, probs),
            "rank-probabilities",
            "Probability of each rank, bootstrap over prompts",
        )
    return section("ratings", body)


def _intervals(d: ReportData, methods: list[str], kings: pl.DataFrame) -> list[interactive.Interval]:
    """Each method's intervals for the ratings figure: a model-rating method's own, every scheme of an
    equilibrium method's bootstrap, or the bare rating when there is none."""
    out = []
    bootstrapped = {r.method for r in d.intervals}
    for m in methods:
        name = methods_registry.label(m)
        if m in bootstrapped:
            p_top1 = {r.model_id: r.p_top1 for r in d.intervals if r.method == m and r.scheme == "prompts"}
            out += [
                interactive.Interval(
                    m,
                    name,
                    r.scheme,
                    r.model_id,
                    r.rating,
                    r.lo,
                    r.hi,
                    r.p_top1 if r.scheme == "prompts" else p_top1.get(r.model_id),
                )
                for r in d.intervals
                if r.method == m
            ]
        else:
            out += [
                interactive.Interval(m, name, BATTLES, r["action"], r["rating"], r["ci_lo"], r["ci_hi"], r["p_top1"])
                for r in kings.filter(pl.col("method") == m).iter_rows(named=True)
            ]
    return out


def _rank_probabilities(d: ReportData, eq_methods: list[str], models: list[str]) -> dict[str, np.ndarray]:
    """P(model has rank r) over resampled prompts per equilibrium method: (M, M) arrays [model, rank - 1]."""
    index = {m: k for k, m in enumerate(models)}
    probs = {}
    for method in (m for m in eq_methods if any(r.method == m for r in d.intervals)):
        p = np.zeros((len(models), len(models)))
        for r in d.rank_probabilities:
            if r.method == method and r.scheme == "prompts" and r.model_id in index and r.rank <= len(models):
                p[index[r.model_id], r.rank - 1] = r.probability
        probs[method] = p
    return probs
