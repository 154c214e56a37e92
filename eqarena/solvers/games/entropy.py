"""Entropies and the clone-invariant equilibrium-selection target (paper Section 3.3, App. B, C).

`affinity_entropy` is H_a^p (paper Def. "Affinity Entropy"); its kernel comes from the strategic
dissimilarity D (paper eq. for D) through K = exp(-D / (2 sigma)^2). `affinity_target` is
argmax H_a^p over the simplex: the target t_i from which the NE branch and the CCE are selected.

Kernel variance: the paper (App. F) sets the "kernel variance" to 1e-6. We read it as sigma^2, so
K = exp(-D / (4 * kernel_variance)). With this value K is the identity up to (near-)clones, which
`affinity_target` exploits: it never forms a dense A_i x A_i kernel, it groups identical payoff rows
and only links rows whose kernel entry is above float64 resolution (K > e^-37).
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from typing import Literal

import jax.numpy as jnp
import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
import scipy.sparse.csgraph
import scipy.spatial

from eqarena.solvers._precision import float64
from eqarena.solvers._rows import identical_rows
from eqarena.solvers.games.normal_form import PROMPT, Array, Game, KothGame

CoPlay = Literal["actions", "mixed"]

DEFAULT_P = 1.0
DEFAULT_KERNEL_VARIANCE = 1e-6
# K entries below e^-37 (about 8.5e-17) are below float64 resolution next to K_aa = 1: treated as 0.
_NEGLIGIBLE_LOG_KERNEL = 37.0
# Rows with K >= 1 - 1e-12 are merged as clones (keeps the reduced problem well conditioned).
_CLONE_LOG_KERNEL = 1e-12
_DENSE_NEIGHBOUR_LIMIT = 64  # rows up to which neighbour pairs come from dense distances
_DENSE_NEIGHBOUR_MAX = 4096  # ... and up to which they do when a projection separates too few pairs
_DENSE_CANDIDATES_PER_ROW = 8  # too few: the projection leaves more candidate pairs than this per row
_PROJECTED_MAX_FEATURES = 1024  # ... or when rows have more features than this
_MAX_COMPONENT = 2000


@float64
def shannon_entropy(x: Array) -> jnp.ndarray:
    """S(x) = -sum_a x_a log x_a (0 log 0 = 0), for x of shape (..., A)."""
    x = jnp.asarray(x)
    safe = jnp.where(x > 0, x, 1.0)
    return -jnp.sum(jnp.where(x > 0, x * jnp.log(safe), 0.0), axis=-1)


@float64
def tsallis_entropy(x: Array, p: float = DEFAULT_P) -> jnp.ndarray:
    """Tsallis entropy (1/p)[1 - sum_a x_a^(p+1)], p in (0, 1]; App. B with U = I. Shape (..., A)."""
    _check_p(p)
    x = jnp.asarray(x)
    return (1.0 - jnp.sum(x ** (p + 1.0), axis=-1)) / p


@float64
def affinity_entropy(x: Array, kernel: Array, p: float = DEFAULT_P) -> jnp.ndarray:
    """Affinity entropy H_a^p(x) = (1/p)[1 - 1^T (U x)^(p+1)] (paper Def. H_a^p, App. B).

    U = K diag(1 / ||K[:, j]||_(p+1)) with `kernel` K of shape (A, A), entries in [0, 1] and
    K_aa = 1; `x` of shape (..., A). Equals `tsallis_entropy` when K is the identity.
    """
    _check_p(p)
    x = jnp.asarray(x)
    k = jnp.asarray(kernel)
    norms = jnp.sum(k ** (p + 1.0), axis=0) ** (1.0 / (p + 1.0))
    u = k / norms[None, :]
    ux = jnp.einsum("ab,...b->...a", u, x)
    return (1.0 - jnp.sum(jnp.maximum(ux, 0.0) ** (p + 1.0), axis=-1)) / p


@float64
def strategic_dissimilarity(game: Game, player: int, co_play: CoPlay = "actions") -> np.ndarray:
    """Dense strategic dissimilarity D of `player`, shape (A_i, A_i); for small games only.

    co_play="actions" (default, paper eq. for D): D_ab = E_{a_-i ~ U(A_-i)}[(u_i(a, a_-i) - u_i(b, a_-i))^2],
    the mean over the co-players' joint actions.
    co_play="mixed" (App. C, factorised proposition): the expectation over independent co-player
    strategies x_j ~ Dirichlet(1), in closed form
    D_ab = prod_j 1/(n_j (n_j + 1)) * delta^T (kron_j (I + 11^T)) delta, delta = u_i(a, .) - u_i(b, .),
    n_j = |A_j| (the paper's constant writes (n_j+1)(n_j+2); this is the exact Dirichlet moment).
    """
    y = _feature_rows(game, player, co_play)
    return _squared_distances(y, y)


@float64
def affinity_kernel(
    game: Game,
    player: int,
    kernel_variance: float = DEFAULT_KERNEL_VARIANCE,
    co_play: CoPlay = "actions",
) -> np.ndarray:
    """Dense similarity kernel K = exp(-D / (2 sigma)^2), sigma^2 = `kernel_variance`; shape (A_i, A_i).

    For small games only (use `affinity_target` at scale, which never forms K densely).
    """
    _check_variance(kernel_variance)
    d = strategic_dissimilarity(game, player, co_play)
    return np.exp(-d / (4.0 * kernel_variance))


@float64
def affinity_target(
    game: Game,
    player: int,
    p: float = DEFAULT_P,
    kernel_variance: float = DEFAULT_KERNEL_VARIANCE,
    co_play: CoPlay = "actions",
) -> np.ndarray:
    """t_i = argmax_{x in simplex} H_a^p(x) with the kernel of `affinity_kernel`; shape (A_i,).

    Solved on the de-cloned structure: identical payoff rows form clone groups; groups whose kernel
    entry exceeds float64 resolution are linked into components. The objective separates over
    components and is homogeneous of degree p+1 in a component's mass, so a component c with
    optimal value f_c (over its own simplex) receives mass proportional to f_c^(-1/p) (App. B).
    With exact clones only, every f_c = 1: mass 1/C per clone group, and H_a^p(t) = Tsallis entropy
    of the uniform distribution over the C groups. Inside a group the mass goes evenly to its copy
    classes (`copy_classes`), then evenly to a class's copies (`_share_within_group`).
    """
    return _affinity_solution(game, player, p, kernel_variance, co_play)[0]


@float64
def affinity_targets(
    game: Game,
    p: float = DEFAULT_P,
    kernel_variance: float = DEFAULT_KERNEL_VARIANCE,
    co_play: CoPlay = "actions",
) -> list[np.ndarray]:
    """`affinity_target` for every player: a list of (A_i,) arrays.

    Memoised by the game's payoffs (their bytes' hash) for the last few games: the methods of one
    rating run ask for the same game's targets in turn (at 805 x 200, 5 s each)."""
    payoffs = np.ascontiguousarray(game.u_king if isinstance(game, KothGame) else game.payoffs)
    key = (
        type(game).__name__,
        payoffs.shape,
        payoffs.dtype.str,
        float(p),
        float(kernel_variance),
        co_play,
        hashlib.blake2b(payoffs.view(np.uint8).reshape(-1)).digest(),
    )
    if key not in _TARGETS_MEMO:
        _TARGETS_MEMO[key] = [affinity_target(game, i, p, kernel_variance, co_play) for i in range(game.num_players)]
        while len(_TARGETS_MEMO) > _TARGETS_MEMO_SIZE:
            _TARGETS_MEMO.popitem(last=False)
    _TARGETS_MEMO.move_to_end(key)
    return [t.copy() for t in _TARGETS_MEMO[key]]


