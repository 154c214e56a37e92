"""The HTML report of one rate run, rendered from the rows the warehouse readers return (`ReportData`) as
one self-contained page: the verdict, then the ratings with their intervals, then the evidence, then the
diagnostics and raw tables folded away. Static figures are PNG data URIs, interactive ones plotly
(`interactive`), its script inlined once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl

from eqarena import methods as methods_registry
from eqarena.report import figures, interactive
from eqarena.report import html as page
from eqarena.report.analyses import (
    CLONES_TITLE,
    RISK_TITLE,
    CloneReport,
    RiskReport,
    clones_section,
    risk_section,
)
from eqarena.report.analysis_headlines import report_headlines
from eqarena.report.diagnosis import Diagnosis
from eqarena.report.diagnosis_panel import diagnosis_html
from eqarena.report.verdict import headline_method, verdict
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

MAIN_SECTIONS = {
    "ratings": "Ratings with 95% intervals",
    "support": "Equilibrium support of prompts and models",
    "payoffs": "King-vs-rebel payoffs on the top-rated prompts",
    "contributions": "Rating contributions by model family",
}
FOLDED_SECTIONS = {  # diagnostics and raw tables, folded away (<details>)
    "diagnostics": "Solver diagnostics",
    "coverage": "Data coverage",
    "intervals": "All bootstrap intervals, per method and scheme",
    "model-ratings": "All methods: ranks, ratings and mean payoffs",
}
SECTIONS = {**MAIN_SECTIONS, **FOLDED_SECTIONS}  # every report has these; clones and risk when analysed
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


_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; }
.verdict { background: #f3f7fb; border-left: 4px solid #4c72b0; padding: 0.2rem 1rem 0.4rem; margin: 1rem 0; }
.diagnosis { border-top: 1px solid #c9d6e6; margin-top: 0.6rem; } .diagnosis h3 { margin: 0.5rem 0 0.2rem; font-size: 1rem; color: #8a4b08; }
.verdict h2 { border: none; margin-top: 0.6rem; } .verdict p { margin: 0.3rem 0; font-size: 1.05rem; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.4rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.55rem; text-align: right; }
th { background: #f4f4f4; } td.name, th.name { text-align: left; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.85rem; color: #555; }
.meta { color: #555; font-size: 0.9rem; } .note { font-size: 0.88rem; color: #444; }
nav a { margin-right: 1rem; } details > summary { cursor: pointer; } details > summary h2 { display: inline-block; }
section.folded h2 { font-size: 1.15rem; border: none; margin-top: 1.2rem; } figure.interactive { max-width: 100%; }
blockquote { font-size: 0.85rem; color: #444; margin: 0.3rem 0 0.8rem 1rem; }
"""


def _section(key: str, body: str) -> str:
    if key in FOLDED_SECTIONS:
        return (f'<section id="{key}" class="folded"><details><summary><h2>{page.escape(SECTIONS[key])}</h2>'
                f"</summary>{body}</details></section>")
    return f'<section id="{key}"><h2>{page.escape(SECTIONS[key])}</h2>{body}</section>'


def _by(rows: list, *keys: str) -> dict:
    """Rows keyed by the value(s) of their fields `keys`."""
    out: dict = {}
    for r in rows:
        out[tuple(getattr(r, k) for k in keys) if len(keys) > 1 else getattr(r, keys[0])] = r
    return out


def _model_ratings_section(d: ReportData, methods: list[str]) -> str:
    king = _by([r for r in d.ratings if r.player == "king"], "method", "action")
    ranks = {m: {model: king[(m, model)].rank for model in d.models if (m, model) in king} for m in methods}
    rows = []
    for model in d.models:
        row = [model, d.mean_payoffs.get(model)]
        for m in methods:
            r = king.get((m, model))
            row += [r.rank if r else None, r.rating if r else None]
        rows.append(row)
    header = ["model", "mean payoff"] + [h for m in methods for h in (f"{m} rank", f"{m} rating")]
    note = ('<p class="note">Equilibrium ratings are deviation gains u(a, x<sub>-i</sub>) − u(x) (paper eq. 1): '
            "0 for every model in the equilibrium's support, negative for the others. ne / cce select the "
            "equilibrium by the clone-invariant affinity entropy, *-shannon by the uniform target; bt is "
            "Bradley-Terry on the judged battles. Mean payoff: mean u_king over prompts and opponents.</p>")
    fig = page.figure(figures.data_uri(figures.rank_comparison(d.models, ranks)), "rank-comparison",
                  "Model ranks per method, side by side")
    return _section("model-ratings", note + page.table(header, rows) + fig)


