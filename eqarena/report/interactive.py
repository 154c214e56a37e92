"""Interactive figures of the report (hover for exact values and prompt texts), drawn with plotly.

The page stays one self-contained file that opens offline: plotly.js is inlined once (`script()`), every
figure is a `<div>` plus a short inline script, and nothing is loaded from a CDN. Why plotly: it ships
plotly.js inside its pure-Python wheel and draws subplots, interval plots and heatmaps with hover text
without further packages. Its cost is size: plotly.js is 4.8 MB, which took the bundled PRD report from
0.9 MB to 5.6 MB. The alternative, Vega-Lite inlined by vl-convert, is a 0.9 MB script but needs
vl-convert's 84 MB native wheel (and altair) to produce it; the report's users open it locally, where
5 MB is not felt."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from eqarena.methods import colour as method_colour
from eqarena.report import html as page

PROMPT_CHARS = 300
_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
_FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12}


def script() -> str:
    """plotly.js, inlined: put it once in the page, before the first interactive figure."""
    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def figure(fig: go.Figure, name: str, caption: str) -> str:
    """`fig` as a `<figure>` with its caption; the page must include `script()` before it."""
    fig.update_layout(font=_FONT, template="plotly_white", hoverlabel={"align": "left"})
    div = fig.to_html(
        full_html=False, include_plotlyjs=False, include_mathjax=False, config=_CONFIG, div_id=f"plot-{name}"
    )
    return (
        f'<figure data-figure="{page.escape(name)}" class="interactive">{div}'
        f"<figcaption>{page.escape(caption)}</figcaption></figure>"
    )


def hover_text(text: str, limit: int = PROMPT_CHARS, width: int = 70) -> str:
    """A prompt's text for a hover label: clipped to `limit` characters, escaped, wrapped at `width`."""
    clipped = text if len(text) <= limit else text[:limit].rstrip() + " …"
    return "<br>".join(page.escape(line) for line in textwrap.wrap(" ".join(clipped.split()), width)) or "–"


@dataclass(frozen=True)
class Interval:
    """One rating and its interval, as the ratings figure shows it."""

    method: str
    label: str  # the method's display name
    scheme: str  # what was resampled ("prompts", "judgments", or "battles" for a model-rating method)
    model: str
    rating: float
    lo: float | None
    hi: float | None
    p_top1: float | None


def ratings_with_intervals(models: Sequence[str], intervals: Sequence[Interval]) -> go.Figure:
    """One panel per method, models in the order of `models` top down: the rating (dot) and its interval
    (line), one row per resampling scheme; hover shows the exact values and P(top 1)."""
    methods = list(dict.fromkeys(i.method for i in intervals))
    labels = {i.method: i.label for i in intervals}
    cols = min(len(methods), 3)
    rows = int(np.ceil(len(methods) / cols))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[labels[m] for m in methods],
        shared_yaxes=True,
        horizontal_spacing=0.06,
        vertical_spacing=0.5 / max(rows, 1) / 2 + 0.04,
    )
    y_of = {m: k for k, m in enumerate(models)}
    for n, method in enumerate(methods):
        row, col = n // cols + 1, n % cols + 1
        mine = [i for i in intervals if i.method == method and i.model in y_of]
        schemes = list(dict.fromkeys(i.scheme for i in mine))
        for s, scheme in enumerate(schemes):
            points = [i for i in mine if i.scheme == scheme]
            y = [y_of[i.model] + (s - (len(schemes) - 1) / 2) * 0.22 for i in points]
            opacity = 1.0 if s == 0 else 0.5
            xs, ys = [], []
            for i, yy in zip(points, y):
                if i.lo is not None and i.hi is not None:
                    xs += [i.lo, i.hi, None]
                    ys += [yy, yy, None]
            colour = method_colour(method)
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line={"color": colour, "width": 3},
                    opacity=opacity,
                    hoverinfo="skip",
                    showlegend=False,
                ),
                row=row,
                col=col,
            )
            fig.add_trace(
                go.Scatter(
                    x=[i.rating for i in points],
                    y=y,
                    mode="markers",
                    opacity=opacity,
                    showlegend=False,
                    marker={"color": colour, "size": 9, "symbol": "circle" if s == 0 else "square"},
                    name=f"{labels[method]}, over {scheme}",
                    customdata=[[i.model, _interval(i), _percent(i.p_top1), scheme] for i in points],
                    hovertemplate=(
                        f"<b>%{{customdata[0]}}</b><br>{page.escape(labels[method])}: %{{x:.4f}}<br>"
                        "95% interval %{customdata[1]} (over %{customdata[3]})<br>"
                        "P(top 1) %{customdata[2]}<extra></extra>"
                    ),
                ),
                row=row,
                col=col,
            )
    fig.update_yaxes(tickvals=list(range(len(models))), ticktext=list(models), autorange="reversed", showgrid=False)
    fig.update_xaxes(zeroline=False, title_text="rating", title_font_size=11)
    fig.update_annotations(font_size=13)
    fig.update_layout(
        height=80 + rows * (60 + 34 * len(models)), margin={"l": 10, "r": 10, "t": 40, "b": 10}, hovermode="closest"
    )
    return fig


