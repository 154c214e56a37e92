"""Many equilibria of the king-of-the-hill game and their risk dominance (paper App. F.4).

The king-of-the-hill game has many Nash equilibria; the paper (App. F.4, "Risk-dominant
equilibria") lists its pure ones and finds 127 mixed ones besides the LLE, then asks which of them
players could coordinate on when each is unsure which equilibrium the others play.

- `pure_nash_equilibria`: every pure-strategy NE (prompt, king, rebel), in O(P M^2).
- `diverse_nash`: K profiles, each minimising its exploitability by gradient descent on
  softmax logits, in parallel, with a regulariser that pushes their model ratings apart;
  `distinct_equilibria` keeps the exact ones whose ratings differ.
- `risk_dominance`: each player's expected payoff for playing its strategy of equilibrium k while
  the co-players draw their equilibria from priors: uniform, and after the iterated prior update
  of App. F.4.

Strategies of K profiles are stacked per player: a tuple of (K, A_i) arrays, (K, P), (K, M), (K, M)
for the king-of-the-hill game (players PROMPT, KING, REBEL of `solvers.games.normal_form`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from eqarena.solvers._precision import float64
from eqarena.solvers.games.equilibrium import Equilibrium
from eqarena.solvers.games.normal_form import KING, Array, KothGame, NormalFormGame, dense_action_values
from eqarena.solvers.nash.logit import koth_values

KingTensor = Union[Array, KothGame]  # u_king of shape (P, M, M), or the game holding it
Stacked = tuple[np.ndarray, ...]  # one (K, A_i) array per player
Profile = Union[Sequence[Array], Equilibrium]  # one (A_i,) marginal per player

DEFAULT_TOL = 1e-2  # exploitability at which a profile counts as an equilibrium (App. F.4)
DEFAULT_RATING_TOL = 1e-3  # L-infinity distance of king ratings above which two are distinct


# ---------------------------------------------------------------------------------------------
# Pure-strategy equilibria.


@float64
def pure_nash_equilibria(u_king: KingTensor, *, atol: float = 1e-12) -> np.ndarray:
    """All pure-strategy Nash equilibria of the king-of-the-hill game (paper Section 3.1, App. F.4).

    u_king: (P, M, M). A profile (p, i, j) is an NE iff p maximises |u_king(., i, j)|, i maximises
    u_king(p, ., j) and j maximises u_rebel(p, i, .) (-u_king off the diagonal, -1 on it); payoffs
    within `atol` of the maximum count as maximal. Three max-reductions of the (P, M, M) tensor:
    O(P M^2) time and memory. Returns an int array of shape (n, 3), rows (prompt, king, rebel) in
    lexicographic order.
    """
    u = _king_tensor(u_king)
    m = u.shape[1]
    prompt_payoff = np.abs(u)
    rebel_payoff = np.where(np.eye(m, dtype=bool)[None], -1.0, -u)
    best = (
        (prompt_payoff >= prompt_payoff.max(axis=0, keepdims=True) - atol)
        & (u >= u.max(axis=1, keepdims=True) - atol)
        & (rebel_payoff >= rebel_payoff.max(axis=2, keepdims=True) - atol)
    )
    return np.argwhere(best).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Many mixed equilibria with distinct ratings.


@dataclass(frozen=True, eq=False)
class DiverseNash:
    """K strategy profiles of the king-of-the-hill game, profile k = (marginals[i][k])_i.

    marginals: ((K, P), (K, M), (K, M)) for (prompt, king, rebel).
    ratings: deviation gains u_i(a, x_-i) - u_i(x) (paper eq. 1), same shapes.
    exploitability: (K,), sum over players of the largest deviation gain (as
        `solvers.games.normal_form.exploitability`).
    distinct: (K,) bool, `distinct_equilibria` with its default tolerances.
    num_fixed: profiles 0 .. num_fixed - 1 were given, not optimised.
    rounds: descent rounds run; steps: Adam steps per profile over all rounds (`steps` per round).
    """

    marginals: Stacked
    ratings: Stacked
    exploitability: np.ndarray
    distinct: np.ndarray
    num_fixed: int
    rounds: int
    steps: int
    seconds: float

    @property
    def king_ratings(self) -> np.ndarray:
        """Model ratings (K, M): the king player's deviation gains."""
        return self.ratings[KING]