def _king_frame(d: ReportData) -> pl.DataFrame:
    """Every method's king ratings with the headline interval: a model-rating method's own, an equilibrium
    method's over resampled prompts (columns method, action, rank, rating, ci_lo, ci_hi, p_top1)."""
    intervals = {(i.method, i.model_id): i for i in d.intervals if i.scheme == "prompts"}
    rows = []
    for r in (r for r in d.ratings if r.player == "king"):
        i = intervals.get((r.method, r.action))
        rows.append((r.method, r.action, r.rank, r.rating, r.ci_lo if r.ci_lo is not None else getattr(i, "lo", None),
                     r.ci_hi if r.ci_hi is not None else getattr(i, "hi", None), getattr(i, "p_top1", None)))
    return pl.DataFrame(rows, schema={"method": pl.Utf8, "action": pl.Utf8, "rank": pl.Int64, "rating": pl.Float64,
                                      "ci_lo": pl.Float64, "ci_hi": pl.Float64, "p_top1": pl.Float64}, orient="row")


def _ratings_section(d: ReportData, methods: list[str], eq_methods: list[str]) -> str:
    """One table in the headline method's order (rating, interval, P(top 1), the other methods' ranks), the
    interactive ratings-with-intervals figure and the rank-probability heatmap."""
    kings = _king_frame(d)
    if kings.is_empty():
        return _section("ratings", '<p class="note">No model ratings in this run.</p>')
    head = headline_method(methods)
    others = [m for m in methods if m != head]
    ranks = {(r["method"], r["action"]): r["rank"] for r in kings.iter_rows(named=True)}
    order = kings.filter(pl.col("method") == head).sort("rank", "action")
    rows = []
    for r in order.iter_rows(named=True):
        shown = ("–" if r["ci_lo"] is None or r["ci_hi"] is None
                 else f"{methods_registry.format_rating(head, r['ci_lo'])} to "
                      f"{methods_registry.format_rating(head, r['ci_hi'])}")
        rows.append([r["action"], r["rank"], methods_registry.format_rating(head, r["rating"]), shown,
                     None if r["p_top1"] is None else f"{r['p_top1']:.0%}"]
                    + [ranks.get((m, r["action"])) for m in others])
    name = methods_registry.label(head)
    table = page.table(["model", f"{name} rank", f"{name} rating", "95% interval", "P(top 1)"]
                       + [f"{methods_registry.label(m)} rank" for m in others], rows)
    boots = d.intervals[0].replicates if d.intervals else d.run.parameters.get("bootstrap")
    intervals = (f"Intervals are 95% bootstrap percentile intervals ({page.escape(boots)} replicates): over "
                 "resampled prompts for an equilibrium method, over resampled battles for Bradley-Terry; P(top 1) "
                 "is the share of replicates that rank the model first."
                 if isinstance(boots, int) and boots >= 2 else "No intervals: the run was rated with --bootstrap "
                 "below 2.")
    note = (f'<p class="note">Ordered by {page.escape(name)}, the headline method. {intervals} Equilibrium '
            "ratings are deviation gains (0 in the support, negative outside). "
            'The full tables are folded away below (<a href="#intervals">all intervals</a>, '
            '<a href="#model-ratings">all methods</a>).</p>')
    models = order["action"].to_list()
    body = note + table + interactive.figure(
        interactive.ratings_with_intervals(models, _intervals(d, methods, kings)), "ratings-intervals",
        "Every method's ratings with 95% bootstrap intervals (hover for exact values; equilibrium methods: "
        "dots over prompts, squares over judgments)")
    probs = _rank_probabilities(d, eq_methods, models)
    if probs:
        body += page.figure(figures.data_uri(figures.rank_probability_heatmaps(models, probs)),
                            "rank-probabilities", "Probability of each rank, bootstrap over prompts")
    return _section("ratings", body)