def _interval(i: Interval) -> str:
    return "–" if i.lo is None or i.hi is None else f"{i.lo:.4f} to {i.hi:.4f}"


def _percent(p: float | None) -> str:
    return "–" if p is None else f"{p:.1%}"


def payoff_heatmaps(
    models: Sequence[str], prompts: Sequence[str], u_king: np.ndarray, texts: Mapping[str, str]
) -> go.Figure:
    """u_king(prompt, king, rebel) for the given prompts, one heatmap each (king rows, rebel columns) on one
    colour scale; hover shows the prompt id, its text (clipped) and the exact payoff."""
    k = len(prompts)
    cols = min(k, 4)
    rows = int(np.ceil(k / cols))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[f"prompt {p}" for p in prompts],
        shared_yaxes=True,
        horizontal_spacing=0.03,
        vertical_spacing=0.12,
    )
    for n, prompt in enumerate(prompts):
        text = hover_text(texts.get(prompt, "(text not in warehouse)"))
        custom = [[[prompt, text] for _ in models] for _ in models]
        fig.add_trace(
            go.Heatmap(
                z=u_king[n],
                x=list(models),
                y=list(models),
                zmin=-1,
                zmax=1,
                colorscale="RdBu",
                showscale=n == 0,
                colorbar={"title": {"text": "u_king", "side": "right"}, "thickness": 14},
                customdata=custom,
                xgap=1,
                ygap=1,
                hovertemplate=(
                    "<b>prompt %{customdata[0]}</b><br>king %{y} vs rebel %{x}: u_king = %{z:.3f}"
                    "<br><br>%{customdata[1]}<extra></extra>"
                ),
            ),
            row=n // cols + 1,
            col=n % cols + 1,
        )
    fig.update_yaxes(autorange="reversed", title_text="king", col=1)
    fig.update_xaxes(title_text="rebel", tickangle=-45)
    fig.update_annotations(font_size=13)
    fig.update_layout(height=140 + rows * (120 + 30 * len(models)), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


SUPPORT_MASS = 1e-6  # a prompt with this much equilibrium mass is in the support
SUPPORT_SHOWN = 40  # prompts shown per equilibrium method in the prompt-support plot


def shown_support(masses: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Every prompt some method's equilibrium plays (masses[method][prompt] >= SUPPORT_MASS), in order of
    first appearance: `prompt_support` shows some of them, and their texts are read for its hovers."""
    return list(dict.fromkeys(p for mass in masses.values() for p, m in mass.items() if m >= SUPPORT_MASS))


def prompt_support(
    prompts: Sequence[str], masses: Mapping[str, np.ndarray], texts: Mapping[str, str], top: int = SUPPORT_SHOWN
) -> go.Figure:
    """Per equilibrium method, the prompts its equilibrium plays (mass above 1e-6), largest first, at most
    `top` of them; hover shows the prompt id, its text (clipped) and the exact mass."""
    methods = list(masses)
    supported = {m: int((np.asarray(masses[m]) >= SUPPORT_MASS).sum()) for m in methods}
    titles = [
        f"{m}: the {supported[m]} prompts in the support"
        if supported[m] <= top
        else f"{m}: the {top} largest of the {supported[m]} prompts in the support"
        for m in methods
    ]
    fig = make_subplots(
        rows=len(methods), cols=1, subplot_titles=titles, vertical_spacing=0.25 / max(len(methods), 1) + 0.03
    )
    for n, method in enumerate(methods):
        mass = np.asarray(masses[method])
        order = [k for k in np.argsort(-mass, kind="stable") if mass[k] >= SUPPORT_MASS][:top]
        fig.add_trace(
            go.Bar(
                x=[f"p{prompts[k]}" for k in order],
                y=[float(mass[k]) for k in order],
                marker_color=method_colour(method),
                showlegend=False,
                customdata=[[prompts[k], hover_text(texts.get(prompts[k], "(text not in warehouse)"))] for k in order],
                hovertemplate=("<b>prompt %{customdata[0]}</b>: mass %{y:.4f}<br><br>%{customdata[1]}<extra></extra>"),
            ),
            row=n + 1,
            col=1,
        )
    fig.update_yaxes(title_text="mass")
    fig.update_xaxes(type="category", tickangle=-60)
    fig.update_annotations(font_size=13)
    fig.update_layout(height=60 + 230 * len(methods), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig
