"""Matplotlib figures of the report, returned as self-contained PNG data URIs (no network assets)."""

from __future__ import annotations

import base64
import io
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from eqarena.methods import REFERENCE  # noqa: E402
from eqarena.methods import colour as method_colour  # noqa: E402

DPI = 110
PAGE_WIDTH_IN = 10.5  # the page's 1200 px content width at DPI: wider figures are shrunk, and their text with them


def data_uri(fig: Figure, dpi: int = DPI) -> str:
    """Render `fig` as a base64 PNG data URI and close it. A figure laid out by a layout engine (constrained
    layout) keeps its own size; any other is cropped to what it draws, which costs a second drawing."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches=None if fig.get_layout_engine() is not None else "tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def rank_comparison(models: Sequence[str], ranks: Mapping[str, Mapping[str, int]]) -> Figure:
    """Bump chart: each model's rank (1 = top) under every method, methods side by side."""
    methods = list(ranks)
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(methods), 0.9 + 0.45 * len(models)))
    x = np.arange(len(methods))
    cmap = plt.get_cmap("tab20")
    for k, model in enumerate(models):
        y = [ranks[m].get(model, np.nan) for m in methods]
        ax.plot(x, y, marker="o", color=cmap(k % 20), linewidth=2)
        ax.annotate(model, (x[-1], y[-1]), xytext=(8, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xticks(x, methods)
    ax.set_ylim(len(models) + 0.5, 0.5)
    ax.set_yticks(range(1, len(models) + 1))
    ax.set_ylabel("rank (1 = best; ties share a rank)")
    ax.set_xlim(-0.3, len(methods) - 0.4)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("Model ranks by method")
    return fig


def bt_intervals(
    models: Sequence[str],
    elo: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    method: str = REFERENCE,
    label: str = "Bradley-Terry",
) -> Figure:
    """Ratings with their bootstrap intervals, best on top (a model-rating method's); each interval holds its
    rating (`solvers.bootstrap.intervals`)."""
    order = np.argsort(elo)
    fig, ax = plt.subplots(figsize=(6.5, 0.8 + 0.4 * len(models)))
    y = np.arange(len(models))
    e, low, high = elo[order], lo[order], hi[order]
    colour = method_colour(method)
    ax.hlines(y, low, high, color=colour, linewidth=2)
    ax.plot(low, y, "|", high, y, "|", color=colour, markersize=10)
    ax.plot(e, y, "o", color=colour)
    ax.set_yticks(y, [models[k] for k in order])
    if method == REFERENCE:  # Elo scale
        ax.axvline(1000, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xlabel("Bradley-Terry rating (Elo scale, mean 1000)")
    else:
        ax.set_xlabel(f"{label} rating")
    ax.set_title(f"{label} ratings with bootstrap confidence intervals")
    ax.grid(axis="x", alpha=0.3)
    return fig


def model_marginals(models: Sequence[str], marginals: Mapping[str, Mapping[str, np.ndarray]]) -> Figure:
    """Per equilibrium method: its king and rebel marginals over the models with mass in either role; the
    models without any are left out and counted in the panel's title."""
    methods = list(marginals)
    cols = min(2, len(methods))
    rows = int(np.ceil(len(methods) / cols))
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(min(PAGE_WIDTH_IN, 1.5 + 4.5 * cols), 2.6 * rows + 0.4),
        squeeze=False,
        layout="constrained",
    )
    for n, ax in enumerate(axes.flat):
        if n >= len(methods):
            ax.axis("off")
            continue
        method = methods[n]
        king, rebel = np.asarray(marginals[method]["king"]), np.asarray(marginals[method]["rebel"])
        shown = np.flatnonzero((king >= 1e-6) | (rebel >= 1e-6))
        x = np.arange(len(shown))
        ax.bar(x - 0.2, king[shown], width=0.4, label="king", color=method_colour(method))
        ax.bar(x + 0.2, rebel[shown], width=0.4, label="rebel", color="#bbbbbb")
        for offset, values in ((-0.2, king[shown]), (0.2, rebel[shown])):
            for xx in x[values < 1e-6]:  # a role without mass says so instead of an empty slot
                ax.text(xx + offset, 0.01, "0", ha="center", va="bottom", fontsize=7, color="#555555")
        ax.set_xticks(x, [models[k] for k in shown], rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("mass", fontsize=8)
        ax.set_ylim(0, 1.2)
        ax.legend(fontsize=8, loc="upper center", ncol=2, frameon=False)
        left_out = len(models) - len(shown)
        ax.set_title(
            f"{method}" + (f" ({left_out} of {len(models)} models without mass, not shown)" if left_out else ""),
            fontsize=9,
        )
    return fig


def payoff_heatmaps(models: Sequence[str], prompts: Sequence[str], u_king: np.ndarray) -> Figure:
    """u_king(p, king, rebel) heatmaps (king rows, rebel columns) for the given prompts, shape (k, M, M)."""
    k = len(prompts)
    cols = min(k, 4)
    rows = int(np.ceil(k / cols))
    size = 1.2 + 0.45 * len(models)
    fig, axes = plt.subplots(rows, cols, figsize=(size * cols + 1, size * rows), squeeze=False)
    image = None
    for n, ax in enumerate(axes.flat):
        if n >= k:
            ax.axis("off")
            continue
        image = ax.imshow(u_king[n], cmap="RdBu", vmin=-1, vmax=1)
        ax.set_xticks(range(len(models)), models, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(models)), models if n % cols == 0 else [""] * len(models), fontsize=7)
        ax.set_title(f"prompt {prompts[n]}", fontsize=9)
        ax.set_xlabel("rebel", fontsize=8)
        if n % cols == 0:
            ax.set_ylabel("king", fontsize=8)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="u_king (king's payoff)")
    return fig


def contribution_heatmaps(kings: Sequence[str], families: Sequence[str], deltas: Mapping[str, np.ndarray]) -> Figure:
    """Per method: delta(king model, rebel family) as a heatmap, (len(kings), len(families)) each, on one
    colour scale shared by all panels; a row sums to the king model's rating (paper Section 4.3)."""
    methods = list(deltas)
    bound = max([float(np.abs(np.asarray(d)).max()) for d in deltas.values()] + [1e-9])
    fig, axes = plt.subplots(
        1,
        len(methods),
        figsize=(min(PAGE_WIDTH_IN, 1.8 + (1.0 + 0.5 * len(families)) * len(methods)), 1.6 + 0.4 * len(kings)),
        squeeze=False,
        layout="constrained",
    )
    image = None
    for ax, method in zip(axes.flat, methods):
        image = ax.imshow(np.asarray(deltas[method]), cmap="PuOr", vmin=-bound, vmax=bound, aspect="auto")
        ax.set_xticks(range(len(families)), families, rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(kings)), kings if ax is axes.flat[0] else [""] * len(kings), fontsize=8)
        ax.set_title(method, fontsize=9)
        ax.set_xlabel("rebel family", fontsize=8)
    axes.flat[0].set_ylabel("king model", fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="delta (one scale for all panels)")
    fig.suptitle("Marginal rating contributions by rebel model family", fontsize=10)
    return fig