@float64
def diverse_nash(
    u_king: KingTensor,
    num: int = 128,
    *,
    seed: int = 0,
    steps: int = 3000,
    rounds: int = 3,
    fixed: Sequence[Profile] = (),
    learning_rate: float = 1.0,
    final_learning_rate: float = 1e-2,
    diversity: float = 1.0,
    bandwidth: float = 0.1,
    diversity_fraction: float = 0.5,
    init_scale: float = 1.0,
) -> DiverseNash:
    """`num` Nash equilibria with distinct model ratings, by parallel exploitability descent (App. F.4).

    u_king: (P, M, M). Profiles are x_i = softmax(theta_i) with logits theta of shapes (K, P), (K, M),
    (K, M) drawn from N(0, init_scale^2) (NumPy generator `seed`). All K profiles take `steps` Adam
    steps together on
        sum_k expl(x^k) + w_t * R,   R = sum_k (1 / (K - 1)) sum_{l != k} exp(-||r^k - r^l||^2 / bandwidth^2),
    where expl is the exploitability (sum_i max_a u_i(a, x_-i) - u_i(x), descended along its
    subgradient) and r^k the king ratings (eq. 1) of profile k: the regulariser pushes the rating
    vectors of near profiles apart (a bounded form of the paper's "maximise the L2 rating differences
    between any two profiles"). w_t decays linearly from `diversity` to 0 over the first
    `diversity_fraction` of the steps, which then are pure exploitability descent; the learning rate
    decays geometrically from `learning_rate` to `final_learning_rate`.

    Exploitability descent can stall at a local minimum that is no equilibrium: after each round,
    the profiles that `distinct_equilibria` does not keep are drawn afresh and descend again (the
    kept ones stay and repel them), for at most `rounds` rounds.
    fixed: profiles (one (A_i,) marginal per player, or an `Equilibrium`, e.g. the LLE of
    `solvers.nash.limiting_logit.nash`) placed at indices 0, 1, ...; they are not optimised but repel the others.
    Returns a `DiverseNash` with `num` profiles (len(fixed) of them fixed) and their true
    exploitability. Deterministic for a given seed and core count: XLA splits some of the descent's
    reductions by the cores it may use, and the descent amplifies their last bits, so
    `tasks.risk_analysis.search_equilibria` runs it on one core (`runtime.one_core`).
    """
    start = time.perf_counter()
    u = _king_tensor(u_king)
    sizes = (u.shape[0], u.shape[1], u.shape[1])
    fixed_xs = _stack_profiles(fixed, sizes)
    num_fixed, num_free = len(fixed), num - len(fixed)
    if num_free < 0 or num < 1:
        raise ValueError(f"num must be >= max(1, len(fixed)); got num={num}, {num_fixed} fixed")
    if steps < 1 or rounds < 1 or not 0.0 < diversity_fraction <= 1.0:
        raise ValueError("steps and rounds must be >= 1 and diversity_fraction in (0, 1]")
    rng = np.random.default_rng(seed)
    schedule = jnp.asarray([learning_rate, final_learning_rate, diversity, bandwidth, diversity_fraction])
    free = tuple(np.zeros((num_free, n)) for n in sizes)
    redo, rounds_run = np.arange(num_free), 0
    while len(redo) > 0 and rounds_run < rounds:
        logits = tuple(init_scale * rng.normal(size=(len(redo), n)) for n in sizes)
        _descend_rows(u, fixed_xs, free, redo, logits, schedule, steps)
        rounds_run += 1
        distinct = _diverse_result(u, fixed_xs, free, rounds_run, steps, start).distinct
        redo = np.flatnonzero(~distinct[num_fixed:])
    return _diverse_result(u, fixed_xs, free, rounds_run, steps, start)


