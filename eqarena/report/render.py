"""The HTML report of one rate run: every section, rendered from the rows the warehouse readers return
(`ReportData`), as one self-contained page (figures are embedded PNG data URIs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import polars as pl

from eqarena import methods as methods_registry
from eqarena.report import figures
from eqarena.report import html as page
from eqarena.report.analyses import (
    CLONES_TITLE,
    RISK_TITLE,
    CloneReport,
    RiskReport,
    clones_section,
    risk_section,
)
from eqarena.report.verdict import verdict
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

SECTIONS = {
    "model-ratings": "Model ratings by method",
    "model-intervals": "Confidence intervals of model-rating methods (Bradley-Terry)",
    "intervals": "Equilibrium rating intervals and rank probabilities",
    "support": "Equilibrium support of prompts and models",
    "payoffs": "King-vs-rebel payoffs on the top-rated prompts",
    "contributions": "Rating contributions by model family",
    "diagnostics": "Solver diagnostics",
    "coverage": "Data coverage",
}


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


_CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto; max-width: 1200px;
       color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; }
.verdict { background: #f3f7fb; border-left: 4px solid #4c72b0; padding: 0.2rem 1rem 0.4rem; margin: 1rem 0; }
.verdict h2 { border: none; margin-top: 0.6rem; } .verdict p { margin: 0.3rem 0; font-size: 1.05rem; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.4rem; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.88rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.55rem; text-align: right; }
th { background: #f4f4f4; } td.name, th.name { text-align: left; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.85rem; color: #555; }
.meta { color: #555; font-size: 0.9rem; } .note { font-size: 0.88rem; color: #444; }
nav a { margin-right: 1rem; } blockquote { font-size: 0.85rem; color: #444; margin: 0.3rem 0 0.8rem 1rem; }
"""


def _section(key: str, body: str) -> str:
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


def _model_intervals_section(d: ReportData, methods: list[str]) -> str:
    """The intervals model-rating methods (such as Bradley-Terry) compute themselves."""
    shown = [m for m in methods if any(r.method == m and r.player == "king" and r.ci_lo is not None
                                       for r in d.ratings)]
    if not shown:
        return _section("model-intervals", '<p class="note">No model-rating method of this run has intervals '
                        "(rated without Bradley-Terry, or with --bootstrap below 2).</p>")
    body, boots = "", d.run.parameters.get("bootstrap")
    for method in shown:
        rows = sorted((r for r in d.ratings if r.method == method and r.player == "king"), key=lambda r: r.rank)
        models = [r.action for r in rows]
        rating = np.array([r.rating for r in rows])
        lo = np.array([r.ci_lo if r.ci_lo is not None else r.rating for r in rows])
        hi = np.array([r.ci_hi if r.ci_hi is not None else r.rating for r in rows])
        name = methods_registry.label(method)
        body += page.table(["model", "rank", f"{name} rating", "CI low", "CI high"],
                           [[r.action, r.rank, r.rating, r.ci_lo, r.ci_hi] for r in rows])
        body += page.figure(figures.data_uri(figures.bt_intervals(models, rating, lo, hi, method, name)),
                            f"{method}-intervals", f"{name} ratings with bootstrap confidence intervals "
                            f"({boots} resamples)")
    return _section("model-intervals", body)