_TARGETS_MEMO: OrderedDict = OrderedDict()
_TARGETS_MEMO_SIZE = 4


def affinity_is_uniform(game: Game, p: float = DEFAULT_P, kernel_variance: float = DEFAULT_KERNEL_VARIANCE) -> bool:
    """Whether every player's affinity target is the uniform distribution (to 1e-12, relative: far below
    what moves an equilibrium at the solvers' tolerances). It is when no two actions of a player are
    (near-)clones (App. B); a solver then selects the same equilibrium from "affinity" as from "uniform"."""
    return all(np.allclose(t, 1.0 / len(t), rtol=1e-12, atol=0.0) for t in affinity_targets(game, p, kernel_variance))


def affinity_target_value(
    game: Game,
    player: int,
    p: float = DEFAULT_P,
    kernel_variance: float = DEFAULT_KERNEL_VARIANCE,
    co_play: CoPlay = "actions",
) -> float:
    """max_x H_a^p(x), computed on the de-cloned structure (no dense kernel)."""
    return _affinity_solution(game, player, p, kernel_variance, co_play)[1]


# ----------------------------------------------------------------------------------------------
# Strategic features: rows y_a with D_ab = ||y_a - y_b||^2.


def _payoff_rows(game: Game, player: int) -> np.ndarray:
    """Player's payoff with its own action first, shape (A_i, *A_-i)."""
    u = np.asarray(game.payoff(player), dtype=np.float64)
    return np.moveaxis(u, player, 0)