def _intervals(d: ReportData, methods: list[str], kings: pl.DataFrame) -> list[interactive.Interval]:
    """Each method's intervals for the ratings figure: a model-rating method's own, every scheme of an
    equilibrium method's bootstrap, or the bare rating when there is none."""
    out = []
    bootstrapped = {r.method for r in d.intervals}
    for m in methods:
        name = methods_registry.label(m)
        if m in bootstrapped:
            p_top1 = {r.model_id: r.p_top1 for r in d.intervals if r.method == m and r.scheme == "prompts"}
            out += [interactive.Interval(m, name, r.scheme, r.model_id, r.rating, r.lo, r.hi,
                                         r.p_top1 if r.scheme == "prompts" else p_top1.get(r.model_id))
                    for r in d.intervals if r.method == m]
        else:
            out += [interactive.Interval(m, name, BATTLES, r["action"], r["rating"], r["ci_lo"], r["ci_hi"],
                                         r["p_top1"])
                    for r in kings.filter(pl.col("method") == m).iter_rows(named=True)]
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


def _intervals_section(d: ReportData, methods: list[str]) -> str:
    """Folded: every method's intervals in one table (each scheme of the equilibrium bootstrap)."""
    own = [r for r in d.ratings if r.player == "king" and r.ci_lo is not None and r.method in methods]
    if not d.intervals and not own:
        return _section("intervals", '<p class="note">No bootstrap intervals in this run (rated with --bootstrap '
                        "below 2, or before they existed).</p>")
    note = ""
    if d.intervals:
        first = d.intervals[0]
        note = (f'<p class="note">{first.replicates} bootstrap replicates per equilibrium method and scheme, '
                "each game re-solved exactly (same solver and selection target as the full data); "
                f"{first.confidence:.0%} percentile intervals. <b>over prompts</b>: prompts drawn with "
                "replacement. Copies of a prompt are clones, which the affinity target of ne / cce ignores: "
                "their interval shows how the ratings depend on which distinct prompts are present (about 63% "
                "per replicate), a sensitivity band rather than calibrated confidence; the -shannon variants "
                "weight copies. <b>over judgments</b> (judge noise): each order's mean score drawn from the "
                "Dirichlet posterior of its judge samples (a prior of half a win and half a loss), around the "
                "full-data cell, so unanimous orders and single judgments move too; a cell at +-1 can only move "
                "inward, so with few judgments per cell the interval can sit beside the full-data rating, which "
                "takes each verdict at face value. Ranks: tied models share their ranks evenly; P(top k) sums "
                "ranks 1..k. Model-rating methods (Bradley-Terry) resample the judged battles.</p>")
    rows = [[r.method, BATTLES, r.action, r.rating, r.ci_lo, r.ci_hi, None, None]
            for m in methods for r in sorted(own, key=lambda r: (r.rank, r.action)) if r.method == m]
    rows += [[r.method, r.scheme, r.model_id, r.rating, r.lo, r.hi, r.p_top1, r.p_top3]
             for m in methods for r in d.intervals if r.method == m]
    table = page.table(["method", "scheme", "model", "rating", "low", "high", "P(top 1)", "P(top 3)"], rows,
                       name_columns=3)
    return _section("intervals", note + table)


def _support_section(d: ReportData, eq_methods: list[str]) -> str:
    if not eq_methods:
        return _section("support", '<p class="note">No equilibrium method in this run.</p>')
    mass = _by(d.marginals, "method", "player", "action")
    prompts = sorted({r.action for r in d.marginals if r.player == "prompt"},
                     key=lambda p: (0, int(p), "") if p.isdigit() else (1, 0, p))
    marg = {m: {pl: np.array([mass[(m, pl, a)].mass if (m, pl, a) in mass else 0.0
                              for a in (prompts if pl == "prompt" else d.models)])
                for pl in ("prompt", "king", "rebel")} for m in eq_methods}
    eqs = _by(d.equilibria, "method")
    rows = []
    for m in eq_methods:
        sup = eqs[m].support if m in eqs else {}
        rows.append([m] + [f"{sup[p][0]} / {sup[p][1]}" if p in sup else None for p in ("prompt", "king", "rebel")])
    table = page.table(["method", "prompts supported", "kings supported", "rebels supported"], rows)
    plot = interactive.figure(
        interactive.prompt_support(prompts, {m: marg[m]["prompt"] for m in eq_methods}, d.prompt_texts),
        "prompt-support", "The prompts each equilibrium plays, largest mass first (hover for the prompt's text)")
    fig = page.figure(figures.data_uri(figures.model_marginals(d.models, {m: marg[m] for m in eq_methods})),
                      "support", "Equilibrium marginals over the models, as king and as rebel (models with mass)")
    return _section("support", table + plot + fig)


