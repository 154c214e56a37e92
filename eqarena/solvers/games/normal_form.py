"""Normal-form games and the king-of-the-hill evaluation game (paper Section 3.1).

A game is either a dense `NormalFormGame` (payoffs of shape (N, A_1, ..., A_N)) or a structured
`KothGame` that stores only the king tensor u_king[P, M, M], so memory stays O(P·M²).
Every function here accepts both and works on NumPy or JAX arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

import jax.numpy as jnp
import numpy as np

from eqarena.solvers._precision import float64

Array = Union[np.ndarray, jnp.ndarray]

PROMPT, KING, REBEL = 0, 1, 2
KOTH_PLAYER_NAMES = ("prompt", "king", "rebel")


@dataclass(frozen=True, eq=False)
class NormalFormGame:
    """Dense N-player game; `payoffs[i]` is player i's payoff tensor of shape (A_1, ..., A_N)."""

    payoffs: np.ndarray

    def __post_init__(self) -> None:
        payoffs = np.asarray(self.payoffs, dtype=np.float64)
        if payoffs.ndim < 2 or payoffs.shape[0] != payoffs.ndim - 1:
            raise ValueError(f"payoffs must have shape (N, A_1, ..., A_N); got {payoffs.shape}")
        if not np.all(np.isfinite(payoffs)):
            raise ValueError("payoffs must be finite")
        object.__setattr__(self, "payoffs", payoffs)

    @property
    def num_players(self) -> int:
        return self.payoffs.shape[0]

    @property
    def num_actions(self) -> tuple[int, ...]:
        return tuple(self.payoffs.shape[1:])

    def payoff(self, player: int) -> np.ndarray:
        """Dense payoff tensor of `player`, shape (A_1, ..., A_N)."""
        return self.payoffs[player]


@dataclass(frozen=True, eq=False)
class KothGame:
    """King-of-the-hill game from u_king[p, i, j] (king model i vs rebel model j on prompt p).

    u_rebel = -u_king off the diagonal and -1 on it; u_prompt = |u_king| (paper Section 3.1).
    """

    u_king: np.ndarray

    def __post_init__(self) -> None:
        u = np.asarray(self.u_king, dtype=np.float64)
        if u.ndim != 3 or u.shape[1] != u.shape[2]:
            raise ValueError(f"u_king must have shape (P, M, M); got {u.shape}")
        if not np.all(np.isfinite(u)):
            raise ValueError("u_king must be finite (no missing cells)")
        object.__setattr__(self, "u_king", u)

    @property
    def num_players(self) -> int:
        return 3

    @property
    def num_actions(self) -> tuple[int, int, int]:
        p, m, _ = self.u_king.shape
        return (p, m, m)

    def payoff(self, player: int) -> np.ndarray:
        """Dense payoff tensor of `player`, shape (P, M, M)."""
        if player == PROMPT:
            return np.abs(self.u_king)
        if player == KING:
            return self.u_king
        if player == REBEL:
            m = self.u_king.shape[1]
            return np.where(np.eye(m, dtype=bool)[None], -1.0, -self.u_king)
        raise IndexError(f"player {player} out of range for a 3-player game")

    @property
    def payoffs(self) -> np.ndarray:
        """Dense (3, P, M, M) payoffs; for small games and tests only."""
        return np.stack([self.payoff(i) for i in range(3)])


Game = Union[NormalFormGame, KothGame]


def koth_game(u_king: Array, *, atol: float = 1e-9) -> KothGame:
    """The king-of-the-hill game; checks u_king(p,i,j) = -u_king(p,j,i) and values in [-1, 1]."""
    u = np.asarray(u_king, dtype=np.float64)
    if u.ndim != 3 or u.shape[1] != u.shape[2]:
        raise ValueError(f"u_king must have shape (P, M, M); got {u.shape}")
    if not np.allclose(u, -np.swapaxes(u, 1, 2), atol=atol):
        worst = np.unravel_index(np.argmax(np.abs(u + np.swapaxes(u, 1, 2))), u.shape)
        raise ValueError(f"u_king is not antisymmetric at (p, i, j) = {tuple(int(k) for k in worst)}")
    if np.any(np.abs(u) > 1 + atol):
        raise ValueError("u_king values must lie in [-1, 1]")
    return KothGame(u)


@float64
def action_values(game: Game, marginals: Sequence[Array]) -> list[jnp.ndarray]:
    """u_i(a_i, x_-i) for every player i and action a_i under the product profile `marginals`.

    This is the gradient of player i's expected payoff with respect to x_i. Shapes: (A_i,) each.
    """
    if isinstance(game, KothGame):
        u = jnp.asarray(game.u_king)
        xp, xk, xr = (jnp.asarray(m) for m in marginals)
        prompt = jnp.einsum("pij,i,j->p", jnp.abs(u), xk, xr)
        king = jnp.einsum("pij,p,j->i", u, xp, xr)
        # Rebel: -u_king off the diagonal, -1 on it.
        rebel_off = -jnp.einsum("pij,p,i->j", u, xp, xk)
        rebel = rebel_off - xk * jnp.sum(xp)  # diagonal term: u_king(p,j,j) = 0, replaced by -1
        return [prompt, king, rebel]
    return dense_action_values(jnp.asarray(game.payoffs), [jnp.asarray(x) for x in marginals])


def dense_action_values(payoffs: Array, marginals: Sequence[Array]) -> list[jnp.ndarray]:
    """`action_values` of a dense game from its payoffs (N, A_1, ..., A_N); traceable by jax.jit."""
    n = len(marginals)
    values = []
    for i in range(n):
        t = payoffs[i]
        # Contract every other player's axis, from the last axis down so indices stay valid.
        for j in reversed(range(n)):
            if j != i:
                t = jnp.tensordot(t, marginals[j], axes=([j], [0]))
        values.append(t)
    return values


@float64
def expected_payoffs(game: Game, marginals: Sequence[Array]) -> jnp.ndarray:
    """u_i(x) for each player under the product profile, shape (N,)."""
    values = action_values(game, marginals)
    return jnp.stack([jnp.dot(v, jnp.asarray(x)) for v, x in zip(values, marginals)])


@float64
def deviation_gains(game: Game, marginals: Sequence[Array]) -> list[jnp.ndarray]:
    """Ratings of a product profile: u_i(a_i, x_-i) - u_i(x) per action (paper eq. 1)."""
    values = action_values(game, marginals)
    return [v - jnp.dot(v, jnp.asarray(x)) for v, x in zip(values, marginals)]


@float64
def exploitability(game: Game, marginals: Sequence[Array]) -> float:
    """Sum over players of the largest deviation gain (0 exactly at a Nash equilibrium)."""
    return float(sum(jnp.max(g) for g in deviation_gains(game, marginals)))