def _feature_rows(game: Game, player: int, co_play: CoPlay) -> np.ndarray:
    if not 0 <= player < game.num_players:
        raise IndexError(f"player {player} out of range for a {game.num_players}-player game")
    rows = _payoff_rows(game, player)
    co_sizes = rows.shape[1:]
    if co_play == "actions":
        scale = 1.0 / np.prod(co_sizes, dtype=np.float64)
    elif co_play == "mixed":
        # Symmetric square root of (I + 11^T) along each co-player axis: I + c 11^T.
        for axis, n in enumerate(co_sizes, start=1):
            c = (np.sqrt(1.0 + n) - 1.0) / n
            rows = rows + c * rows.sum(axis=axis, keepdims=True)
        scale = float(np.prod([1.0 / (n * (n + 1.0)) for n in co_sizes]))
    else:
        raise ValueError(f"co_play must be 'actions' or 'mixed'; got {co_play!r}")
    return rows.reshape(rows.shape[0], -1) * np.sqrt(scale)


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d, 0.0)


# ----------------------------------------------------------------------------------------------
# Max affinity entropy on the de-cloned structure.


def _affinity_solution(
    game: Game, player: int, p: float, kernel_variance: float, co_play: CoPlay
) -> tuple[np.ndarray, float]:
    _check_p(p)
    _check_variance(kernel_variance)
    y = _feature_rows(game, player, co_play)
    bandwidth = 4.0 * kernel_variance
    group_of, reps, ncomp, comp_of = _clone_structure(y, bandwidth)
    sizes = np.bincount(group_of, minlength=len(reps)).astype(np.float64)

    group_mass = np.empty(len(reps))  # mass within its component (sums to 1 per component)
    comp_value = np.ones(ncomp)  # f_c = min over the component simplex of sum (U y)^(p+1)
    order = np.argsort(comp_of, kind="stable")
    bounds = np.searchsorted(comp_of[order], np.arange(ncomp + 1))
    alone = np.diff(bounds) == 1
    group_mass[order[bounds[:-1][alone]]] = 1.0  # a component of one group keeps all its mass
    for c in np.flatnonzero(~alone):
        members = order[bounds[c] : bounds[c + 1]]
        if len(members) > _MAX_COMPONENT:
            raise ValueError(
                f"player {player}: {len(members)} strategically similar actions form one component; "
                f"kernel_variance={kernel_variance} is too large for the de-cloned solver"
            )
        k = np.exp(-_squared_distances(reps[members], reps[members]) / bandwidth)
        m, value = _component_optimum(k, sizes[members], p)
        group_mass[members] = m
        comp_value[c] = value

    weight = comp_value ** (-1.0 / p)
    z = weight.sum()
    comp_mass = weight / z
    x = (comp_mass[comp_of] * group_mass)[group_of] * _share_within_group(game, player, group_of, sizes)
    value = (1.0 - z ** (-p)) / p
    return x, float(value)


