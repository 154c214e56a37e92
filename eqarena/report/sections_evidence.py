"""The evidence sections: the equilibrium support, king-vs-rebel payoffs on the top prompts, and the
rating contributions by model family."""

from __future__ import annotations

import numpy as np

from eqarena.report import figures, interactive
from eqarena.report import html as page
from eqarena.report.data import ReportData, by
from eqarena.report.drawing import figure_uri
from eqarena.report.layout import section


def support_section(d: ReportData, eq_methods: list[str]) -> str:
    if not eq_methods:
        return section("support", '<p class="note">No equilibrium method in this run.</p>')
    mass = by(d.marginals, "method", "player", "action")
    prompts = sorted(
        {r.action for r in d.marginals if r.player == "prompt"},
        key=lambda p: (0, int(p), "") if p.isdigit() else (1, 0, p),
    )
    marg = {
        m: {
            pl: np.array(
                [
                    mass[(m, pl, a)].mass if (m, pl, a) in mass else 0.0
                    for a in (prompts if pl == "prompt" else d.models)
                ]
            )
            for pl in ("prompt", "king", "rebel")
        }
        for m in eq_methods
    }
    eqs = by(d.equilibria, "method")
    rows = []
    for m in eq_methods:
        sup = eqs[m].support if m in eqs else {}
        rows.append([m] + [f"{sup[p][0]} / {sup[p][1]}" if p in sup else None for p in ("prompt", "king", "rebel")])
    table = page.table(["method", "prompts supported", "kings supported", "rebels supported"], rows)
    plot = interactive.figure(
        interactive.prompt_support(prompts, {m: marg[m]["prompt"] for m in eq_methods}, d.prompt_texts),
        "prompt-support",
        "The prompts each equilibrium plays, largest mass first (hover for the prompt's text)",
    )
    fig = page.figure(
        figure_uri(figures.model_marginals, d.models, {m: marg[m] for m in eq_methods}),
        "support",
        "Equilibrium marginals over the models, as king and as rebel (models with mass)",
    )
    return section("support", table + plot + fig)


def payoffs_section(d: ReportData) -> str:
    if not d.top_prompts:
        return section("payoffs", '<p class="note">No equilibrium method in this run: no top-rated prompts.</p>')
    index = {m: k for k, m in enumerate(d.models)}
    u = np.zeros((len(d.top_prompts), len(d.models), len(d.models)))
    pos = {p: k for k, p in enumerate(d.top_prompts)}
    for cell in d.top_payoffs:
        if cell.king in index and cell.rebel in index:
            u[pos[cell.prompt_id], index[cell.king], index[cell.rebel]] = cell.u_king
    texts = "".join(
        f"<p><b>prompt {page.escape(p)}</b></p>"
        f"<blockquote>{page.escape(_clip(d.prompt_texts.get(p, '(text not in warehouse)')))}</blockquote>"
        for p in d.top_prompts
    )
    fig = interactive.figure(
        interactive.payoff_heatmaps(d.models, d.top_prompts, u, d.prompt_texts),
        "payoff-heatmaps",
        "u_king(prompt, king, rebel) on the top-rated prompts of the first "
        "equilibrium method (hover for the exact payoff and the prompt's text)",
    )
    return section("payoffs", fig + texts)


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def contributions_section(d: ReportData, eq_methods: list[str]) -> str:
    rows = [r for r in d.contributions_by_family if r.method in eq_methods]
    if not rows:
        return section("contributions", '<p class="note">No equilibrium method in this run.</p>')
    families = sorted({r.rebel_family for r in rows})
    kings = [m for m in d.models if any(r.king == m for r in rows)]
    cell = by(rows, "method", "king", "rebel_family")
    deltas = {
        m: np.array([[cell[(m, k, f)].delta if (m, k, f) in cell else 0.0 for f in families] for k in kings])
        for m in eq_methods
    }
    fig = page.figure(
        figure_uri(figures.contribution_heatmaps, kings, families, deltas),
        "contributions",
        "delta(king, rebel family): each row sums to the king model's rating",
    )
    first = eq_methods[0]
    table = page.table(
        ["king \\ rebel family (" + first + ")"] + families + ["sum = rating"],
        [[k] + list(deltas[first][n]) + [float(deltas[first][n].sum())] for n, k in enumerate(kings)],
    )
    return section("contributions", fig + table)
