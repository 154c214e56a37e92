"""The logit-QRE equations in log-probabilities and their bordered (chord) Newton solves.

Unknowns z = (y_1, ..., y_N, c_1, ..., c_N, lambda) with y_i = log x_i; equations
    F_i = y_i - log t_i - lambda * v_i(x_-i) + c_i = 0     (x_i proportional to t_i exp(lambda v_i))
    G_i = sum_a exp(y_i,a) - 1 = 0
H(z) = 0 has one unknown more than equations: its solution set is the QRE branch.

`factor(z, row)` evaluates H and the Jacobian J at z and factorises the bordered matrix [J; row];
it returns the Newton correction d (J d = -H, row . d = 0) and the bordered tangent s (J s = 0,
row . s = 1). `chord(z, factors)` evaluates H at another z and solves with the same factors
(Gambit's corrector also keeps the predictor's factorisation).

The king-of-the-hill system exploits that the prompt player's payoff does not depend on its own
strategy: its Jacobian block is the identity, and each solve is a (2M+4) Schur complement, O(P M^2).
Its contractions are memory-bound matrix-vector products over u_king; they run in NumPy (BLAS) or,
with backend="jax", in jitted XLA (same code, same results).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from eqarena.solvers.games.normal_form import KothGame, NormalFormGame

_NEGLIGIBLE_MASS = 1e-8


class Evaluation(NamedTuple):
    residual: Any  # H(z), (n,)
    correction: Any  # chord/Newton step, (n + 1,)
    tangent: Any  # bordered tangent (not normalised), (n + 1,); None for chord steps
    values: tuple  # u_i(a, x_-i) per player at the evaluated point
    factors: Any  # opaque, for `chord`
    marginals: tuple  # the strategy profile at the evaluated point (not renormalised)


class LogitSystem:
    """z layout as in the module docstring; subclasses implement `factor` and `chord`."""

    def __init__(self, sizes: Sequence[int]):
        self.sizes = tuple(int(s) for s in sizes)
        self.num_players = len(self.sizes)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)

    @property
    def dim(self) -> int:
        return int(self.offsets[-1]) + self.num_players + 1

    def split(self, z: np.ndarray) -> list[np.ndarray]:
        return [z[self.offsets[i] : self.offsets[i + 1]] for i in range(self.num_players)]

    def start(self, log_targets: Sequence[np.ndarray]) -> np.ndarray:
        """The branch's start at lambda = 0: y = log t, c = 0."""
        return np.concatenate([*log_targets, np.zeros(self.num_players + 1)])

    def distance_weights(self, z: np.ndarray) -> np.ndarray:
        """Weights of the step-size control's norm: log-probabilities of actions with vanishing mass
        count for little (their equations decouple and Newton solves them in one step)."""
        w = np.ones_like(z)
        total = int(self.offsets[-1])
        w[:total] = np.minimum(1.0, np.exp(np.minimum(z[:total], 0.0)) / _NEGLIGIBLE_MASS)
        return w

    def factor(self, z: np.ndarray, row: np.ndarray) -> Evaluation:  # pragma: no cover
        raise NotImplementedError

    def chord(self, z: np.ndarray, factors) -> Evaluation:  # pragma: no cover
        raise NotImplementedError


# ---------------------------------------------------------------------------------------------
# Dense N-player games (small): explicit Jacobian.


def dense_value_blocks(payoffs: np.ndarray, xs: Sequence[np.ndarray]):
    """u_i(., x_-i) per player and blocks {(i, j): d u_i(a, x_-i) / d x_j(b)} of shape (A_i, A_j)."""
    n = len(xs)
    if n == 1:
        return [np.asarray(payoffs[0], dtype=np.float64)], {}
    if n == 3:
        return _three_player_blocks(payoffs, xs)
    values, blocks = [], {}
    for i in range(n):
        for j in range(n):
            if j == i:
                continue
            t = payoffs[i]
            for k in reversed(range(n)):
                if k not in (i, j):
                    t = np.tensordot(t, xs[k], axes=([k], [0]))
            blocks[(i, j)] = t if i < j else t.T
        other = (i + 1) % n
        values.append(blocks[(i, other)] @ xs[other])
    return values, blocks