def copy_classes(game: Game, player: int, actions: np.ndarray | None = None) -> np.ndarray:
    """Labels of `player`'s exact copies in the whole game, for `actions` (default: all): actions a, b
    share a label when every player's payoff is the same under a as under b, whatever the others play.

    Finer than the player's own clone groups: the prompt player's payoff is |u_king|, so two prompts
    with opposite signs for some pairs are clones to it but not copies (the king and rebel see two
    prompts). Two distinct models are never copies in a `KothGame`: the rebel's -1 on the diagonal
    tells them apart (u_king(p, i, i') would have to be both 0 and 1).
    """
    actions = np.arange(game.num_actions[player]) if actions is None else np.asarray(actions)
    if isinstance(game, KothGame):
        if player != PROMPT:
            return np.arange(len(actions))
        u = game.u_king[actions]
        return identical_rows(u.reshape(len(actions), -1))[1]
    rows = [np.moveaxis(np.asarray(game.payoff(k)), player, 0)[actions] for k in range(game.num_players)]
    return identical_rows(np.concatenate([r.reshape(len(actions), -1) for r in rows], axis=1))[1]


def _share_within_group(game: Game, player: int, group_of: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Each action's share (A,) of its clone group's mass: the group's mass is split evenly among the
    copy classes it holds, and a class's mass evenly among its copies (docs/game.md, "Exact copies").

    The affinity entropy is the same for every split of a clone group's mass (its kernel is 1 inside
    the group), so the split is a free choice. Among the maximisers this is the one of largest
    Shannon entropy over copy classes, then over the copies in a class; both steps look at the set of
    distinct classes only, so adding a copy of an action changes no other class's mass. Copies are
    looked for only among the members of groups of two or more.
    """
    share = np.ones(len(group_of))
    shared = np.flatnonzero(sizes[group_of] > 1)
    if not len(shared):
        return share
    classes = copy_classes(game, player, shared)
    pair = group_of[shared].astype(np.int64) * (int(classes.max()) + 1) + classes
    _, pair_of, class_size = np.unique(pair, return_inverse=True, return_counts=True)
    classes_in_group = np.bincount(group_of[shared][np.unique(pair_of, return_index=True)[1]], minlength=len(sizes))
    share[shared] = 1.0 / (classes_in_group[group_of[shared]] * class_size[pair_of])
    return share


def _clone_structure(y: np.ndarray, bandwidth: float) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Clone groups and their linked components.

    Returns (group_of (A,), representative rows (G, d), number of components, component_of (G,)).
    Identical rows (and rows with K >= 1 - 1e-12) share a group; groups are linked when their kernel
    entry is above float64 resolution (K > e^-37).
    """
    group_of, reps = _unique_rows(y)
    pairs, dist = _neighbour_pairs(reps, bandwidth * _NEGLIGIBLE_LOG_KERNEL)
    clones = pairs[dist <= bandwidth * _CLONE_LOG_KERNEL]
    if len(clones):
        _, merged = _components(len(reps), clones)
        _, first = np.unique(merged, return_index=True)
        reps = reps[first]
        group_of = merged[group_of]
        pairs = merged[pairs]
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    ncomp, comp_of = _components(len(reps), pairs)
    return group_of, reps, ncomp, comp_of