def _descend_rows(u, fixed_xs, free_xs, rows, logits, schedule, steps) -> None:
    """Descend from `logits` the free profiles `rows` (written into `free_xs` in place); the fixed
    profiles and the other free ones stay and repel them. Every round passes arrays of the same
    shapes (all free profiles, a mask of the moving ones), so `_descend` compiles once per game."""
    moving = np.zeros(len(free_xs[0]), dtype=bool)
    moving[rows] = True
    start = []
    for x, theta in zip(free_xs, logits):
        held = np.log(np.maximum(x, np.finfo(float).tiny))  # softmax(log x) = x: held profiles stay put
        held[rows] = theta
        start.append(jnp.asarray(held))
    fixed_ratings = (
        jnp.asarray(_batched_ratings(u, np.abs(u), fixed_xs)[KING]) if len(fixed_xs[0]) else jnp.zeros((0, u.shape[1]))
    )
    out = _descend(tuple(start), jnp.asarray(u), fixed_ratings, jnp.asarray(moving), schedule, steps)
    for x, theta in zip(free_xs, out):  # in NumPy: eager JAX ops would compile for every round's rows
        logits = np.asarray(theta)[rows]
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        x[rows] = e / e.sum(axis=-1, keepdims=True)


def _diverse_result(u, fixed_xs, free_xs, rounds, steps, start) -> DiverseNash:
    xs = tuple(np.concatenate([f, x]) for f, x in zip(fixed_xs, free_xs))
    ratings = _batched_ratings(u, np.abs(u), xs)
    expl = sum(r.max(axis=1) for r in ratings)
    return DiverseNash(
        marginals=xs,
        ratings=ratings,
        exploitability=expl,
        distinct=_distinct_mask(ratings[KING], expl, DEFAULT_TOL, DEFAULT_RATING_TOL),
        num_fixed=len(fixed_xs[0]),
        rounds=rounds,
        steps=rounds * steps,
        seconds=time.perf_counter() - start,
    )


@float64
def distinct_equilibria(
    result: DiverseNash, *, tol: float = DEFAULT_TOL, rating_tol: float = DEFAULT_RATING_TOL
) -> np.ndarray:
    """Mask (K,) of the distinct tol-equilibria among `result`'s profiles (App. F.4).

    Going through the profiles in index order (fixed ones first), profile k is kept iff its
    exploitability is <= tol and its king ratings (M,) differ from those of every profile kept
    before it by more than `rating_tol` in L-infinity distance. So the kept profiles' model ratings
    differ pairwise by more than `rating_tol`.
    """
    return _distinct_mask(result.king_ratings, result.exploitability, tol, rating_tol)


def _distinct_mask(king_ratings: np.ndarray, expl: np.ndarray, tol: float, rating_tol: float) -> np.ndarray:
    keep = np.zeros(len(expl), dtype=bool)
    for k in np.flatnonzero(expl <= tol):
        kept = king_ratings[keep]
        keep[k] = not np.any(np.max(np.abs(kept - king_ratings[k]), axis=1) <= rating_tol)
    return keep


def _batched_values(u, a, xp, xk, xr):
    """u_i(., x_-i) for K profiles: (K, P), (K, M), (K, M); two (K, P) x (P, M^2) products. NumPy or JAX."""
    p, m = u.shape[0], u.shape[1]
    k = xp.shape[0]
    u_bar = (xp @ u.reshape(p, m * m)).reshape(k, m, m)  # sum_p x_p(p) u_king(p, ., .)
    king = (u_bar @ xr[:, :, None])[:, :, 0]
    rebel = -(xk[:, None, :] @ u_bar)[:, 0, :] - xk * xp.sum(axis=1, keepdims=True)
    pairs = (xk[:, :, None] * xr[:, None, :]).reshape(k, m * m)
    prompt = pairs @ a.reshape(p, m * m).T
    return prompt, king, rebel


