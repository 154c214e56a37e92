"""The report's sections on the robustness analyses of its rate run: adversarial clones (paper
Section 4.2, App. F.5) and risk dominance (App. F.4), shown when the warehouse holds them."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

from eqarena.methods import ordered
from eqarena.report import analysis_figures
from eqarena.report import html as page
from eqarena.report.analysis_headlines import risk_sentence
from eqarena.report.drawing import figure_uri
from eqarena.warehouse import analyses as store

CLONES_TITLE = "Robustness to adversarial prompt copies"
RISK_TITLE = "Risk dominance among Nash equilibria"
PURE_NE_LISTED = 10
RISK_ROWS_LISTED = 10


@dataclass(frozen=True, eq=False)
class CloneReport:
    run_id: str
    target: str
    lam: float
    seed: int
    rows: pl.DataFrame  # clone_robustness rows of the run
    verdicts: dict[str, str]


@dataclass(frozen=True, eq=False)
class RiskReport:
    run_id: str
    rows: pl.DataFrame  # risk_dominance rows, by equilibrium
    models: list[str]
    king_ratings: np.ndarray  # (K, M), equilibria in the order of `rows`
    pure: pl.DataFrame  # pure_nash_equilibria rows


def load_clone_report(con: duckdb.DuckDBPyConnection, rate_run_id: str) -> CloneReport | None:
    """The newest clone analysis of the rate run, or None."""
    run_id = store.latest_analysis(con, "clones", rate_run_id)
    if run_id is None:
        return None
    rows = store.read_clone_robustness(con, run_id)
    first = rows.row(0, named=True)
    return CloneReport(
        run_id, first["target"], first["adversary_lambda"], first["seed"], rows, store.read_clone_verdicts(con, run_id)
    )


def load_risk_report(con: duckdb.DuckDBPyConnection, rate_run_id: str) -> RiskReport | None:
    """The newest risk analysis of the rate run, or None."""
    run_id = store.latest_analysis(con, "risk", rate_run_id)
    if run_id is None:
        return None
    rows = store.read_risk_dominance(con, run_id)
    ratings = store.read_risk_ratings(con, run_id, "king")
    models = sorted(ratings["action"].unique().to_list())
    wide = ratings.pivot(on="action", index="equilibrium", values="rating").sort("equilibrium")
    order = {e: k for k, e in enumerate(wide["equilibrium"].to_list())}
    king = wide.select(models).to_numpy()[[order[e] for e in rows["equilibrium"].to_list()]]
    return RiskReport(run_id, rows, models, king, store.read_pure_nash(con, run_id))


def clones_section(report: CloneReport, models: list[str]) -> str:
    rows = report.rows
    methods = ordered(set(rows["method"].to_list()))
    variants = [v for v in ("exact", "noisy") if v in set(rows["variant"].to_list())]
    ranks = {}
    for variant in variants:
        for method in methods:
            part = rows.filter((pl.col("variant") == variant) & (pl.col("method") == method))
            wide = part.pivot(on="model_id", index="n_clones", values="rank").sort("n_clones")
            present = [m for m in models if m in wide.columns]
            ranks[(variant, method)] = (wide["n_clones"].to_numpy(), wide.select(present).to_numpy())
    shown = [m for m in models if m in set(rows["model_id"].to_list())]
    fig = page.figure(
        figure_uri(analysis_figures.clone_ranks, methods, variants, shown, report.target, ranks),
        "clone-ranks",
        f"Model ranks as copies of prompts adversarial to {report.target} are added",
    )
    verdicts = "".join(f"<li>{page.escape(report.verdicts[m])}</li>" for m in methods if m in report.verdicts)
    target_rows = rows.filter(pl.col("model_id") == report.target)
    header, table_rows = ["method", "variant"], []
    ns = sorted(set(target_rows["n_clones"].to_list()))
    for method in methods:
        for variant in variants:
            cells = dict(
                target_rows.filter((pl.col("method") == method) & (pl.col("variant") == variant))
                .select("n_clones", "rank")
                .iter_rows()
            )
            table_rows.append([method, variant] + [cells.get(n) for n in ns])
    note = (
        f'<p class="note">Analysis <code>{page.escape(report.run_id)}</code>: n prompts drawn from '
        f"softmax(−{report.lam:g} · {page.escape(report.target)}'s mean payoff per prompt) (seed {report.seed}) "
        "are appended to the game as exact copies, or with Uniform(−0.01, 0.01) payoff noise, and every "
        "method re-rates the models. Ranks are dense; ratings within 1e-4 share a rank. The copies' prompt "
        "ids (<code>clone:&lt;prompt&gt;:&lt;k&gt;</code>) are in table <code>clone_prompts</code>; the "
        "ingested prompts are unchanged.</p>"
    )
    table = page.table(
        header + [f"rank of {report.target} at n = {n}" if k == 0 else f"n = {n}" for k, n in enumerate(ns)],
        table_rows,
        name_columns=2,
    )
    return f'<section id="clones"><h2>{page.escape(CLONES_TITLE)}</h2>{note}<ul>{verdicts}</ul>{fig}{table}</section>'


def risk_section(report: RiskReport) -> str:
    rows = report.rows
    uniform = rows.select("prompt_uniform", "king_uniform", "rebel_uniform").to_numpy()
    updated = rows.select("prompt_updated", "king_updated", "rebel_updated").to_numpy()
    selected = int(np.flatnonzero(rows["is_selected"].to_numpy())[0])
    fig = page.figure(
        figure_uri(analysis_figures.risk_panels, report.models, report.king_ratings, uniform, updated, selected),
        "risk",
        "Ratings and expected payoffs of every equilibrium found (paper Figure 11)",
    )
    listed = rows.sort("rank_updated").head(RISK_ROWS_LISTED)
    if not listed["is_selected"].any():
        listed = pl.concat([listed, rows.filter(pl.col("is_selected"))])
    table = page.table(
        [
            "equilibrium",
            "selected",
            "exploitability",
            "sum (uniform priors)",
            "rank",
            "sum (iterated priors)",
            "rank",
            "prompt",
            "king",
            "rebel",
        ],
        [
            [
                r["equilibrium"],
                "yes" if r["is_selected"] else "",
                f"{r['exploitability']:.1e}",
                r["sum_uniform"],
                r["rank_uniform"],
                r["sum_updated"],
                r["rank_updated"],
                r["prompt_updated"],
                r["king_updated"],
                r["rebel_updated"],
            ]
            for r in listed.iter_rows(named=True)
        ],
    )
    pure = report.pure
    pure_list = "".join(
        f"<li>prompt {page.escape(r['prompt_id'])}, king {page.escape(r['king'])}, rebel {page.escape(r['rebel'])}</li>"
        for r in pure.head(PURE_NE_LISTED).iter_rows(named=True)
    )
    more = f" (first {PURE_NE_LISTED} listed)" if pure.height > PURE_NE_LISTED else ""
    pure_html = (
        f"<p>{pure.height} pure-strategy Nash equilibria{more}; all are in table "
        f"<code>pure_nash_equilibria</code>.</p><ul>{pure_list}</ul>"
        if pure.height
        else "<p>The game has no pure-strategy Nash equilibrium.</p>"
    )
    note = (
        f'<p class="note">Analysis <code>{page.escape(report.run_id)}</code>. Each player plays its strategy '
        "of one equilibrium while the others play theirs from equilibria drawn independently, first under "
        "uniform priors, then under priors updated 10,000 times towards the equilibria that pay more "
        "(paper App. F.4). A large sum of expected payoffs means the equilibrium stays good when players "
        "miscoordinate: it is less risky.</p>"
    )
    return (
        f'<section id="risk"><h2>{page.escape(RISK_TITLE)}</h2><p><b>{page.escape(risk_sentence(rows))}</b></p>'
        f"{note}{fig}{table}{pure_html}</section>"
    )