def _unique_rows(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels of identical rows and one representative row per label (in order of first occurrence)."""
    first, group_of = identical_rows(y)
    return group_of, y[first] + 0.0  # + 0.0 maps -0.0 to 0.0


def _components(n: int, pairs: np.ndarray) -> tuple[int, np.ndarray]:
    if not len(pairs):
        return n, np.arange(n)
    graph = scipy.sparse.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    ncomp, labels = scipy.sparse.csgraph.connected_components(graph, directed=False)
    return int(ncomp), labels


def _neighbour_pairs(y: np.ndarray, radius_sq: float) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (a < b) with ||y_a - y_b||^2 <= radius_sq and their squared distances.

    An orthonormal projection never increases distances: candidate pairs come from a k-d tree on an
    8-dimensional projection (no false negatives), are thinned on a wider projection, then confirmed
    with exact distances. At 316 x 289 (a bootstrap replicate's prompts) this takes 0.3 ms where the
    dense distances take 1.1 ms. Up to `_DENSE_NEIGHBOUR_MAX` rows the dense distances are computed
    instead where rows have many features (projecting them costs more), or where the projection
    separates too few pairs (close rows in many dimensions).
    """
    n = len(y)
    empty = np.zeros((0, 2), dtype=np.int64), np.zeros(0)
    if n < 2:
        return empty
    if n <= _DENSE_NEIGHBOUR_LIMIT or (n <= _DENSE_NEIGHBOUR_MAX and y.shape[1] > _PROJECTED_MAX_FEATURES):
        return _dense_neighbour_pairs(y, radius_sq)
    basis = _projection_basis(y.shape[1])
    centred = y - y.mean(0)
    radius = np.sqrt(radius_sq) * (1 + 1e-9)
    narrow = min(basis.shape[1], 8)
    cand = scipy.spatial.cKDTree(centred @ basis[:, :narrow]).query_pairs(radius, output_type="ndarray")
    if not len(cand):
        return empty
    if len(cand) > _DENSE_CANDIDATES_PER_ROW * n and n <= _DENSE_NEIGHBOUR_MAX:
        return _dense_neighbour_pairs(y, radius_sq)
    involved, cand = np.unique(cand, return_inverse=True)
    cand = cand.reshape(-1, 2)
    z = centred[involved] @ basis  # the wide projection, of the rows in some candidate pair only
    keep_pairs, keep_dist = [empty[0]], [empty[1]]
    chunk = max(1, (1 << 22) // y.shape[1])  # pairs whose differences take ~32 MB
    for start in range(0, len(cand), chunk):
        c = cand[start : start + chunk]
        dz = z[c[:, 0]] - z[c[:, 1]]
        c = involved[c[(dz * dz).sum(1) <= radius * radius]]
        diff = y[c[:, 0]] - y[c[:, 1]]
        dist = (diff * diff).sum(1)
        keep_pairs.append(c[dist <= radius_sq])
        keep_dist.append(dist[dist <= radius_sq])
    return np.concatenate(keep_pairs), np.concatenate(keep_dist)


def _dense_neighbour_pairs(y: np.ndarray, radius_sq: float) -> tuple[np.ndarray, np.ndarray]:
    d = _squared_distances(y, y)
    a, b = np.nonzero(np.triu(d <= radius_sq, k=1))
    return np.stack([a, b], axis=1), d[a, b]


@functools.lru_cache(maxsize=16)
def _projection_basis(dim: int) -> np.ndarray:
    """A fixed random orthonormal basis of min(dim, 64) directions in R^dim (`_neighbour_pairs`)."""
    rng = np.random.default_rng(0)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, min(dim, 64))))
    basis.setflags(write=False)
    return basis


