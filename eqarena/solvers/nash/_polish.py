"""Newton polish of a near-equilibrium on its support, and NumPy payoff evaluation.

Near the end of the logit branch the support is read off the branch (actions whose value gap times
lambda stays bounded) and the equilibrium conditions restricted to the support sub-game are solved:
    u_i(a, x_-i) = w_i for a in S_i,  sum_{a in S_i} x_i,a = 1,  x_i,a = 0 off S_i,
by Gauss-Newton with minimum-norm steps (clone actions make the system rank deficient).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from eqarena.solvers._rows import identical_rows
from eqarena.solvers.games.normal_form import Game, KothGame, NormalFormGame
from eqarena.solvers.nash.logit import dense_value_blocks, koth_values

ValuesFn = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


def values_function(game: Game) -> ValuesFn:
    """xs -> [u_i(a, x_-i) for each player], in NumPy (O(P M^2) for a king-of-the-hill game)."""
    if isinstance(game, KothGame):
        u = np.asarray(game.u_king)
        a = np.abs(u)
        return lambda xs: list(koth_values(u, a, *[np.asarray(x, dtype=np.float64) for x in xs]))
    payoffs = np.asarray(game.payoffs)
    return lambda xs: dense_value_blocks(payoffs, [np.asarray(x, dtype=np.float64) for x in xs])[0]


def subgame_payoffs(game: Game, supports: Sequence[np.ndarray]) -> np.ndarray:
    """Dense payoffs (N, |S_1|, ..., |S_N|) of the game restricted to the supports."""
    if isinstance(game, KothGame):
        sp, sk, sr = supports
        u = np.asarray(game.u_king)[np.ix_(sp, sk, sr)]
        same_model = (sk[:, None] == sr[None, :])[None]
        rebel = np.where(same_model, -1.0, -u)
        return np.stack([np.abs(u), u, np.broadcast_to(rebel, u.shape)])
    assert isinstance(game, NormalFormGame)
    return np.asarray(game.payoffs)[(slice(None),) + np.ix_(*supports)]


def _clone_groups(payoffs: np.ndarray, player: int) -> tuple[np.ndarray, np.ndarray]:
    """Actions of `player` identical in every player's payoffs: (representatives, group label per action),
    representatives in sorted order."""
    rows = np.moveaxis(payoffs, player + 1, 0).reshape(payoffs.shape[player + 1], -1)
    return identical_rows(rows, lexicographic=True)


# A support solution with an action this close to zero mass lies on the boundary of its face, where
# the equilibria need not be isolated: it is not reported regular.
_MIN_SUPPORT_MASS = 1e-9
# Relative size of the smallest singular value below which the support system is rank deficient.
_RANK_TOL = 1e-9


def polish(
    game: Game,
    xs: Sequence[np.ndarray],
    supports: Sequence[np.ndarray],
    max_iterations: int = 25,
    tol: float = 1e-13,
) -> tuple[list[np.ndarray] | None, int, bool]:
    """Solve the support equations from `xs` (minimum-norm Gauss-Newton steps).

    Clone actions (identical in every payoff of the support sub-game) are merged first and keep the
    split of `xs`. Returns (full marginals or None on failure, iterations, regular); `regular` is True
    when the merged system has full rank at the solution, every support action keeps positive mass and
    every merged group is a clone group of the whole game, i.e. the solution is an isolated equilibrium
    interior to its face. Otherwise the equilibria near it form a continuum and the point found need
    not be the branch's limit: actions that only the support makes identical can share their group's
    mass in any split, and the branch's split still moves with the mass off the support.
    """
    payoffs, groups, split, sub = _merged_support_game(game, xs, supports)
    sub, iterations, converged, jac = _gauss_newton(payoffs, sub, max_iterations, tol)
    if not converged or min(float(x.min()) for x in sub) < -1e-10:
        return None, iterations, False
    regular = (
        _full_rank(jac)
        and min(float(x.min()) for x in sub) > _MIN_SUPPORT_MASS
        and all(_whole_game_clones(game, i, s, g) for i, (s, g) in enumerate(zip(supports, groups)))
    )
    return _unmerge(sub, groups, split, supports, xs), iterations, regular


def project(
    game: Game, xs: Sequence[np.ndarray], supports: Sequence[np.ndarray], rounds: int = 3
) -> tuple[list[np.ndarray] | None, int]:
    """An equilibrium near `xs` on `supports` or part of them: polish, and while the solution gives
    actions negative probability, drop them from the support and polish again (from `xs`).

    Returns (full marginals or None, iterations).
    """
    supports = [np.asarray(s) for s in supports]
    total = 0
    for _ in range(rounds):
        payoffs, groups, split, sub = _merged_support_game(game, xs, supports)
        sub, iterations, converged, _ = _gauss_newton(payoffs, sub, 25, 1e-13)
        total += iterations
        if not converged:
            return None, total
        negative = [x[labels] < -1e-10 for x, (_, labels) in zip(sub, groups)]
        if not any(n.any() for n in negative):
            return _unmerge(sub, groups, split, supports, xs), total
        supports = [s[~n] for s, n in zip(supports, negative)]
        if any(len(s) == 0 for s in supports):
            return None, total
    return None, total


def _whole_game_clones(game: Game, player: int, support: np.ndarray, group: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether every clone group of `support` (`_clone_groups`: representatives, label per action) pays
    its player the same against every pure co-play of the whole game. Only then is the group's split on
    the branch the target's, at every lambda (x_a / x_b = t_a / t_b exp(lambda (u_i(a, x_-i) -
    u_i(b, x_-i)))), so that any branch point's split is the limit's."""
    representatives, labels = group
    if len(representatives) == len(labels):
        return True
    everything = [np.arange(n) for n in game.num_actions]
    everything[player] = np.asarray(support)
    own = np.moveaxis(subgame_payoffs(game, everything)[player], player, 0).reshape(len(labels), -1)
    return bool(np.array_equal(own, own[representatives[labels]]))