def _batched_ratings(u, a, xs):
    """Deviation gains (eq. 1) of K profiles, one (K, A_i) array per player."""
    values = _batched_values(u, a, *xs)
    return tuple(v - (v * x).sum(axis=1, keepdims=True) for v, x in zip(values, xs))


def _objective(logits, weight, bandwidth, u, a, fixed_ratings, moving):
    xs = tuple(jax.nn.softmax(t, axis=-1) for t in logits)
    values = _batched_values(u, a, *xs)
    gaps = sum(jnp.max(v, axis=1) - jnp.sum(v * x, axis=1) for v, x in zip(values, xs))
    king = values[KING] - jnp.sum(values[KING] * xs[KING], axis=1, keepdims=True)
    return jnp.sum(gaps * moving) + weight * _repulsion(king, fixed_ratings, moving, bandwidth)


def _repulsion(ratings, fixed_ratings, moving, bandwidth):
    """sum_k mean_{l != k} exp(-||r^k - r^l||^2 / bandwidth^2) over the moving free profiles k; l any
    other profile, free or fixed."""
    others = jnp.concatenate([ratings, fixed_ratings])
    d2 = jnp.sum((ratings[:, None, :] - others[None, :, :]) ** 2, axis=-1)
    self_pairs = jnp.eye(ratings.shape[0], others.shape[0])
    kernel = jnp.exp(-d2 / bandwidth**2) * (1.0 - self_pairs) * moving[:, None]
    return jnp.sum(kernel) / max(others.shape[0] - 1, 1)


@partial(jax.jit, static_argnames=("steps",))
def _descend(logits, u, fixed_ratings, moving, schedule, steps):
    """Adam on `_objective` with the schedules of `diverse_nash`, moving only the rows `moving` (the
    others get no gradient); returns the final logits."""
    lr0, lr1, w0, bandwidth, fraction = (schedule[i] for i in range(5))
    a = jnp.abs(u)
    grad = jax.grad(_objective)
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    def step(state, t):
        theta, m1, m2 = state
        progress = t / steps
        weight = w0 * jnp.maximum(0.0, 1.0 - progress / fraction)
        lr = lr0 * (lr1 / lr0) ** progress
        g = tuple(gi * moving[:, None] for gi in grad(theta, weight, bandwidth, u, a, fixed_ratings, moving))
        m1 = tuple(beta1 * mi + (1 - beta1) * gi for mi, gi in zip(m1, g))
        m2 = tuple(beta2 * vi + (1 - beta2) * gi * gi for vi, gi in zip(m2, g))
        c1, c2 = 1 - beta1 ** (t + 1), 1 - beta2 ** (t + 1)
        theta = tuple(th - lr * (mi / c1) / (jnp.sqrt(vi / c2) + eps) for th, mi, vi in zip(theta, m1, m2))
        return (theta, m1, m2), None

    zeros = tuple(jnp.zeros_like(t) for t in logits)
    (theta, _, _), _ = jax.lax.scan(step, (logits, zeros, zeros), jnp.arange(steps, dtype=jnp.float64))
    return theta


# ---------------------------------------------------------------------------------------------
# Risk dominance.


@dataclass(frozen=True, eq=False)
class RiskDominance:
    """Expected payoffs of K equilibria when co-players miscoordinate (paper App. F.4).

    payoffs_uniform[k, i] = E_{e(j) ~ uniform, j != i} u_i(x_i^k, x_-i^e);  (K, N).
    payoffs_updated[k, i]: the same under the priors after the iterated update;  (K, N).
    total_uniform, total_updated: sums over players, (K,) (higher = less risky).
    priors: (N, K), pi_i^T of every player.
    reference: the equilibrium ranked; rank_uniform / rank_updated its rank by the totals
    (1 = highest total = least risky; ties share the better rank).
    """

    payoffs_uniform: np.ndarray
    payoffs_updated: np.ndarray
    total_uniform: np.ndarray
    total_updated: np.ndarray
    priors: np.ndarray
    reference: int
    rank_uniform: int
    rank_updated: int