def _component_optimum(k: np.ndarray, sizes: np.ndarray, p: float) -> tuple[np.ndarray, float]:
    """min over the simplex of F(m) = sum_g n_g (sum_h K_gh s_h^(-1/(p+1)) m_h)^(p+1), s_h = sum_g n_g K_gh^(p+1).

    m are group masses; returns (m, F(m)). Exact active-set QP for p = 1, SLSQP otherwise.
    """
    s = (sizes[:, None] * k ** (p + 1.0)).sum(0)
    v = k * s[None, :] ** (-1.0 / (p + 1.0))
    if p == 1.0:
        q = v.T @ (sizes[:, None] * v)
        m = _simplex_qp(q)
    else:

        def objective(m):
            vm = np.maximum(v @ m, 0.0)
            return float(sizes @ vm ** (p + 1.0)), (p + 1.0) * v.T @ (sizes * vm**p)

        n = len(sizes)
        res = scipy.optimize.minimize(
            objective,
            np.full(n, 1.0 / n),
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * n,
            constraints=[{"type": "eq", "fun": lambda m: m.sum() - 1.0, "jac": lambda m: np.ones_like(m)}],
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        m = np.clip(res.x, 0.0, None)
        m /= m.sum()
    value = float(sizes @ np.maximum(v @ m, 0.0) ** (p + 1.0))
    return m, value


def _simplex_qp(q: np.ndarray) -> np.ndarray:
    """argmin m^T Q m over the simplex for positive definite Q: the p = 1 case of App. B.

    Primal active-set method on a free set F, whose face minimiser is z / 1^T z with Q_FF z = 1.
    Warm start: shrink F from all actions to the positive entries of z until z >= 0 (a feasible
    face minimiser after a few solves, even when near clones crowd most actions out). Then F gains
    the action whose gradient most undercuts the level on F, or loses the first action a step
    towards the face minimiser drives to zero, until the KKT conditions hold. The Cholesky factor
    of Q_FF gains one row per added action (O(|F|^2)) and is refactorised only on removals. Actions
    off the support get exactly zero mass.
    """
    n = len(q)
    chol = np.zeros((n, n))  # chol[:s, :s]: lower Cholesky factor of Q_FF, rows in `free` order
    free = np.arange(n)
    try:
        while True:
            s = len(free)
            chol[:s, :s] = np.linalg.cholesky(q[np.ix_(free, free)])
            z = scipy.linalg.cho_solve((chol[:s, :s], True), np.ones(s), check_finite=False)
            if np.all(z >= 0.0):
                break
            free = free[z > 0.0]  # 1^T z = 1^T Q_FF^-1 1 > 0: never empty
    except np.linalg.LinAlgError:  # numerically singular: grow F from the best vertex instead
        free = np.array([np.argmin(np.diag(q))])
        chol[0, 0] = np.sqrt(q[free[0], free[0]])
        z = np.ones(1)
    factored = True  # False once Q_FF is numerically singular: LU solves from then on
    m = np.zeros(n)
    m[free] = z / z.sum()
    free = free.tolist()
    added = -1
    for _ in range(10 * n + 10):
        s = len(free)
        idx = np.asarray(free)
        if factored:
            z = scipy.linalg.cho_solve((chol[:s, :s], True), np.ones(s), check_finite=False)
        else:
            z = np.linalg.solve(q[np.ix_(idx, idx)], np.ones(s))
        target = z / z.sum()
        if np.all(target >= 0.0):
            m = np.zeros(n)
            m[idx] = target
            grad = target @ q[idx]
            level = grad[idx].mean()
            viol = grad - level
            viol[idx] = np.inf
            j = int(np.argmin(viol))
            if viol[j] >= -1e-14 * max(1.0, abs(level)):
                return m
            if factored:
                row = scipy.linalg.solve_triangular(chol[:s, :s], q[idx, j], lower=True, check_finite=False)
                pivot = q[j, j] - row @ row
                factored = bool(pivot > 64 * np.finfo(float).eps * q[j, j])
                chol[s, :s] = row
                chol[s, s] = np.sqrt(max(pivot, 0.0))
            free.append(j)
            added = j
            continue
        mf = m[idx]
        blocking = np.flatnonzero(target < 0.0)
        ratios = mf[blocking] / (mf[blocking] - target[blocking])
        b = int(blocking[np.argmin(ratios)])
        if idx[b] == added and mf[b] == 0.0:
            return m  # the added action's violation was at rounding level
        mf = np.clip(mf + ratios.min() * (target - mf), 0.0, None)
        mf[b] = 0.0
        m = np.zeros(n)
        m[idx] = mf / mf.sum()
        del free[b]
        added = -1
        if factored:
            chol[: s - 1, : s - 1] = np.linalg.cholesky(q[np.ix_(free, free)])
    raise RuntimeError("simplex QP active-set did not converge")


def _check_p(p: float) -> None:
    if not 0.0 < p <= 1.0:
        raise ValueError(f"entropic index p must lie in (0, 1]; got {p}")


def _check_variance(kernel_variance: float) -> None:
    if not kernel_variance > 0.0:
        raise ValueError(f"kernel_variance must be positive; got {kernel_variance}")
