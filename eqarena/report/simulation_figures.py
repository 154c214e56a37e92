"""Figures of a simulated improvement path (paper Figure 1 centre and right, Figure 4)."""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from eqarena.methods import canonical
from eqarena.methods import colour as method_colour
from eqarena.report.figures import plt

SETTING_STYLE = {"initial": "--", "additional": "-"}  # dashed: fixed initial prompts; solid: prompts added


def _colour(method: str) -> str:
    return method_colour(canonical(method))


def entropy_curves(frame: pl.DataFrame, methods: list[str], settings: list[str]) -> Figure:
    """Figure 1 centre: mean prompt and model skill entropy over iterations, per method (colour) and
    setting (dashed: initial prompts, solid: additional prompts), bands = mean ± 1.96 standard errors
    over trials."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for ax, what in zip(axes, ("prompt", "model")):
        for method in methods:
            for setting in settings:
                rows = (
                    frame.filter((pl.col("method") == method) & (pl.col("setting") == setting))
                    .group_by("iteration")
                    .agg(
                        pl.col(f"{what}_entropy").mean().alias("mean"),
                        pl.col(f"{what}_entropy").std().alias("sd"),
                        pl.len().alias("n"),
                    )
                    .sort("iteration")
                )
                t, mean = rows["iteration"].to_numpy(), rows["mean"].to_numpy()
                half = 1.96 * np.nan_to_num(rows["sd"].to_numpy()) / np.sqrt(rows["n"].to_numpy())
                ax.plot(t, mean, SETTING_STYLE[setting], color=_colour(method), label=f"{method}, {setting} prompts")
                ax.fill_between(t, mean - half, mean + half, color=_colour(method), alpha=0.15, linewidth=0)
        ax.set_title(f"{what} skill entropy H({'p̄' if what == 'prompt' else 'm̄'}_t)", fontsize=10)
        ax.set_xlabel("iteration")
        ax.set_ylabel("entropy (nats)")
    axes[1].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def _ragged(rows: list) -> np.ndarray:
    """Rows of different lengths (None for a missing row) as a NaN-padded matrix."""
    width = max((len(r) for r in rows if r is not None), default=0)
    out = np.full((len(rows), max(width, 1)), np.nan)
    for k, r in enumerate(rows):
        if r is not None:
            out[k, : len(r)] = r
    return out


def path_heatmaps(frame: pl.DataFrame, method: str, setting: str, trial: int) -> Figure:
    """Figure 1 right / Figure 4: one trial's added prompts, prompt-player equilibria, equilibrium-weighted
    prompt skills (Figure 4 right) and added models, iterations as rows. Darker = higher focus or
    capability."""
    rows = frame.filter(
        (pl.col("method") == method)
        & (pl.col("setting") == setting)
        & (pl.col("trial") == trial)
        & (pl.col("iteration") > 0)
    ).sort("iteration")
    weighted = rows["equilibrium_prompt_skills"].to_list() if "equilibrium_prompt_skills" in rows.columns else []
    panels = [
        ("added prompts", rows["added_prompt"].to_list(), "skill"),
        ("prompt-player equilibrium", rows["prompt_marginal"].to_list(), "prompt"),
        ("equilibrium-weighted prompt skills", weighted, "skill"),
        ("added models", rows["added_model"].to_list(), "skill"),
    ]
    panels = [p for p in panels if any(v is not None for v in p[1])]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.6), squeeze=False)
    for ax, (title, values, axis) in zip(axes[0], panels):
        matrix = _ragged(values)
        image = ax.imshow(
            matrix,
            cmap="Greys",
            aspect="auto",
            interpolation="nearest",
            extent=(0.5, matrix.shape[1] + 0.5, rows["iteration"].max() + 0.5, 0.5),
        )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(axis)
        ax.set_ylabel("iteration")
        fig.colorbar(image, ax=ax, shrink=0.8)
    fig.suptitle(f"{method}, {setting} prompts, trial {trial}", fontsize=10)
    fig.tight_layout()
    return fig