def _intervals_section(d: ReportData, eq_methods: list[str]) -> str:
    """Bootstrap intervals of every equilibrium method (both schemes) and the rank-probability heatmap."""
    if not d.intervals:
        return _section("intervals", '<p class="note">No bootstrap intervals for this run\'s equilibrium '
                        "methods (rated with --bootstrap below 2, without an equilibrium method, or before "
                        "they existed).</p>")
    methods = [m for m in eq_methods if any(r.method == m for r in d.intervals)]
    shown: dict = {}
    for r in d.intervals:
        shown.setdefault(r.method, {}).setdefault(r.scheme, {})[r.model_id] = (r.rating, r.lo, r.hi)
    scheme = "prompts"
    index = {m: k for k, m in enumerate(d.models)}
    probs = {}
    for method in methods:
        p = np.zeros((len(d.models), len(d.models)))
        for r in d.rank_probabilities:
            if (r.method == method and r.scheme == scheme and r.model_id in index
                    and r.rank <= len(d.models)):
                p[index[r.model_id], r.rank - 1] = r.probability
        probs[method] = p
    first = d.intervals[0]
    note = (f'<p class="note">{first.replicates} bootstrap replicates per method and scheme, each game '
            "re-solved exactly (same solver and selection target as the full data); "
            f"{first.confidence:.0%} percentile intervals, widened where needed to hold the full-data rating "
            "shown beside them. <b>over prompts</b>: prompts drawn with "
            "replacement. Copies of a prompt are clones, which the affinity target of ne / cce ignores: their "
            "interval shows how the ratings depend on which distinct prompts are present (about 63% per "
            "replicate), a sensitivity band rather than calibrated confidence; the -shannon variants weight "
            "copies. <b>over judgments</b> (judge noise): each order's mean score drawn from the Dirichlet "
            "posterior of its judge samples (a prior of half a win and half a loss), around the full-data cell, "
            "so unanimous orders and single judgments move too; a cell at +-1 can only move inward, so with few "
            "judgments per cell the replicates can all lie to one side of the full-data rating, which takes "
            "each verdict at face value: the interval then ends at that rating. Ranks: tied models share their "
            "ranks evenly; P(top k) sums ranks 1..k.</p>")
    figs = (page.figure(figures.data_uri(figures.equilibrium_intervals(d.models, {m: shown[m] for m in methods})),
                        "equilibrium-intervals", "Full-data ratings with bootstrap intervals, per method and scheme")
            + page.figure(figures.data_uri(figures.rank_probability_heatmaps(d.models, probs)),
                          "rank-probabilities", "Probability of each rank, bootstrap over prompts"))
    rows = [[r.method, r.scheme, r.model_id, r.rating, r.lo, r.hi, r.p_top1, r.p_top3]
            for m in methods for r in d.intervals if r.method == m]
    table = page.table(["method", "scheme", "model", "rating", "low", "high", "P(top 1)", "P(top 3)"], rows,
                       name_columns=3)
    return _section("intervals", note + figs + table)


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
    fig = page.figure(figures.data_uri(figures.equilibrium_support(d.models, prompts, marg)), "support",
                  "Equilibrium marginals: models as king and rebel, and the most-weighted prompts")
    return _section("support", table + fig)


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
    fig = page.figure(figures.data_uri(figures.payoff_heatmaps(d.models, d.top_prompts, u)), "payoff-heatmaps",
                  "u_king(prompt, king, rebel) on the top-rated prompts of the first equilibrium method")
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
    """The whole report as one HTML string; figures are embedded PNG data URIs."""
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
    sections = dict(SECTIONS)
    if d.clones is not None:
        sections["clones"] = CLONES_TITLE
    if d.risk is not None:
        sections["risk"] = RISK_TITLE
    nav = "<nav>" + "".join(f'<a href="#{k}">{page.escape(v)}</a>' for k, v in sections.items()) + "</nav>"
    body = "".join([
        _model_ratings_section(d, methods),
        _model_intervals_section(d, methods),
        _intervals_section(d, eq_methods),
        _support_section(d, eq_methods),
        _payoffs_section(d),
        _contributions_section(d, eq_methods),
        _diagnostics_section(d, eq_methods),
        _coverage_section(d),
        clones_section(d.clones, d.models) if d.clones is not None else "",
        risk_section(d.risk) if d.risk is not None else "",
    ])
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>eqarena report — {page.escape(params.get('dataset'))} — {page.escape(run.run_id)}</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>eqarena ratings: {page.escape(params.get('dataset'))}</h1>{meta}{_verdict_panel(d)}{nav}{body}"
        f'<footer class="meta"><p>Method: Liu et al., Re-evaluating Open-ended Evaluation of Large Language '
        f"Models (ICLR 2025). Versions: {page.escape(versions)}.</p></footer></body></html>\n"
    )


def _verdict_panel(d: ReportData) -> str:
    """The answer first: who is best by the headline method, how sure, whether the methods agree."""
    kings = [r for r in d.ratings if r.player == "king"]
    if not kings:
        return ""
    intervals = {(i.method, i.model_id): i for i in d.intervals if i.scheme == "prompts"}
    table = pl.DataFrame(
        [(r.method, r.action, r.rank, r.rating,
          r.ci_lo if r.ci_lo is not None else getattr(intervals.get((r.method, r.action)), "lo", None),
          r.ci_hi if r.ci_hi is not None else getattr(intervals.get((r.method, r.action)), "hi", None),
          getattr(intervals.get((r.method, r.action)), "p_top1", None)) for r in kings],
        schema={"method": pl.Utf8, "action": pl.Utf8, "rank": pl.Int64, "rating": pl.Float64, "ci_lo": pl.Float64,
                "ci_hi": pl.Float64, "p_top1": pl.Float64}, orient="row")
    lines = verdict(table).lines
    return ('<section id="verdict" class="verdict"><h2>Verdict</h2>'
            + "".join(f"<p>{page.escape(line)}</p>" for line in lines) + "</section>")


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else str(value)
