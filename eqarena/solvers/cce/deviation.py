"""Deviation ratings (Marris, Liu, Gemp, Piliouras, Lanctot, ICLR 2025, arXiv 2502.11645).

An N-player, clone-invariant rating without an equilibrium-selection target. Over joints sigma, the
deviation gain of player i's action a is (paper eq. 1, at a joint)

    delta_a(sigma) = sum_s sigma(s) [u_i(a, s_-i) - u_i(s)] = u_i(a, sigma_-i) - u_i(sigma).

The ratings are the lexicographically smallest vector of gains, largest first: a strict sequence of LPs

    t_k = min_{sigma in simplex, t}  t   s.t.  delta_a(sigma) <= t       for every action a not yet rated,
                                              delta_a(sigma) <= r_a     for every action a rated before,


after which the actions pinned at t_k (those whose constraint binds in every optimal sigma; found from
the LP's positive dual multipliers, at least one per LP since they sum to 1) are rated r_a = t_k; repeat
until every action of every player is rated. The first LP needs no CCE constraint: its optimum t_1 <= 0
(a CCE exists), so every sigma it allows is a CCE, the strictest one; all ratings are <= 0.

Direction (minimise the largest gain first): a clone a' of player i's action a has the row of a, so
delta_a'(sigma) = delta_a(sigma) for every sigma; a co-player's clone only splits joint mass, and merging
it back maps joints of the cloned game onto joints of the original with every gain unchanged (and
splitting maps back). The set of attainable gain vectors is therefore the original one with a's entry
repeated, and a lexicographic min-max of it is unique (it is a min-max over a polytope, as for the
nucleolus) and rates a and a' alike, the other actions as before. Starting from the largest gain is
what makes every LP range over CCEs without imposing them: the reverse order (maximise the smallest
gain) would rate over non-equilibria and reward actions for the co-players' worst play.

`deviation(game)` rates a dense `NormalFormGame` (variables: the joint) or a `KothGame` (variables: the
joint x(p, k, r), its marginals y(k, r), z(p, r), w(p, k) and the three expected payoffs, so each gain
row has O(M^2) or O(P M) entries and the LP stays O(P M^2) in size); solved by HiGHS (scipy linprog).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from eqarena.solvers.cce.max_entropy import joint_deviation_gains, joint_exploitability, joint_marginals
from eqarena.solvers.games.equilibrium import Equilibrium
from eqarena.solvers.games.normal_form import Game, KothGame, NormalFormGame

DUAL_TOL = 1e-9  # a multiplier above this pins its action at the LP's optimum
RELAX = (1e-9, 1e-8, 1e-7)  # if round-off leaves an LP infeasible, pinned bounds r_a + these, in turn
_HIGHS = {"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9}


@dataclass(frozen=True)
class GainLP:
    """Joints as LP variables v: gains = gains @ v (one row per action of every player, in player
    order); eq @ v = rhs and `bounds` make v a joint; `joint(v)` reads the joint back."""

    gains: sp.csr_matrix
    eq: sp.csr_matrix
    rhs: np.ndarray
    bounds: list
    size: int  # joint entries, the first `size` variables


@dataclass(frozen=True)
class Levels:
    """The LP sequence's result: ratings (K,), the last LP's variables, and per LP its optimum t_k."""

    ratings: np.ndarray
    variables: np.ndarray
    levels: list[float]
    seconds: list[float]


def lexicographic_minmax(lp: GainLP, *, dual_tol: float = DUAL_TOL, backend: str = "highspy") -> Levels:
    """Ratings r (K,) by the LP sequence of the module docstring: min t s.t. gains_free @ v <= t,
    gains_rated @ v <= r_rated, eq @ v = rhs; pin the free actions whose multiplier exceeds dual_tol.

    backend "highspy": one HiGHS model, changed in place after each LP (a pinned row loses its t and
    gets bound r_a), so each LP after the first starts from the last optimal basis (dual simplex);
    "scipy": `scipy.optimize.linprog(method="highs")` from scratch every LP (a reference; slow when
    there are many levels)."""
    if backend not in ("highspy", "scipy"):
        raise ValueError(f"backend must be 'highspy' or 'scipy'; got {backend!r}")
    k, n = lp.gains.shape
    t_col = sp.csr_matrix(np.concatenate([-np.ones(k), np.zeros(lp.eq.shape[0])])[:, None])
    matrix = sp.hstack([sp.vstack([lp.gains, lp.eq]), t_col], format="csr")
    bounds = list(lp.bounds) + [(None, None)]
    solve = _HighsLP(matrix, k, lp.rhs, bounds) if backend == "highspy" else _ScipyLP(matrix, k, lp.rhs, bounds)
    rated = np.zeros(k, dtype=bool)
    ratings = np.full(k, np.nan)
    levels, seconds, v = [], [], None
    while not rated.all():
        free = np.flatnonzero(~rated)
        start = time.perf_counter()
        t, v, multipliers = _solve_relaxing(solve)
        seconds.append(time.perf_counter() - start)
        multipliers = multipliers[free]
        pinned = multipliers > dual_tol
        if not pinned.any():  # cannot happen in exact arithmetic (the multipliers sum to 1)
            pinned = multipliers >= multipliers.max()
        ratings[free[pinned]] = t
        rated[free[pinned]] = True
        solve.pin(free[pinned], t)
        levels.append(t)
    return Levels(ratings, v, levels, seconds)


def _solve_relaxing(solve):
    """One LP of the sequence; if round-off in the pinned bounds r_a makes it infeasible, re-solve with
    every pinned bound raised by RELAX[0], then RELAX[1], ... (kept for the rest of the sequence)."""
    for slack in (None, *RELAX):
        if slack is not None:
            solve.relax(slack)
        try:
            return solve()
        except _Infeasible:
            if slack == RELAX[-1]:
                raise RuntimeError(
                    "deviation ratings: an LP of the sequence is infeasible even with pinned "
                    f"bounds relaxed by {RELAX[-1]:g}"
                ) from None
            continue


class _Infeasible(RuntimeError):
    pass


class _ScipyLP:
    """min t over [v, t] by scipy linprog; rows < k are gain rows (<= 0 with -t, or <= r once pinned)."""

    def __init__(self, matrix, k, rhs, bounds):
        self.a_ub, self.b_ub = matrix[:k].tolil(), np.zeros(k)
        self.a_eq, self.rhs, self.bounds = matrix[k:], rhs, bounds
        self.c = np.zeros(matrix.shape[1])
        self.c[-1] = 1.0
        self.pinned, self.slack = np.full(k, np.nan), 0.0

    def __call__(self):
        res = linprog(
            self.c,
            A_ub=self.a_ub.tocsr(),
            b_ub=self.b_ub,
            A_eq=self.a_eq,
            b_eq=self.rhs,
            bounds=self.bounds,
            method="highs",
            options=_HIGHS,
        )
        if res.status == 2:
            raise _Infeasible(res.message)
        if res.status != 0:
            raise RuntimeError(f"deviation ratings: LP failed: {res.message}")
        return float(res.x[-1]), res.x[:-1], -np.asarray(res.ineqlin.marginals)

    def pin(self, rows, value):
        self.a_ub[rows, -1] = 0.0
        self.b_ub[rows] = value + self.slack
        self.pinned[rows] = value

    def relax(self, slack):
        self.slack = slack
        self.b_ub[~np.isnan(self.pinned)] = self.pinned[~np.isnan(self.pinned)] + slack


class _HighsLP:
    """The same LP as one highspy model changed in place between solves, by bounds only, so each LP
    starts from the last optimal basis: variables [v, q (K,), t], rows gains @ v - q <= 0, eq @ v = rhs,
    q - t <= 0; pinning a fixes q_a <= r_a and frees its row q_a - t."""

    def __init__(self, matrix, k, rhs, bounds):
        import highspy

        self.highspy, self.inf = highspy, highspy.kHighsInf
        self.h = h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        for key, value in _HIGHS.items():
            h.setOptionValue(key, value)
        n = matrix.shape[1] - 1  # the v columns (matrix's last column is t)
        rows = matrix.shape[0]
        link = sp.hstack([sp.csr_matrix((k, n)), sp.identity(k), -np.ones((k, 1))], format="csr")
        body = sp.hstack(
            [matrix[:, :n], sp.vstack([-sp.identity(k), sp.csr_matrix((rows - k, k))]), sp.csr_matrix((rows, 1))]
        )
        full = sp.vstack([body, link], format="csr")
        lower = np.array([-self.inf if b[0] is None else b[0] for b in bounds[:n]] + [-self.inf] * (k + 1))
        upper = np.array([self.inf if b[1] is None else b[1] for b in bounds[:n]] + [self.inf] * (k + 1))
        h.addVars(n + k + 1, lower, upper)
        h.changeColsCost(1, np.array([n + k], dtype=np.int32), np.array([1.0]))
        h.addRows(
            full.shape[0],
            np.concatenate([np.full(k, -self.inf), rhs, np.full(k, -self.inf)]),
            np.concatenate([np.zeros(k), rhs, np.zeros(k)]),
            full.nnz,
            full.indptr[:-1].astype(np.int32),
            full.indices.astype(np.int32),
            full.data,
        )
        self.k, self.n, self.link = k, n, rows
        self.pinned, self.slack = np.full(k, np.nan), 0.0

    def __call__(self):
        self.h.run()
        status = self.h.getModelStatus()
        if status != self.highspy.HighsModelStatus.kOptimal:  # once more from scratch, without the old basis
            self.h.clearSolver()
            self.h.run()
            status = self.h.getModelStatus()
        if status == self.highspy.HighsModelStatus.kInfeasible:
            raise _Infeasible()
        if status != self.highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"deviation ratings: LP failed: {self.h.modelStatusToString(status)}")
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value)
        return float(x[-1]), x[: self.n], -np.asarray(sol.row_dual)[self.link : self.link + self.k]

    def pin(self, rows, value):
        self.pinned[rows] = value
        for row in rows:
            self.h.changeColBounds(self.n + int(row), -self.inf, float(value) + self.slack)
            self.h.changeRowBounds(self.link + int(row), -self.inf, self.inf)

    def relax(self, slack):
        self.slack = slack
        for row in np.flatnonzero(~np.isnan(self.pinned)):
            self.h.changeColBounds(self.n + int(row), -self.inf, float(self.pinned[row]) + slack)


def dense_lp(game: NormalFormGame) -> GainLP:
    """The joint x itself as the variables: gains[(i, a), s] = u_i(a, s_-i) - u_i(s)."""
    from eqarena.solvers.cce.dual import dense_features

    features = dense_features(game.payoffs)  # (prod A, sum A_i)
    size = features.shape[0]
    return GainLP(sp.csr_matrix(features.T), sp.csr_matrix(np.ones((1, size))), np.ones(1), [(0.0, None)] * size, size)


def koth_lp(u_king: np.ndarray) -> GainLP:
    """The king-of-the-hill game's LP (u_prompt = |u|, u_rebel = -u off the diagonal and -1 on it):
    variables [x (P M M), y (M M), z (P M), w (P M), v_prompt, v_king, v_rebel] with y(k, r), z(p, r),
    w(p, k) the marginals of x and v_i = u_i(x); the gains are
    prompt q: <|u_q|, y> - v_prompt; king i: sum_{p,r} u(p,i,r) z(p,r) - v_king;
    rebel j: sum_{p,k} u_rebel(p,k,j) w(p,k) - v_rebel."""
    u = np.asarray(u_king, dtype=np.float64)
    p, m, _ = u.shape
    nx, ny, nz = p * m * m, m * m, p * m
    oy, oz, ow, ov = nx, nx + ny, nx + ny + nz, nx + ny + 2 * nz  # where y, z, w and the values start
    n = ov + 3
    u_rebel = np.where(np.eye(m, dtype=bool)[None], -1.0, -u)
    idx = np.arange(nx).reshape(p, m, m)

    def block(rows, cols, vals, shape):
        return sp.csr_matrix((np.ravel(vals), (np.ravel(rows), np.ravel(cols))), shape=shape)

    # gains: P + 2M rows
    prompt = sp.hstack(
        [
            sp.csr_matrix((p, oy)),
            sp.csr_matrix(np.abs(u).reshape(p, ny)),
            sp.csr_matrix((p, 2 * nz)),
            sp.csr_matrix(np.tile([[-1.0, 0.0, 0.0]], (p, 1))),
        ]
    )
    king_rows = np.broadcast_to(np.arange(m)[None, :, None], (p, m, m))  # u(p, i, r) at row i, col z(p, r)
    king_cols = oz + np.broadcast_to((np.arange(p)[:, None, None] * m + np.arange(m)[None, None, :]), (p, m, m))
    king = block(king_rows, king_cols, u, (m, n)) + block(np.arange(m), np.full(m, ov + 1), -np.ones(m), (m, n))
    rebel_rows = np.broadcast_to(np.arange(m)[None, None, :], (p, m, m))  # u_rebel(p, k, j) at row j, col w(p, k)
    rebel_cols = ow + np.broadcast_to((np.arange(p)[:, None, None] * m + np.arange(m)[None, :, None]), (p, m, m))
    rebel = block(rebel_rows, rebel_cols, u_rebel, (m, n)) + block(
        np.arange(m), np.full(m, ov + 2), -np.ones(m), (m, n)
    )
    gains = sp.vstack([prompt, king, rebel], format="csr")

    # marginal definitions: y(k, r) = sum_p x, z(p, r) = sum_k x, w(p, k) = sum_r x (as marginal - sum = 0)
    kr = np.broadcast_to(np.arange(m * m).reshape(1, m, m), (p, m, m))
    pr = np.broadcast_to(np.arange(p)[:, None, None] * m + np.arange(m)[None, None, :], (p, m, m))
    pk = np.broadcast_to(np.arange(p)[:, None, None] * m + np.arange(m)[None, :, None], (p, m, m))
    rows = np.concatenate([np.ravel(kr), ny + np.ravel(pr), ny + nz + np.ravel(pk)])
    eq_x = block(rows, np.tile(np.ravel(idx), 3), -np.ones(3 * nx), (ny + 2 * nz, n))
    eq_m = sp.hstack([sp.csr_matrix((ny + 2 * nz, nx)), sp.identity(ny + 2 * nz), sp.csr_matrix((ny + 2 * nz, 3))])
    values = sp.hstack(
        [
            sp.csr_matrix(np.stack([np.abs(u), u, u_rebel]).reshape(3, nx)),
            sp.csr_matrix((3, ny + 2 * nz)),
            -sp.identity(3),
        ]
    )
    simplex = sp.hstack([sp.csr_matrix(np.ones((1, nx))), sp.csr_matrix((1, n - nx))])
    eq = sp.vstack([eq_x + eq_m, values, simplex], format="csr")
    rhs = np.zeros(eq.shape[0])
    rhs[-1] = 1.0
    bounds = [(0.0, None)] * (nx + ny + 2 * nz) + [(None, None)] * 3
    return GainLP(gains, eq, rhs, bounds, nx)


def deviation(
    game: Game,
    target: str | None = None,
    *,
    merge_clones: bool = True,
    dual_tol: float = DUAL_TOL,
    backend: str = "highspy",
) -> Equilibrium:
    """Deviation ratings of `game` (module docstring) as an `Equilibrium`: `ratings` are the gains of
    `joint`, a CCE of the last LP attaining them (the joint is not unique; the ratings are), with
    its `marginals`. target: "strictest" or None (the method has no selection target).
    backend: "highspy" (warm-started LPs) or "scipy" (linprog; `lexicographic_minmax`).
    merge_clones (KothGame): solve on the distinct prompt slices of u_king and share each one's mass
    among its copies; exact by clone invariance, and fewer variables.
    diagnostics: levels (distinct t_k), lps, largest |gain - rating|, LP seconds."""
    if target not in (None, "strictest"):
        raise ValueError(f"deviation ratings have no selection target; got {target!r}")
    if not isinstance(game, (NormalFormGame, KothGame)):
        raise TypeError(f"game must be a NormalFormGame or KothGame; got {type(game).__name__}")
    start = time.perf_counter()
    if isinstance(game, KothGame):
        u = game.u_king
        if merge_clones:
            keys = np.ascontiguousarray(u.reshape(len(u), -1))
            _, first, inverse, counts = np.unique(
                keys, axis=0, return_index=True, return_inverse=True, return_counts=True
            )
            inverse = inverse.reshape(-1)
        else:
            first, inverse, counts = np.arange(len(u)), np.arange(len(u)), np.ones(len(u), dtype=np.int64)
        lp = koth_lp(u[first])
        sol = lexicographic_minmax(lp, dual_tol=dual_tol, backend=backend)
        m = u.shape[1]
        x = np.clip(sol.variables[: lp.size], 0.0, None).reshape(len(first), m, m)
        joint = x[inverse] / counts[inverse][:, None, None]
        rated = np.concatenate([sol.ratings[: len(first)][inverse], sol.ratings[len(first) :]])
    else:
        lp = dense_lp(game)
        sol = lexicographic_minmax(lp, dual_tol=dual_tol, backend=backend)
        joint = np.clip(sol.variables, 0.0, None).reshape(game.num_actions)
        rated = sol.ratings
    joint = joint / joint.sum()
    gains = joint_deviation_gains(game, joint)
    drift = float(np.max(np.abs(np.concatenate(gains) - rated)))
    return Equilibrium(
        marginals=joint_marginals(joint),
        joint=joint,
        ratings=gains,
        exploitability=joint_exploitability(game, joint),
        method="lexicographic_lp",
        target="strictest",
        steps=len(sol.levels),
        final_temperature=None,
        seconds=time.perf_counter() - start,
        diagnostics={
            "lps": len(sol.levels),
            "levels": len(np.unique(np.round(sol.levels, 9))),
            "strictest": sol.levels[0],
            "max_rating_drift": drift,
            "lp_seconds": float(sum(sol.seconds)),
            "variables": int(lp.gains.shape[1]),
            "merged_prompts": int(len(game.u_king) - len(first)) if isinstance(game, KothGame) else 0,
        },
    )
