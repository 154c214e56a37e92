"""Marginal rating contributions by co-player action (paper Section 4.3).

delta(a'_i, a_j, x) = sum_{a_-j} x(a) [u_i(a'_i, a_j, a_-i,-j) - u_i(a)]: how much co-player j's
action a_j contributes to the rating of player i's action a'_i. Summed over a_j it gives the rating
regret_i(a'_i, x) of eq. (1).
"""

from __future__ import annotations

import string

import numpy as np

from eqarena.solvers.games.equilibrium import Equilibrium
from eqarena.solvers.games.normal_form import Game


def contributions(game: Game, eq: Equilibrium, player: int, co_player: int) -> np.ndarray:
    """delta(a'_i, a_j, x) for i = `player`, j = `co_player`; shape (A_player, A_co_player).

    For a CCE (`eq.joint` set) x is the joint; for an NE (`eq.joint` None) x is the product of
    `eq.marginals`, which is never materialised. Rows sum to `eq.ratings[player]`. Cost: one
    contraction of player i's payoff tensor (O(P M^2) for a king-of-the-hill game).
    """
    n = game.num_players
    for name, k in (("player", player), ("co_player", co_player)):
        if not 0 <= k < n:
            raise IndexError(f"{name}={k} out of range for a {n}-player game")
    if player == co_player:
        raise ValueError("co_player must differ from player")
    u = np.asarray(game.payoff(player), dtype=np.float64)
    axes = string.ascii_letters[:n]
    dev = "z"  # player i's deviation a'_i
    i, j = axes[player], axes[co_player]
    # u_i(a'_i, a_-i): player i's axis renamed to the deviation index.
    u_dev = axes.replace(i, dev)

    if eq.joint is not None:
        x = np.asarray(eq.joint, dtype=np.float64)
        if x.shape != u.shape:
            raise ValueError(f"eq.joint has shape {x.shape}; the game's is {u.shape}")
        x_others = x.sum(axis=player)  # x_-i, axes without i
        deviation = np.einsum(f"{u_dev},{axes.replace(i, '')}->{dev}{j}", u, x_others, optimize=True)
        current = np.einsum(f"{axes},{axes}->{j}", u, x, optimize=True)
        return deviation - current[None, :]

    marginals = [np.asarray(m, dtype=np.float64) for m in eq.marginals]
    if tuple(len(m) for m in marginals) != u.shape:
        raise ValueError("eq.marginals do not match the game's action counts")
    rest = [k for k in range(n) if k not in (player, co_player)]
    deviation = np.einsum(
        ",".join([u_dev] + [axes[k] for k in rest]) + f"->{dev}{j}",
        u,
        *[marginals[k] for k in rest],
        optimize=True,
    )
    others = [k for k in range(n) if k != co_player]
    current = np.einsum(
        ",".join([axes] + [axes[k] for k in others]) + f"->{j}",
        u,
        *[marginals[k] for k in others],
        optimize=True,
    )
    x_j = marginals[co_player]
    return (deviation - current[None, :]) * x_j[None, :]