def _three_player_blocks(payoffs: np.ndarray, xs: Sequence[np.ndarray]):
    """`dense_value_blocks` for three players, by matrix products (the general loop's tensordot calls
    cost more than the arithmetic on the small support games the polish solves)."""
    t0, t1, t2 = payoffs
    x0, x1, x2 = xs
    a0, a1, a2 = t0.shape
    blocks = {
        (0, 1): t0 @ x2,
        (0, 2): x1 @ t0,
        (1, 0): (t1 @ x2).T,
        (1, 2): (x0 @ t1.reshape(a0, a1 * a2)).reshape(a1, a2),
        (2, 0): (x1 @ t2).T,
        (2, 1): (x0 @ t2.reshape(a0, a1 * a2)).reshape(a1, a2).T,
    }
    values = [blocks[(0, 1)] @ x1, blocks[(1, 2)] @ x2, blocks[(2, 0)] @ x0]
    return values, blocks


class DenseLogitSystem(LogitSystem):
    def __init__(self, game: NormalFormGame, log_targets: Sequence[np.ndarray]):
        super().__init__(game.num_actions)
        self.payoffs = np.asarray(game.payoffs)
        self.log_t = [np.asarray(lt) for lt in log_targets]

    def _residual(self, z):
        n, total = self.num_players, int(self.offsets[-1])
        ys = self.split(z)
        c, lam = z[total : total + n], z[-1]
        xs = [np.exp(y) for y in ys]
        values, blocks = dense_value_blocks(self.payoffs, xs)
        f = [ys[i] - self.log_t[i] - lam * values[i] + c[i] for i in range(n)]
        g = [x.sum() - 1.0 for x in xs]
        return np.concatenate([*f, g]), xs, values, blocks

    def factor(self, z, row):
        n, total, off = self.num_players, int(self.offsets[-1]), self.offsets
        residual, xs, values, blocks = self._residual(z)
        lam = z[-1]
        jac = np.zeros((total + n + 1, total + n + 1))
        for i in range(n):
            rows = slice(off[i], off[i + 1])
            jac[rows, rows] = np.eye(self.sizes[i])
            for j in range(n):
                if j != i:
                    jac[rows, off[j] : off[j + 1]] = -lam * blocks[(i, j)] * xs[j][None, :]
            jac[rows, total + i] = 1.0
            jac[rows, -1] = -values[i]
            jac[total + i, rows] = xs[i]
        jac[-1] = row
        lu = _lu(jac)
        sol = _lu_solve(lu, np.stack([np.append(-residual, 0.0), np.append(np.zeros_like(residual), 1.0)], 1))
        return Evaluation(residual, sol[:, 0], sol[:, 1], tuple(values), lu, tuple(xs))

    def chord(self, z, factors):
        residual, xs, values, _ = self._residual(z)
        sol = _lu_solve(factors, np.append(-residual, 0.0)[:, None])
        return Evaluation(residual, sol[:, 0], None, tuple(values), factors, tuple(xs))


def _lu(a):
    import scipy.linalg

    return scipy.linalg.lu_factor(a, check_finite=False)


def _lu_solve(lu, b):
    import scipy.linalg

    return scipy.linalg.lu_solve(lu, b, check_finite=False)


# ---------------------------------------------------------------------------------------------
# King-of-the-hill games: Schur complement on the prompt player's identity block.


def koth_values_from(a_r, u_bar, xp, xk, xr):
    sp = xp.sum()
    return (a_r @ xk, u_bar @ xr, -(u_bar.T @ xk) - xk * sp)


def koth_values(u, a, xp, xk, xr):
    """u_i(., x_-i) for the prompt, king and rebel from two passes (|u| x_r and x_p u); NumPy or JAX."""
    p, m = u.shape[0], u.shape[1]
    a_r = (a.reshape(p * m, m) @ xr).reshape(p, m)
    u_bar = (xp @ u.reshape(p, m * m)).reshape(m, m)
    return koth_values_from(a_r, u_bar, xp, xk, xr)


def _koth_unpack(r, m, xnp):
    yk, yr = r[:m], r[m : 2 * m]
    return yk, yr, r[2 * m], r[2 * m + 1], r[-1], xnp.exp(yk), xnp.exp(yr)


def _softmax(logits, xnp):
    e = xnp.exp(logits - logits.max())
    return e / e.sum()


# Prompts whose logit is this far below the best one carry mass < e^-50 relative: with the NumPy
# backend their rows are skipped in the passes that are weighted by the prompt strategy.
_PRUNE_LOGIT = 50.0
_CHORD_LOGIT = 80.0


