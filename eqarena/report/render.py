"""The HTML report of one rate run, rendered from the rows the warehouse readers return (`ReportData`) as
one self-contained page: the verdict, then the ratings with their intervals, then the evidence, then the
diagnostics and raw tables folded away. Static figures are PNG data URIs, interactive ones plotly
(`interactive`), its script inlined once."""

from __future__ import annotations

from concurrent.futures import Executor
from datetime import datetime

from eqarena import methods as methods_registry
from eqarena.report import html as page
from eqarena.report import interactive
from eqarena.report.analyses import CLONES_TITLE, RISK_TITLE, clones_section, risk_section
from eqarena.report.data import ReportData
from eqarena.report.drawing import drawn_by
from eqarena.report.layout import CSS, MAIN_SECTIONS, OPTIONAL_SECTIONS
from eqarena.report.sections_answer import ratings_section, verdict_panel
from eqarena.report.sections_categories import categories_section
from eqarena.report.sections_evidence import contributions_section, payoffs_section, support_section
from eqarena.report.sections_folded import (
    coverage_section,
    diagnostics_section,
    intervals_section,
    model_ratings_section,
)


def render_html(d: ReportData, pool: Executor | None = None) -> str:
    """The whole report as one self-contained HTML string (module docstring); its static figures are
    drawn by `pool`'s processes while the rest is assembled, if given (`drawing.drawn_by`)."""
    with drawn_by(pool) as fill:
        return fill(_page(d))


def _page(d: ReportData) -> str:
    methods = methods_registry.ordered({r.method for r in d.ratings})
    eq_methods = [m for m in methods if any(e.method == m for e in d.equilibria)]
    run, params = d.run, d.run.parameters
    prompts_count = len({r.action for r in d.ratings if r.player == "prompt"})
    meta = (
        f'<p class="meta">run <code>{page.escape(run.run_id)}</code> · '
        f"dataset <b>{page.escape(params.get('dataset'))}</b> · "
        + (f"category <b>{page.escape(params['category'])}</b> only · " if params.get("category") else "")
        + f"judge(s) {page.escape(', '.join(params.get('judges') or []))} · {len(d.models)} models"
        + (f" · {prompts_count} prompts" if prompts_count else "")
        + f" · data fingerprint <code>{page.escape(run.data_fingerprint)}</code>"
        + f" · finished {page.escape(_when(run.finished_at))}</p>"
    )
    versions = ", ".join(f"{k} {v}" for k, v in sorted((run.versions or {}).items()))
    main = {"ratings": MAIN_SECTIONS["ratings"]}
    if d.categories is not None:  # right after the ratings
        main["categories"] = OPTIONAL_SECTIONS["categories"]
    main.update(MAIN_SECTIONS)
    if d.clones is not None:
        main["clones"] = CLONES_TITLE
    if d.risk is not None:
        main["risk"] = RISK_TITLE
    nav = (
        "<nav>"
        + "".join(f'<a href="#{k}">{page.escape(v)}</a>' for k, v in main.items())
        + '<a href="#diagnostics">Diagnostics and raw tables</a></nav>'
    )
    body = "".join(
        [
            ratings_section(d, methods, eq_methods),
            categories_section(d),
            support_section(d, eq_methods),
            payoffs_section(d),
            contributions_section(d, eq_methods),
            clones_section(d.clones, d.models) if d.clones is not None else "",
            risk_section(d.risk) if d.risk is not None else "",
            diagnostics_section(d, eq_methods),
            coverage_section(d),
            intervals_section(d, methods),
            model_ratings_section(d, methods),
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>eqarena report — {page.escape(params.get('dataset'))} — {page.escape(run.run_id)}</title>"
        f"<style>{CSS}</style>{interactive.script()}</head><body>"
        f"<h1>eqarena ratings: {page.escape(params.get('dataset'))}{_category_title(params)}</h1>"
        f"{meta}{verdict_panel(d)}{nav}{body}"
        f'<footer class="meta"><p>Method: Liu et al., Re-evaluating Open-ended Evaluation of Large Language '
        f"Models (ICLR 2025). Versions: {page.escape(versions)}.</p></footer></body></html>\n"
    )


def _category_title(params: dict) -> str:
    """' (category X)' for a run of one category's prompts, else nothing."""
    return f" (category {page.escape(params['category'])})" if params.get("category") else ""


def _when(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else str(value)