@float64
def risk_dominance(
    game: Union[KingTensor, NormalFormGame],
    marginals: Sequence[Array],
    *,
    eta: float = 1e-2,
    steps: int = 10_000,
    reference: int = 0,
) -> RiskDominance:
    """Risk of K equilibria under uniform and iterated priors over the co-players' equilibria (App. F.4).

    game: u_king (P, M, M), a `KothGame`, or a dense `NormalFormGame`. marginals: one (K, A_i) array
    per player (row k: equilibrium k's strategy). Co-players draw their equilibria independently
    and payoffs are multilinear, so E_{e(j) ~ pi_j, j != i} u_i(x_i^k, x_-i^e) = u_i(x_i^k, xbar_-i)
    with xbar_j = sum_q pi_j(q) x_j^q: one O(P M^2) evaluation gives every player's payoff for
    every k. The priors start uniform and follow, for t < `steps` (App. F.4, eta = 1e-2, T = 10,000),
        pi_i^{t+1} = softmax(log pi_i^t + eta * E_{e(j) ~ pi_j^t, j != i}[u_i(x_i^k, x_-i^e)])_k
    for all players at once. Returns a `RiskDominance`; `reference` (default 0, e.g. the LLE) is ranked.
    """
    arrays, xs = _risk_setup(game, marginals)
    k = xs[0].shape[0]
    if not 0 <= reference < k:
        raise IndexError(f"reference={reference} out of range for {k} equilibria")
    n = len(xs)
    log_uniform = np.full((n, k), -np.log(k))
    uniform = _prior_payoffs_once(arrays, xs, np.exp(log_uniform))
    log_priors = _iterate_priors(arrays, xs, log_uniform, jnp.asarray(eta, dtype=jnp.float64), steps)
    priors = np.exp(np.asarray(log_priors))
    updated = _prior_payoffs_once(arrays, xs, priors)
    total_uniform, total_updated = uniform.sum(axis=1), updated.sum(axis=1)
    return RiskDominance(
        payoffs_uniform=uniform,
        payoffs_updated=updated,
        total_uniform=total_uniform,
        total_updated=total_updated,
        priors=priors,
        reference=reference,
        rank_uniform=risk_rank(total_uniform, reference),
        rank_updated=risk_rank(total_updated, reference),
    )


def risk_rank(totals: Array, index: int) -> int:
    """Rank of equilibrium `index` by total expected payoff, totals (K,): 1 + #{k: totals[k] > totals[index]}."""
    totals = np.asarray(totals)
    return int(1 + np.sum(totals > totals[index]))


@float64
def prior_payoffs(game: Union[KingTensor, NormalFormGame], marginals: Sequence[Array], priors: Array) -> np.ndarray:
    """E_{e(j) ~ priors[j], j != i}[u_i(x_i^k, x_-i^e)] for every k and player i (App. F.4); (K, N).

    marginals: one (K, A_i) array per player; priors: (N, K), a distribution over the K equilibria
    per player. Computed as u_i(x_i^k, xbar_-i), xbar_j = priors[j] @ marginals[j] (multilinearity).
    """
    arrays, xs = _risk_setup(game, marginals)
    return _prior_payoffs_once(arrays, xs, np.asarray(priors, dtype=np.float64))