def _koth_evaluate(r, u, a, log_t, xnp, prune: bool = False):
    """Residual of the reduced system, the marginals (prompt player at its exact logit response),
    the values, and the rows of the prompts that carry mass (all rows unless pruning)."""
    p, m = u.shape[0], u.shape[1]
    yk, yr, ck, cr, lam, xk, xr = _koth_unpack(r, m, xnp)
    a_r = (a.reshape(p * m, m) @ xr).reshape(p, m)
    vp = a_r @ xk
    logits = log_t[:p] + lam * vp
    xp = _softmax(logits, xnp)
    alive = None
    if prune:
        alive = np.flatnonzero(logits >= logits.max() - _PRUNE_LOGIT)
        if len(alive) > 0.8 * p:
            alive = None
    u_live, xp_live = (u, xp) if alive is None else (u[alive], xp[alive])
    u_bar = (xp_live @ u_live.reshape(-1, m * m)).reshape(m, m)
    vk, vr = u_bar @ xr, -(u_bar.T @ xk) - xk
    residual = xnp.concatenate(
        [
            yk - log_t[p : p + m] - lam * vk + ck,
            yr - log_t[p + m :] - lam * vr + cr,
            xnp.stack([xk.sum() - 1.0, xr.sum() - 1.0]),
        ]
    )
    return residual, (xp, xk, xr), (vp, vk, vr), a_r, u_bar, alive


def _koth_factor_impl(r, row, u, a, log_t, antisymmetric, xnp=jnp, prune: bool = False):
    m = u.shape[1]
    residual, xs, values, a_r, u_bar, alive = _koth_evaluate(r, u, a, log_t, xnp, prune)
    xp, xk, xr = xs
    vp, vk, vr = values
    lam = r[-1]
    if alive is not None:
        u, a, a_r, xp, vp = u[alive], a[alive], a_r[alive], xp[alive], vp[alive]
    q = u.shape[0]
    uf, af = u.reshape(q * m, m), a.reshape(q * m, m)
    u_r = (uf @ xr).reshape(q, m)
    if antisymmetric:
        u_k, a_k = -(uf @ xk).reshape(q, m), (af @ xk).reshape(q, m)
    else:
        u_k, a_k = xnp.einsum("pij,i->pj", u, xk), xnp.einsum("pij,i->pj", a, xk)
    # d logit_p / d r for r = (y_k, y_r, c_k, c_r, lambda), then d x_p / d r through the softmax.
    d_logit = xnp.concatenate(
        [lam * a_r * xk[None, :], lam * a_k * xr[None, :], xnp.zeros((q, 2)), vp[:, None]], axis=1
    )
    d_xp = xp[:, None] * (d_logit - xp @ d_logit)
    eye = xnp.eye(m)
    zm, one_m = xnp.zeros((m, 1)), xnp.ones((m, 1))
    n = 2 * m + 3
    direct = xnp.concatenate(
        [
            xnp.concatenate([eye, -lam * u_bar * xr[None, :], one_m, zm, -vk[:, None]], axis=1),
            xnp.concatenate([lam * (u_bar.T + eye) * xk[None, :], eye, zm, one_m, -vr[:, None]], axis=1),
            xnp.concatenate([xk, xnp.zeros(m + 3)])[None, :],
            xnp.concatenate([xnp.zeros(m), xr, xnp.zeros(3)])[None, :],
        ],
        axis=0,
    )
    through_prompt = xnp.concatenate([-lam * (u_r.T @ d_xp), lam * (u_k.T @ d_xp), xnp.zeros((2, n))], axis=0)
    jac = xnp.concatenate([direct + through_prompt, row[None, :]], axis=0)
    rhs = xnp.stack(
        [xnp.concatenate([-residual, xnp.zeros(1)]), xnp.concatenate([xnp.zeros(n - 1), xnp.ones(1)])], axis=1
    )
    sol = xnp.linalg.solve(jac, rhs)
    return residual, sol[:, 0], sol[:, 1], xs, values, jac


def _koth_chord_impl(r, jac, u, a, log_t, xnp=jnp, prune: bool = False):
    residual, xs, values, _, _, _ = _koth_evaluate(r, u, a, log_t, xnp, prune)
    sol = xnp.linalg.solve(jac, xnp.concatenate([-residual, xnp.zeros(1)]))
    return residual, sol, xs, values


_koth_factor_jit = jax.jit(_koth_factor_impl, static_argnames=("antisymmetric",))
_koth_chord_jit = jax.jit(_koth_chord_impl)