def _payoffs_section(d: ReportData) -> str:
    if not d.top_prompts:
        return _section("payoffs", '<p class="note">No equilibrium method in this run: no top-rated prompts.</p>')
    index = {m: k for k, m in enumerate(d.models)}
    u = np.zeros((len(d.top_prompts), len(d.models), len(d.models)))
    pos = {p: k for k, p in enumerate(d.top_prompts)}
    for cell in d.top_payoffs:
        if cell.king in index and cell.rebel in index:
            u[pos[cell.prompt_id], index[cell.king], index[cell.rebel]] = cell.u_king
    texts = "".join(
        f"<p><b>prompt {page.escape(p)}</b></p>"
        f"<blockquote>{page.escape(_clip(d.prompt_texts.get(p, '(text not in warehouse)')))}</blockquote>"
        for p in d.top_prompts)
    fig = interactive.figure(interactive.payoff_heatmaps(d.models, d.top_prompts, u, d.prompt_texts),
                             "payoff-heatmaps", "u_king(prompt, king, rebel) on the top-rated prompts of the first "
                             "equilibrium method (hover for the exact payoff and the prompt's text)")
    return _section("payoffs", fig + texts)


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _contributions_section(d: ReportData, eq_methods: list[str]) -> str:
    rows = [r for r in d.contributions_by_family if r.method in eq_methods]
    if not rows:
        return _section("contributions", '<p class="note">No equilibrium method in this run.</p>')
    families = sorted({r.rebel_family for r in rows})
    kings = [m for m in d.models if any(r.king == m for r in rows)]
    cell = _by(rows, "method", "king", "rebel_family")
    deltas = {m: np.array([[cell[(m, k, f)].delta if (m, k, f) in cell else 0.0 for f in families]
                           for k in kings]) for m in eq_methods}
    fig = page.figure(figures.data_uri(figures.contribution_heatmaps(kings, families, deltas)), "contributions",
                  "delta(king, rebel family): each row sums to the king model's rating")
    first = eq_methods[0]
    table = page.table(["king \\ rebel family (" + first + ")"] + families + ["sum = rating"],
                   [[k] + list(deltas[first][n]) + [float(deltas[first][n].sum())] for n, k in enumerate(kings)])
    return _section("contributions", fig + table)


def _diagnostics_section(d: ReportData, eq_methods: list[str]) -> str:
    eqs = _by(d.equilibria, "method")
    methods = [m for m in eq_methods if m in eqs]
    timings = d.run.timings or {}
    rows = [[m, eqs[m].solution_concept, eqs[m].target, eqs[m].solver, f'{eqs[m].exploitability:.2e}',
             eqs[m].steps, eqs[m].final_temperature, eqs[m].seconds, eqs[m].joint_cells,
             eqs[m].joint_mass_omitted] for m in methods]
    table = page.table(["method", "concept", "target", "solver", "exploitability", "steps", "final temperature",
                    "seconds", "CCE joint cells stored", "joint mass omitted"], rows)
    stage = page.table(["stage", "seconds"], [[k, float(v)] for k, v in timings.items()])
    body = table + stage
    if methods:
        body += page.figure(figures.data_uri(figures.solver_diagnostics(
            methods, [eqs[m].exploitability for m in methods], [eqs[m].seconds or 0.0 for m in methods])),
            "diagnostics", "Exploitability (log scale) and solve time per equilibrium")
    return _section("diagnostics", body)


def _coverage_section(d: ReportData) -> str:
    pairs = d.coverage.pairs
    models = sorted({r.model_a for r in pairs})
    index = {m: k for k, m in enumerate(models)}
    fraction = np.ones((len(models), len(models)))
    for r in pairs:
        fraction[index[r.model_a], index[r.model_b]] = r.prompts_covered / max(r.prompts_total, 1)
    inputs = page.table(["judge", "status", "judgments"],
                    [[r.judge, r.status, r.judgments] for r in d.coverage.inputs], name_columns=2)
    dropped = d.coverage.dropped
    imputed = d.coverage.imputed_cells
    drop_note = (f'<p class="note">{page.escape(d.run.message or "")}</p>' if dropped or imputed
                 else '<p class="note">Complete tensor: nothing dropped or imputed.</p>')
    drop_table = ""
    if dropped:
        drop_table = page.table(["dropped", "name", "missing cells"],
                            [[r.player, r.action, r.missing_cells] for r in dropped], name_columns=2)
    fig = page.figure(figures.data_uri(figures.coverage_heatmap(models, fraction)), "coverage",
                  "Share of prompts on which each model pair was judged in both orders")
    return _section("coverage", inputs + drop_note + drop_table + _imputation_table(d) + fig)