def _risk_setup(game, marginals):
    """(payoff arrays, stacked jnp marginals): arrays = (u_king, |u_king|) or (dense payoffs,)."""
    if isinstance(game, NormalFormGame):
        arrays = (jnp.asarray(game.payoffs),)
        sizes = game.num_actions
    else:
        u = _king_tensor(game)
        arrays = (jnp.asarray(u), jnp.asarray(np.abs(u)))
        sizes = (u.shape[0], u.shape[1], u.shape[1])
    xs = tuple(jnp.asarray(x, dtype=jnp.float64) for x in marginals)
    if len(xs) != len(sizes):
        raise ValueError(f"expected {len(sizes)} stacked marginals, got {len(xs)}")
    for i, (x, n) in enumerate(zip(xs, sizes)):
        if x.ndim != 2 or x.shape[1] != n or x.shape[0] != xs[0].shape[0]:
            raise ValueError(f"marginals[{i}] must have shape (K, {n}) with the same K for every player")
    return arrays, xs


def _mean_values(arrays, xbars):
    """u_i(., xbar_-i) per player: koth (arrays = (u, |u|)) or dense (arrays = (payoffs,))."""
    if len(arrays) == 2:
        return koth_values(arrays[0], arrays[1], *xbars)
    return tuple(dense_action_values(arrays[0], xbars))


def _prior_payoffs(arrays, xs, priors, xnp=jnp):
    """(K, N): column i is x_i^k . u_i(., xbar_-i) with xbar_j = priors[j] @ xs[j]."""
    xbars = tuple(priors[j] @ x for j, x in enumerate(xs))
    values = _mean_values(arrays, xbars)
    return xnp.stack([x @ v for x, v in zip(xs, values)], axis=1)


_prior_payoffs_jit = jax.jit(_prior_payoffs)  # called eagerly, its dozen operations would each compile


def _prior_payoffs_once(arrays, xs, priors) -> np.ndarray:
    """`_prior_payoffs` evaluated once: in NumPy for a king-of-the-hill game (two matrix products; a
    compilation takes ~0.5 s), jitted for a dense game."""
    if len(arrays) == 2:
        return _prior_payoffs(tuple(np.asarray(a) for a in arrays), tuple(np.asarray(x) for x in xs), priors, np)
    return np.asarray(_prior_payoffs_jit(arrays, xs, jnp.asarray(priors)))


@partial(jax.jit, static_argnames=("steps",))
def _iterate_priors(arrays, xs, log_priors, eta, steps):
    """log pi^T of the App. F.4 update, from log pi^0; (N, K)."""

    def step(log_pi, _):
        payoffs = _prior_payoffs(arrays, xs, jnp.exp(log_pi))
        return jax.nn.log_softmax(log_pi + eta * payoffs.T, axis=1), None

    log_pi, _ = jax.lax.scan(step, log_priors, None, length=steps)
    return log_pi


# ---------------------------------------------------------------------------------------------
# Input checks.


def _king_tensor(u_king: KingTensor) -> np.ndarray:
    u = np.asarray(u_king.u_king if isinstance(u_king, KothGame) else u_king, dtype=np.float64)
    if u.ndim != 3 or u.shape[1] != u.shape[2]:
        raise ValueError(f"u_king must have shape (P, M, M); got {u.shape}")
    if not np.all(np.isfinite(u)):
        raise ValueError("u_king must be finite")
    return u


def _stack_profiles(profiles: Sequence[Profile], sizes: tuple[int, ...]) -> Stacked:
    """Stack profiles (each one marginal per player, or an Equilibrium) into (F, A_i) arrays."""
    rows = []
    for f, profile in enumerate(profiles):
        xs = profile.marginals if isinstance(profile, Equilibrium) else profile
        xs = [np.asarray(x, dtype=np.float64) for x in xs]
        if [x.shape for x in xs] != [(n,) for n in sizes]:
            raise ValueError(f"fixed[{f}] must be marginals of shapes {[(n,) for n in sizes]}")
        rows.append(xs)
    return tuple(np.array([r[i] for r in rows]).reshape(len(rows), n) for i, n in enumerate(sizes))
