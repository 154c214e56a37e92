"""The self-contained HTML page of a simulated improvement path: the final-entropy table, Figure 1
centre (entropy curves) and Figure 1 right / Figure 4 (one trial per method) as PNG data URIs."""

from __future__ import annotations

from html import escape
from pathlib import Path

import polars as pl

from eqarena.report.figures import data_uri
from eqarena.report.simulation_figures import entropy_curves, path_heatmaps
from eqarena.solvers.analyses.improvement_summary import EntropyDifference, FinalEntropy

_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse}td,th{padding:.25em .8em;border-bottom:1px solid #ddd;text-align:right}"
    "td:first-child,th:first-child,td:nth-child(2),th:nth-child(2){text-align:left}img{max-width:100%}"
)


def _interval(i) -> str:
    return f"{i.mean:.3f} [{i.lo:.3f}, {i.hi:.3f}]"


def write_page(
    path: Path,
    run_id: str,
    parameters: dict,
    frame: pl.DataFrame,
    finals: list[FinalEntropy],
    differences: list[EntropyDifference],
    methods: list[str],
    settings: list[str],
) -> Path:
    """Write the page to `path` and return it."""
    rows = "".join(
        f"<tr><td>{escape(f.method)}</td><td>{escape(f.setting)}</td><td>{_interval(f.model)}</td>"
        f"<td>{_interval(f.prompt)}</td><td>{f.model.trials}</td></tr>"
        for f in finals
    )
    sentences = "".join(f"<li>{escape(d.sentence)}</li>" for d in differences)
    example = "additional" if "additional" in settings else settings[0]
    figures = [("Skill entropy over iterations (Figure 1 centre)", entropy_curves(frame, methods, settings))]
    figures += [
        (f"One trial under {m} (Figure 1 right, Figure 4)", path_heatmaps(frame, m, example, 0)) for m in methods
    ]
    images = "".join(
        f"<h2>{escape(title)}</h2><img alt='{escape(title)}' src='{data_uri(fig)}'>" for title, fig in figures
    )
    sizes = ", ".join(f"{k} = {v}" for k, v in parameters.items())
    html = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>Improvement path {escape(run_id)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>Simulated improvement path</h1>"
        f"<p>Run {escape(run_id)} (paper Section 2, Algorithm 1): {escape(sizes)}.</p>"
        "<h2>Final skill entropy (nats), mean over trials [95% bootstrap interval]</h2>"
        "<table><tr><th>method</th><th>setting</th><th>model entropy</th><th>prompt entropy</th><th>trials</th></tr>"
        f"{rows}</table><ul>{sentences}</ul>{images}</body></html>"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