def _imputation_table(d: ReportData) -> str:
    """Per model and equilibrium method: the share of its rating's deviation payoff on imputed cells."""
    shares = d.coverage.imputed_shares
    if not d.coverage.imputed_cells or not shares:
        return ""
    methods = list(dict.fromkeys(r.method for r in shares))
    by_model: dict[str, dict[str, float]] = {}
    for r in shares:
        by_model.setdefault(r.model_id, {})[r.method] = r.imputed_share
    rows = [[model, *(f"{values[m]:.0%}" if m in values else "" for m in methods)]
            for model, values in by_model.items()]
    note = ('<p class="note">How much of each model rating rests on imputed cells: the share of its '
            "deviation payoff, weighted by the equilibrium's prompts and rebels, that comes from cells no judge "
            "saw (0% = judged cells only). Bradley-Terry is fit on the judged battles alone.</p>")
    return note + page.table(["model", *methods], rows)


def render_html(d: ReportData) -> str:
    """The whole report as one self-contained HTML string (module docstring)."""
    methods = methods_registry.ordered({r.method for r in d.ratings})
    eq_methods = [m for m in methods if any(e.method == m for e in d.equilibria)]
    run, params = d.run, d.run.parameters
    prompts_count = len({r.action for r in d.ratings if r.player == "prompt"})
    meta = (f'<p class="meta">run <code>{page.escape(run.run_id)}</code> · '
            f'dataset <b>{page.escape(params.get("dataset"))}</b> · '
            f'judge(s) {page.escape(", ".join(params.get("judges") or []))} · {len(d.models)} models'
            + (f" · {prompts_count} prompts" if prompts_count else "")
            + f' · data fingerprint <code>{page.escape(run.data_fingerprint)}</code>'
            + f' · finished {page.escape(_when(run.finished_at))}</p>')
    versions = ", ".join(f"{k} {v}" for k, v in sorted((run.versions or {}).items()))
    main = dict(MAIN_SECTIONS)
    if d.clones is not None:
        main["clones"] = CLONES_TITLE
    if d.risk is not None:
        main["risk"] = RISK_TITLE
    nav = ("<nav>" + "".join(f'<a href="#{k}">{page.escape(v)}</a>' for k, v in main.items())
           + '<a href="#diagnostics">Diagnostics and raw tables</a></nav>')
    body = "".join([
        _ratings_section(d, methods, eq_methods),
        _support_section(d, eq_methods),
        _payoffs_section(d),
        _contributions_section(d, eq_methods),
        clones_section(d.clones, d.models) if d.clones is not None else "",
        risk_section(d.risk) if d.risk is not None else "",
        _diagnostics_section(d, eq_methods),
        _coverage_section(d),
        _intervals_section(d, methods),
        _model_ratings_section(d, methods),
    ])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>eqarena report — {page.escape(params.get('dataset'))} — {page.escape(run.run_id)}</title>"
        f"<style>{_CSS}</style>{interactive.script()}</head><body>"
        f"<h1>eqarena ratings: {page.escape(params.get('dataset'))}</h1>{meta}{_verdict_panel(d)}{nav}{body}"
        f'<footer class="meta"><p>Method: Liu et al., Re-evaluating Open-ended Evaluation of Large Language '
        f"Models (ICLR 2025). Versions: {page.escape(versions)}.</p></footer></body></html>\n"
    )


def _verdict_panel(d: ReportData) -> str:
    """The answer first: who is best by the headline method, how sure, whether the methods agree."""
    table = _king_frame(d)
    if table.is_empty():
        return ""
    answer = verdict(table)
    lines = [*answer.lines, *report_headlines(d.clones, d.risk, answer.method)]
    return ('<section id="verdict" class="verdict"><h2>Verdict</h2>'
            + "".join(f"<p>{page.escape(line)}</p>" for line in lines) + diagnosis_html(d.diagnosis) + "</section>")


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else str(value)