class KothLogitSystem(LogitSystem):
    """Reduced system in r = (y_king, y_rebel, c_king, c_rebel, lambda).

    The prompt player's logit equations are solved exactly for its strategy,
    x_prompt = softmax(log t_prompt + lambda u_prompt(., x_king, x_rebel)) (its payoff does not depend
    on its own strategy, so its Jacobian block is the identity and eliminating it is the Schur
    complement); the continuation runs on the 2M+2 model equations, and arclength is measured in the
    models' log-probabilities.
    """

    def __init__(self, game: KothGame, log_targets: Sequence[np.ndarray], backend: str = "numpy", prune: bool = True):
        p, m, _ = game.num_actions
        self.prune = prune
        super().__init__((m, m))
        self.num_prompts = p
        u = np.asarray(game.u_king)
        self.antisymmetric = is_antisymmetric(u)
        self.backend = backend
        self.log_targets = [np.asarray(lt) for lt in log_targets]
        log_t = np.concatenate(log_targets)
        if backend == "jax":
            self.u, self.log_t = jnp.asarray(u), jnp.asarray(log_t)
            self.a = jnp.abs(self.u)
        elif backend == "numpy":
            self.u, self.a, self.log_t = u, np.abs(u), log_t
        else:
            raise ValueError(f"backend must be 'numpy' or 'jax'; got {backend!r}")

    def start(self, log_targets=None) -> np.ndarray:
        return np.concatenate([self.log_targets[1], self.log_targets[2], np.zeros(3)])

    def factor(self, z, row):
        if self.backend == "jax":
            out = _koth_factor_jit(jnp.asarray(z), jnp.asarray(row), self.u, self.a, self.log_t, self.antisymmetric)
            out = jax.tree_util.tree_map(np.asarray, out)
            residual, corr, tang, xs, values, jac = out
            return Evaluation(residual, corr, tang, tuple(values), jac, tuple(xs))
        residual, corr, tang, xs, values, jac = _koth_factor_impl(
            z, row, self.u, self.a, self.log_t, self.antisymmetric, np, self.prune
        )
        factors = (jac, None)
        if self.prune:
            # The corrector stays within one step of this point: prompts this far below the best
            # logit cannot gain mass there, so its evaluations read only the other rows.
            logits = self.log_t[: self.num_prompts] + z[-1] * values[0]
            rows = np.flatnonzero(logits >= logits.max() - _CHORD_LOGIT)
            if len(rows) <= 0.8 * self.num_prompts:
                m = len(self.log_targets[1])
                log_t = np.concatenate([self.log_t[: self.num_prompts][rows], self.log_t[self.num_prompts :]])
                factors = (jac, (rows, self.u[rows], self.a[rows], log_t, np.asarray(values[0]).copy()))
                assert log_t.shape[0] == len(rows) + 2 * m
        return Evaluation(residual, corr, tang, tuple(values), factors, tuple(xs))

    def chord(self, z, factors):
        if self.backend == "jax":
            out = _koth_chord_jit(jnp.asarray(z), jnp.asarray(factors), self.u, self.a, self.log_t)
            out = jax.tree_util.tree_map(np.asarray, out)
            residual, corr, xs, values = out
            return Evaluation(residual, corr, None, tuple(values), factors, tuple(xs))
        jac, subset = factors
        if subset is None:
            residual, corr, xs, values = _koth_chord_impl(z, jac, self.u, self.a, self.log_t, np, self.prune)
            return Evaluation(residual, corr, None, tuple(values), factors, tuple(xs))
        rows, u, a, log_t, vp_stale = subset
        residual, corr, (xp, xk, xr), (vp, vk, vr) = _koth_chord_impl(z, jac, u, a, log_t, np, True)
        xp_full = np.zeros(self.num_prompts)
        xp_full[rows] = xp
        vp_full = vp_stale.copy()  # rows outside the subset keep their values from the factorisation
        vp_full[rows] = vp
        return Evaluation(residual, corr, None, (vp_full, vk, vr), factors, (xp_full, xk, xr))


def is_antisymmetric(u: np.ndarray) -> bool:
    return bool(np.array_equal(u, -np.swapaxes(u, 1, 2)))


def logit_system(game, log_targets: Sequence[np.ndarray], backend: str = "numpy") -> LogitSystem:
    if isinstance(game, KothGame):
        return KothLogitSystem(game, log_targets, backend)
    return DenseLogitSystem(game, log_targets)
