"""Matplotlib figures of the robustness analyses (paper Figure 3 / 12 and Figure 11)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from eqarena.methods import colour as method_colour  # noqa: E402

PLAYER_COLOURS = {"prompt": "#4c72b0", "king": "#dd8452", "rebel": "#55a868", "sum": "#e6b800"}


def clone_ranks(
    methods: Sequence[str],
    variants: Sequence[str],
    models: Sequence[str],
    target: str,
    ranks: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray]],
) -> Figure:
    """Rank of every model against the number of adversarial copies, one panel per (variant, method).

    ranks[(variant, method)] = (ns (N,), ranks (N, M)); every model has its colour, named in one legend
    outside the panels; the target model is drawn thick and red."""
    fig, axes = plt.subplots(
        len(variants),
        len(methods),
        figsize=(2.4 * len(methods) + 2.4, 2.8 * len(variants)),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    colours = _model_colours(models, target)
    for row, variant in enumerate(variants):
        for col, method in enumerate(methods):
            ax = axes[row, col]
            ns, r = ranks[(variant, method)]
            for k, model in enumerate(models):
                is_target = model == target
                ax.plot(
                    ns,
                    r[:, k],
                    marker="o",
                    markersize=5 if is_target else 3,
                    linewidth=2.6 if is_target else 1.2,
                    color=colours[model],
                    zorder=3 if is_target else 2,
                    label=f"{model} (target)" if is_target else model,
                )
            ax.set_title(f"{method} — {variant} copies", fontsize=9, color=method_colour(method))
            ax.set_xticks(ns)
            ax.tick_params(axis="x", labelsize=7, rotation=45)
            ax.grid(alpha=0.3)
            if row == len(variants) - 1:
                ax.set_xlabel("adversarial copies added", fontsize=8)
    axes[0, 0].set_ylim(len(models) + 0.5, 0.5)
    axes[0, 0].set_yticks(range(1, len(models) + 1))
    for row in range(len(variants)):
        axes[row, 0].set_ylabel("rank (1 = best)", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, title="model", title_fontsize=8)
    fig.suptitle(f"Ranks as prompts adversarial to {target} are copied", fontsize=10)
    return fig


def _model_colours(models: Sequence[str], target: str) -> dict[str, tuple]:
    """A distinct colour per model; red is kept for the target."""
    palette = [c for k, c in enumerate(plt.get_cmap("tab10").colors) if k != 3]  # tab10's 4th is red
    others = [m for m in models if m != target]
    colours = {m: palette[k % len(palette)] for k, m in enumerate(others)}
    colours[target] = "#d62728"
    return colours


def risk_panels(
    models: Sequence[str], king_ratings: np.ndarray, uniform: np.ndarray, updated: np.ndarray, selected: int
) -> Figure:
    """Paper Figure 11, equilibria ordered by the sum of updated-prior payoffs (least risky rightmost).

    king_ratings (K, M); uniform and updated (K, 3): expected payoff of prompt, king and rebel playing
    each equilibrium's strategy while the others draw theirs from uniform / iterated priors."""
    order = np.argsort(updated.sum(axis=1), kind="stable")
    x = np.arange(len(order))
    fig, axes = plt.subplots(3, 1, figsize=(max(8.0, 0.07 * len(order) + 5), 9), sharex=True, layout="constrained")
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")  # tab20's pairs look alike for few models
    for k, model in enumerate(models):
        axes[0].scatter(x, king_ratings[order, k], s=9, color=cmap(k % cmap.N), label=model)
    axes[0].set_ylabel("king rating")
    axes[0].set_title("a) model ratings under each Nash equilibrium", fontsize=9)
    axes[0].legend(
        fontsize=7,
        ncol=1 if len(models) <= 14 else 2,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        title="model",
        title_fontsize=7,
    )
    for ax, values, title in (
        (axes[1], uniform, "b) expected payoffs under uniform priors over equilibria"),
        (axes[2], updated, "c) expected payoffs under the iterated priors (App. F.4)"),
    ):
        for p, player in enumerate(("prompt", "king", "rebel")):
            ax.scatter(x, values[order, p], s=9, color=PLAYER_COLOURS[player], label=player)
        ax.scatter(
            x,
            values[order].sum(axis=1),
            s=16,
            color=PLAYER_COLOURS["sum"],
            edgecolor="black",
            linewidth=0.3,
            label="sum",
        )
        ax.set_ylabel("expected payoff")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), title="player", title_fontsize=7)
    where = int(np.flatnonzero(order == selected)[0])
    for ax in axes:
        ax.axvline(where, color="#d62728", linewidth=1.0, linestyle="--")
        ax.grid(alpha=0.3)
    axes[2].set_xlabel("equilibria, ordered by the sum in c) (dashed: the selected LLE, equilibrium 0)")
    return fig