def solver_diagnostics(methods: Sequence[str], exploitability: Sequence[float], seconds: Sequence[float]) -> Figure:
    """Exploitability (log scale) and solve time per equilibrium method."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3))
    x = np.arange(len(methods))
    colours = [method_colour(m) for m in methods]
    ax1.bar(x, np.maximum(np.asarray(exploitability, dtype=float), 1e-16), color=colours)
    ax1.set_yscale("log")
    ax1.set_xticks(x, methods)
    ax1.set_ylabel("exploitability")
    ax1.set_title("How exact each equilibrium is (sum of max deviation gains)", fontsize=9)
    ax2.bar(x, seconds, color=colours)
    ax2.set_xticks(x, methods)
    ax2.set_ylabel("seconds")
    ax2.set_title("Solve time", fontsize=9)
    fig.tight_layout()
    return fig


def coverage_heatmap(models: Sequence[str], fraction: np.ndarray) -> Figure:
    """Fraction of prompts on which each ordered model pair has both orders judged."""
    size = 1.5 + 0.45 * len(models)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    image = ax.imshow(fraction, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(models)), models, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), models, fontsize=8)
    ax.set_xlabel("model B")
    ax.set_ylabel("model A")
    for i in range(len(models)):
        for j in range(len(models)):
            if i != j and len(models) <= 12:
                ax.text(
                    j,
                    i,
                    f"{fraction[i, j]:.0%}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if fraction[i, j] < 0.6 else "black",
                )
    fig.colorbar(image, ax=ax, shrink=0.8, label="prompts covered")
    ax.set_title("Coverage of model pairs (both orders judged)", fontsize=10)
    return fig


SCHEME_MARKERS = {"prompts": "o", "judgments": "s"}


def equilibrium_intervals(models: Sequence[str], intervals: Mapping[str, Mapping[str, Mapping[str, tuple]]]) -> Figure:
    """One panel per equilibrium method: each model's full-data rating (eq. 1) with its bootstrap
    interval per resampling scheme. intervals[method][scheme][model] = (rating, lo, hi)."""
    methods = list(intervals)
    fig, axes = plt.subplots(
        1, len(methods), figsize=(3.4 * len(methods) + 1.2, 1.25 + 0.42 * len(models)), squeeze=False, sharey=True
    )
    y = np.arange(len(models))
    for ax, method in zip(axes[0], methods):
        schemes = list(intervals[method])
        for k, scheme in enumerate(schemes):
            rows = intervals[method][scheme]
            r, lo, hi = (np.array([rows[m][c] if m in rows else np.nan for m in models]) for c in range(3))
            offset = (k - (len(schemes) - 1) / 2) * 0.22
            colour, alpha = method_colour(method), 1.0 if k == 0 else 0.55
            ax.hlines(y + offset, lo, hi, color=colour, alpha=alpha, linewidth=2)
            ax.plot(
                r,
                y + offset,
                SCHEME_MARKERS.get(scheme, "o"),
                color=colour,
                alpha=alpha,
                markersize=4,
                label=f"over {scheme}",
            )
        ax.axvline(0.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_title(method, fontsize=10)
        ax.set_xlabel("rating (deviation gain)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].set_yticks(y, models, fontsize=8)
    axes[0, 0].set_ylim(len(models) - 0.5, -0.5)
    fig.suptitle("Equilibrium ratings with bootstrap intervals", fontsize=11)
    # one legend below the panels, where it covers no model's interval
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))
    return fig


def rank_probability_heatmaps(models: Sequence[str], probabilities: Mapping[str, np.ndarray]) -> Figure:
    """One heatmap per method: P(model has rank r), models as rows (in `models` order), ranks as columns,
    cells labelled in percent. probabilities[method]: (M, M) array [model, rank - 1]. Two panels a row and
    no wider than the page, so the labels are shown at their size."""
    methods = list(probabilities)
    m = len(models)
    cols = min(2, len(methods))
    rows = int(np.ceil(len(methods) / cols))
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(min(PAGE_WIDTH_IN, 2.2 + 4.2 * cols), 0.9 + (0.6 + 0.42 * m) * rows),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    image = None
    label_size = 9 if m <= 8 else 7.5
    for n, ax in enumerate(axes.flat):
        if n >= len(methods):
            ax.axis("off")
            continue
        method = methods[n]
        p = np.asarray(probabilities[method])
        image = ax.imshow(p, vmin=0.0, vmax=1.0, cmap="Blues", aspect="auto")
        if m <= 12:
            for i in range(m):
                for r in range(m):
                    if p[i, r] >= 0.005:
                        ax.text(
                            r,
                            i,
                            f"{100 * p[i, r]:.0f}",
                            ha="center",
                            va="center",
                            fontsize=label_size,
                            color="white" if p[i, r] > 0.6 else "black",
                        )
        ax.set_xticks(range(m), range(1, m + 1), fontsize=8)
        ax.set_xlabel("rank", fontsize=8)
        ax.set_title(method, fontsize=10)
        ax.set_yticks(range(m), models, fontsize=8)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="probability (cells in %)")
    fig.suptitle("Rank probabilities (bootstrap over prompts)", fontsize=11)
    return fig