def _unmerge(sub, groups, split, supports, xs) -> list[np.ndarray]:
    """Full marginals from the merged support solution (clones share their group's mass as in `xs`)."""
    out = []
    for x, (_, labels), ratio, s, full in zip(sub, groups, split, supports, xs):
        y = np.zeros(len(full))
        y[s] = np.clip(x, 0.0, None)[labels] * ratio
        out.append(y / y.sum())
    return out


def _merged_support_game(game: Game, xs, supports):
    """The support sub-game with clone actions merged: (payoffs, clone groups, split within groups, merged xs)."""
    full_payoffs = subgame_payoffs(game, supports)
    groups = [_clone_groups(full_payoffs, i) for i in range(len(xs))]
    payoffs = full_payoffs[(slice(None),) + np.ix_(*[g[0] for g in groups])]
    split, sub = [], []
    for x, s, (first, labels) in zip(xs, supports, groups):
        x = np.clip(np.asarray(x, dtype=np.float64)[s], 0.0, None)
        mass = np.bincount(labels, weights=x, minlength=len(first))
        count = np.bincount(labels, minlength=len(first))
        # A group without mass in `xs` splits evenly.
        split.append(np.where(mass[labels] > 0, x / np.where(mass[labels] > 0, mass[labels], 1.0), 1.0 / count[labels]))
        sub.append(mass / mass.sum() if mass.sum() > 0 else np.full(len(first), 1.0 / len(first)))
    return payoffs, groups, split, sub


def _support_system(payoffs: np.ndarray, sub, w: np.ndarray, blocks=None):
    """Residual and Jacobian of u_i(a, x_-i) = w_i (a in S_i), sum_a x_i,a = 1 in (x_1, ..., x_N, w_1, ..., w_N)
    (the Jacobian does not depend on w). blocks: `dense_value_blocks(payoffs, sub)` if already at hand."""
    n = len(sub)
    values, blocks = blocks or dense_value_blocks(payoffs, sub)
    residual = np.concatenate([values[i] - w[i] for i in range(n)] + [[x.sum() - 1.0 for x in sub]])
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in sub])]).astype(int)
    total = int(offsets[-1])
    jac = np.zeros((total + n, total + n))
    for i in range(n):
        rows = slice(offsets[i], offsets[i + 1])
        for j in range(n):
            if j != i:
                jac[rows, offsets[j] : offsets[j + 1]] = blocks[(i, j)]
        jac[rows, total + i] = -1.0
        jac[total + i, rows] = 1.0
    return residual, jac


def _full_rank(jac: np.ndarray) -> bool:
    s = np.linalg.svd(jac, compute_uv=False)
    return bool(s[-1] > _RANK_TOL * s[0])


def _gauss_newton(payoffs: np.ndarray, sub, max_iterations: int, tol: float):
    """Minimum-norm Gauss-Newton on the support equations; returns (merged xs, iterations, converged,
    the Jacobian at the merged xs returned, or None if the last step moved them)."""
    offsets = np.concatenate([[0], np.cumsum([len(x) for x in sub])]).astype(int)
    blocks = dense_value_blocks(payoffs, sub)
    w = np.array([float(v @ x) for v, x in zip(blocks[0], sub)])
    previous = np.inf
    iteration = 0
    jac = None
    for iteration in range(1, max_iterations + 1):
        residual, jac = _support_system(payoffs, sub, w, blocks)
        blocks = None
        size = float(np.max(np.abs(residual)))
        if size <= tol:
            return sub, iteration, True, jac
        if iteration > 3 and size > 0.25 * previous:  # no quadratic convergence: not a solution set
            break
        previous = size
        delta = np.linalg.lstsq(jac, -residual, rcond=1e-10)[0]
        if not np.all(np.isfinite(delta)):
            break
        sub = [x + delta[offsets[i] : offsets[i + 1]] for i, x in enumerate(sub)]
        w = w + delta[offsets[-1] :]
        jac = None  # not at the new sub
    return sub, iteration, False, jac


def branch_supports(values: Sequence[np.ndarray], lam: float, gap: float) -> list[np.ndarray]:
    """Actions whose lambda-scaled value gap to the best action is at most `gap` (bounded on the limit's support)."""
    return [np.flatnonzero(lam * (np.max(v) - v) <= gap) for v in values]
