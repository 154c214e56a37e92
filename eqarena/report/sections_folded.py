"""The folded sections: every method's ranks and ratings, every bootstrap interval, solver diagnostics
and data coverage (with each rating's imputed share)."""

from __future__ import annotations

import numpy as np

from eqarena.report import figures
from eqarena.report import html as page
from eqarena.report.data import BATTLES, ReportData, by
from eqarena.report.drawing import figure_uri
from eqarena.report.layout import section


def model_ratings_section(d: ReportData, methods: list[str]) -> str:
    king = by([r for r in d.ratings if r.player == "king"], "method", "action")
    ranks = {m: {model: king[(m, model)].rank for model in d.models if (m, model) in king} for m in methods}
    rows = []
    for model in d.models:
        row = [model, d.mean_payoffs.get(model)]
        for m in methods:
            r = king.get((m, model))
            row += [r.rank if r else None, r.rating if r else None]
        rows.append(row)
    header = ["model", "mean payoff"] + [h for m in methods for h in (f"{m} rank", f"{m} rating")]
    note = (
        '<p class="note">Equilibrium ratings are deviation gains u(a, x<sub>-i</sub>) − u(x) (paper eq. 1): '
        "0 for every model in the equilibrium's support, negative for the others. ne / cce select the "
        "equilibrium by the clone-invariant affinity entropy, *-shannon by the uniform target; bt is "
        "Bradley-Terry on the judged battles. Mean payoff: mean u_king over prompts and opponents.</p>"
    )
    fig = page.figure(
        figure_uri(figures.rank_comparison, d.models, ranks), "rank-comparison", "Model ranks per method, side by side"
    )
    return section("model-ratings", note + page.table(header, rows) + fig)


def intervals_section(d: ReportData, methods: list[str]) -> str:
    """Folded: every method's intervals in one table (each scheme of the equilibrium bootstrap)."""
    own = [r for r in d.ratings if r.player == "king" and r.ci_lo is not None and r.method in methods]
    if not d.intervals and not own:
        return section(
            "intervals",
            '<p class="note">No bootstrap intervals in this run (rated with --bootstrap '
            "below 2, or before they existed).</p>",
        )
    note = ""
    if d.intervals:
        first = d.intervals[0]
        note = (
            f'<p class="note">{first.replicates} bootstrap replicates per equilibrium method and scheme, '
            "each game re-solved exactly (same solver and selection target as the full data); "
            f"{first.confidence:.0%} percentile intervals, widened where needed to hold the full-data rating "
            "shown beside them. <b>over prompts</b>: prompts drawn with "
            "replacement. Copies of a prompt are clones, which the affinity target of ne / cce ignores: "
            "their interval shows how the ratings depend on which distinct prompts are present (about 63% "
            "per replicate), a sensitivity band rather than calibrated confidence; the -shannon variants "
            "weight copies. <b>over judgments</b> (judge noise): each order's mean score drawn from the "
            "Dirichlet posterior of its judge samples (a prior of half a win and half a loss), around the "
            "full-data cell, so unanimous orders and single judgments move too; a cell at +-1 can only move "
            "inward, so with few judgments per cell the replicates can all lie to one side of the full-data "
            "rating, which takes each verdict at face value: the interval then ends at that rating. "
            "Ranks: tied models share their ranks evenly; P(top k) sums "
            "ranks 1..k. Model-rating methods (Bradley-Terry) resample the judged battles.</p>"
        )
    rows = [
        [r.method, BATTLES, r.action, r.rating, r.ci_lo, r.ci_hi, None, None]
        for m in methods
        for r in sorted(own, key=lambda r: (r.rank, r.action))
        if r.method == m
    ]
    rows += [
        [r.method, r.scheme, r.model_id, r.rating, r.lo, r.hi, r.p_top1, r.p_top3]
        for m in methods
        for r in d.intervals
        if r.method == m
    ]
    table = page.table(
        ["method", "scheme", "model", "rating", "low", "high", "P(top 1)", "P(top 3)"], rows, name_columns=3
    )
    return section("intervals", note + table)


def diagnostics_section(d: ReportData, eq_methods: list[str]) -> str:
    eqs = by(d.equilibria, "method")
    methods = [m for m in eq_methods if m in eqs]
    timings = d.run.timings or {}
    rows = [
        [
            m,
            eqs[m].solution_concept,
            eqs[m].target,
            eqs[m].solver,
            f"{eqs[m].exploitability:.2e}",
            eqs[m].steps,
            eqs[m].final_temperature,
            eqs[m].seconds,
            eqs[m].joint_cells,
            eqs[m].joint_mass_omitted,
        ]
        for m in methods
    ]
    table = page.table(
        [
            "method",
            "concept",
            "target",
            "solver",
            "exploitability",
            "steps",
            "final temperature",
            "seconds",
            "CCE joint cells stored",
            "joint mass omitted",
        ],
        rows,
    )
    stage = page.table(["stage", "seconds"], [[k, float(v)] for k, v in timings.items()])
    body = table + stage
    if methods:
        body += page.figure(
            figure_uri(
                figures.solver_diagnostics,
                methods,
                [eqs[m].exploitability for m in methods],
                [eqs[m].seconds or 0.0 for m in methods],
            ),
            "diagnostics",
            "Exploitability (log scale) and solve time per equilibrium",
        )
    return section("diagnostics", body)


def coverage_section(d: ReportData) -> str:
    pairs = d.coverage.pairs
    models = sorted({r.model_a for r in pairs})
    index = {m: k for k, m in enumerate(models)}
    fraction = np.ones((len(models), len(models)))
    for r in pairs:
        fraction[index[r.model_a], index[r.model_b]] = r.prompts_covered / max(r.prompts_total, 1)
    inputs = page.table(
        ["judge", "status", "judgments"], [[r.judge, r.status, r.judgments] for r in d.coverage.inputs], name_columns=2
    )
    dropped = d.coverage.dropped
    imputed = d.coverage.imputed_cells
    drop_note = (
        f'<p class="note">{page.escape(d.run.message or "")}</p>'
        if dropped or imputed
        else '<p class="note">Complete tensor: nothing dropped or imputed.</p>'
    )
    drop_table = ""
    if dropped:
        drop_table = page.table(
            ["dropped", "name", "missing cells"],
            [[r.player, r.action, r.missing_cells] for r in dropped],
            name_columns=2,
        )
    fig = page.figure(
        figure_uri(figures.coverage_heatmap, models, fraction),
        "coverage",
        "Share of prompts on which each model pair was judged in both orders",
    )
    return section("coverage", inputs + drop_note + drop_table + _imputation_table(d) + fig)


def _imputation_table(d: ReportData) -> str:
    """Per model and equilibrium method: the share of its rating's deviation payoff on imputed cells."""
    shares = d.coverage.imputed_shares
    if not d.coverage.imputed_cells or not shares:
        return ""
    methods = list(dict.fromkeys(r.method for r in shares))
    by_model: dict[str, dict[str, float]] = {}
    for r in shares:
        by_model.setdefault(r.model_id, {})[r.method] = r.imputed_share
    rows = [
        [model, *(f"{values[m]:.0%}" if m in values else "" for m in methods)] for model, values in by_model.items()
    ]
    note = (
        '<p class="note">How much of each model rating rests on imputed cells: the share of its '
        "deviation payoff, weighted by the equilibrium's prompts and rebels, that comes from cells no judge "
        "saw (0% = judged cells only). Bradley-Terry is fit on the judged battles alone.</p>"
    )
    return note + page.table(["model", *methods], rows)
