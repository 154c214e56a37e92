"""Batched maximum relative entropy CCEs of many king-of-the-hill games (bootstrap replicates).

Every replicate is the dual of App. A (`solvers.cce.dual`), minimised by the same projected,
Levenberg-Marquardt damped Newton method with an Armijo line search, written as one `jax.lax`
loop and `jax.vmap`-ed over replicates, under one `jax.jit`. The replicates either share one tensor
u_king (P, M, M) and differ in their targets (the "prompts" bootstrap: a prompt absent from a
replicate has target mass 0, so its joint entries are exactly 0 and it offers no deviation) or have
one tensor each (B, P, M, M). On a GPU the same code runs unchanged.

The working sets of prompt deviations (capacity `capacity`, padded) are grown on the host between
calls, as in `cce._solve_koth`. The maximum relative entropy CCE is unique (strictly concave primal),
so any start gives the same CCE: replicates start from the multipliers of a reference solve (the
full data), which saves Newton steps and changes nothing else. A replicate that this path cannot
take (its CCE lies on a face: `_cce_dual.koth_face`; or it needs more working deviations) or that
runs out of steps is flagged `ok = False`, and the caller solves it with `cce.cce`. As in `cce.cce`, the
violated deviations join the working set once the inner solve reaches 1% of the largest gap among them
(not `tol`, which rounding can keep out of reach on an inner problem that is not the final one). A
replicate whose line search finds no decrease, or whose accepted steps leave it where it was, has
reached rounding level: that ends its solve, and it is ok when no deviation outside its working set is
violated (where that happens before the residual
reaches `tol` depends on the machine's rounding, so the flag must not hang on it; the caller still
re-solves any replicate above the exploitability guarantee).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from eqarena.solvers._precision import float64
from eqarena.solvers.cce import dual

_ARMIJO = dual._ARMIJO
_MAX_HALVINGS = dual._MAX_HALVINGS
_THETA0, _THETA_MIN, _THETA_MAX = dual._THETA0, dual._THETA_MIN, dual._THETA_MAX
_CAPACITY = 64  # working prompt deviations per replicate
_CHUNK = 6  # Newton steps per call; the host then compacts the batch to the unfinished replicates
_MAX_STEPS = 500
_ROUND_TOL = 1e-2  # as cce._ROUND_TOL


@dataclass(frozen=True)
class BatchedCce:
    """King ratings (B, M), exploitability (B,) (`cce.joint_exploitability`), multipliers of the
    king and rebel deviations (B, M) each and of every prompt (B, P) (0 outside the working set),
    Newton steps (B,), and `ok` (B,): False where the caller must solve with `cce.cce`."""

    ratings: np.ndarray
    exploitability: np.ndarray
    alpha_prompt: np.ndarray
    alpha_king: np.ndarray
    alpha_rebel: np.ndarray
    steps: np.ndarray
    ok: np.ndarray


@float64
def batched_cce(
    u, log_targets, *, warm=None, tol: float = 1e-9, capacity: int = _CAPACITY, max_steps: int = _MAX_STEPS
) -> BatchedCce:
    """Maximum relative entropy CCEs of B games (App. A) from their log-targets.

    u: (P, M, M) shared by all replicates, or (B, P, M, M). log_targets: (log t_prompt (B, P),
    log t_king (B, M), log t_rebel (B, M)); -inf marks an action outside the game (a prompt absent
    from a replicate). warm: optional (alpha_prompt (P,), alpha_king (M,), alpha_rebel (M,)), the
    multipliers of a reference solve, indexed like u's prompts.
    """
    u = np.asarray(u, dtype=np.float64)
    shared = u.ndim == 3
    log_tp, log_tk, log_tr = (np.asarray(v, dtype=np.float64) for v in log_targets)
    b, p = log_tp.shape
    m = u.shape[-1]
    state = _Replicates(u, shared, log_tp, capacity, warm, tol)
    z = state.z0()
    theta = np.full(b, _THETA0)
    steps = np.zeros(b, dtype=np.int64)
    ratings, expl = np.zeros((b, m)), np.full(b, np.inf)
    converged = np.zeros(b, dtype=bool)
    active = np.flatnonzero(state.ok)
    while len(active):
        size = _bucket(len(active))
        pick = np.concatenate([active, np.full(size - len(active), active[0])])
        out = _newton_chunk(
            jnp.asarray(u if shared else u[pick]),
            jnp.asarray(log_tp[pick]),
            jnp.asarray(log_tk[pick]),
            jnp.asarray(log_tr[pick]),
            jnp.asarray(state.work[pick]),
            jnp.asarray(state.valid[pick]),
            jnp.asarray(z[pick]),
            jnp.asarray(state.mask[pick]),
            jnp.asarray(theta[pick]),
            tol=tol,
            chunk=_CHUNK,
            shared=shared,
        )
        z_o, res, n, stalled, theta_o, gp, rk, ex = (np.asarray(o)[: len(active)] for o in out)
        # A chunk of accepted steps that left z exactly where it was has reached rounding level too.
        stalled = stalled | (np.all(z_o == z[active], axis=1) & (n > 0))
        z[active], theta[active], steps[active] = z_o, theta_o, steps[active] + n
        ratings[active], expl[active] = rk, ex
        still = []
        for k, r in enumerate(active):
            outside = state.largest_outside_gap(r, gp[k])
            if stalled[k] and outside <= tol:  # rounding level reached: the end of the solve, as in `cce.cce`
                converged[r] = state.ok[r]
                continue
            if steps[r] >= max_steps:
                continue
            # As a round of `cce.cce` that adds prompts, the inner solve need only reach a fraction of the
            # largest gap outside the working set before those deviations join it.
            if res[k] > max(tol, _ROUND_TOL * outside) and not stalled[k]:
                still.append(r)
            elif state.grow(r, gp[k], z[r]):
                theta[r] = _THETA0
                still.append(r)
            else:
                converged[r] = state.ok[r]
        active = np.asarray(still, dtype=np.int64)
    return BatchedCce(
        ratings,
        expl,
        state.prompt_multipliers(z, p),
        z[:, capacity : capacity + m],
        z[:, capacity + m :],
        steps,
        converged & np.isfinite(expl),
    )


def _bucket(n: int) -> int:
    """Batch sizes are powers of two (at least 4): few compilations."""
    return max(4, 1 << (n - 1).bit_length())


class _Replicates:
    """Host-side state: each replicate's candidate prompt deviations (distinct |u| rows of its
    prompts), working set (indices into u's prompts, padded to `capacity`) and multiplier mask."""

    def __init__(self, u, shared, log_tp, capacity, warm, tol):
        b, p = log_tp.shape
        m = u.shape[-1]
        self.capacity, self.tol, self.m = capacity, tol, m
        present = np.isfinite(log_tp)
        self.ok = np.ones(b, dtype=bool)
        self.candidates = []
        if shared:
            _, first, group = np.unique(np.abs(u).reshape(p, -1), axis=0, return_index=True, return_inverse=True)
            group = group.reshape(-1)
        for r in range(b):
            if not shared:
                _, first, group = np.unique(np.abs(u[r]).reshape(p, -1), axis=0, return_index=True, return_inverse=True)
                group = group.reshape(-1)
            rows = np.flatnonzero(present[r])
            # the first present prompt of each |u| group present: one multiplier per distinct row
            _, keep = np.unique(group[rows], return_index=True)
            self.candidates.append(np.sort(rows[keep]))
            ur = u[rows] if shared else u[r][rows]
            support, forcing = dual.koth_face(ur, np.ones(ur.shape, dtype=bool))
            if not support.all() or any(f.any() for f in forcing):
                self.ok[r] = False  # a CCE on a face: `cce.cce` reduces the support first
        self.group = group if shared else None
        self.work = np.zeros((b, capacity), dtype=np.int64)
        self.valid = np.zeros((b, capacity), dtype=bool)
        self.count = np.zeros(b, dtype=np.int64)
        self.mask = np.zeros((b, capacity + 2 * m), dtype=bool)
        self.mask[:, capacity:] = True
        self.warm = warm
        self._alpha0 = np.zeros((b, capacity))
        if warm is not None:
            alpha = np.asarray(warm[0], dtype=np.float64)
            for r in range(b):
                if not self.ok[r]:
                    continue
                cand = self.candidates[r]
                # Warm working set: the candidates whose prompt (or an identical |u| row) carried a
                # multiplier in the reference solve.
                held = alpha[cand]
                order = np.argsort(-held, kind="stable")
                start = cand[order][held[order] > 0][:capacity]
                self._set(r, start, held[order][held[order] > 0][:capacity])

    def _set(self, r, prompts, alpha):
        n = len(prompts)
        self.work[r, :n], self.valid[r, :n], self.count[r] = prompts, True, n
        self.mask[r, :n] = True
        self._alpha0[r, :n] = alpha

    def z0(self):
        b = len(self.work)
        m = self.m
        z = np.zeros((b, self.capacity + 2 * m))
        z[:, : self.capacity] = self._alpha0
        if self.warm is not None:
            z[:, self.capacity : self.capacity + m] = np.asarray(self.warm[1])
            z[:, self.capacity + m :] = np.asarray(self.warm[2])
        return z

    def largest_outside_gap(self, r, gaps) -> float:
        """The largest gap of replicate r's candidate deviations outside its working set (0 if none)."""
        cand = self.candidates[r]
        outside = gaps[cand][~np.isin(cand, self.work[r, : self.count[r]])]
        return float(np.max(outside, initial=0.0))

    def grow(self, r, gaps, z) -> bool:
        """Add replicate r's violated candidate deviations to its working set (dropping idle ones
        to make room). False when there are none; marks r not ok when they do not fit."""
        cand = self.candidates[r]
        n = self.count[r]
        in_work = np.isin(cand, self.work[r, :n])
        violated = cand[(gaps[cand] > self.tol) & ~in_work]
        if len(violated) == 0:
            return False
        violated = violated[np.argsort(-gaps[violated], kind="stable")]
        work, alpha = self.work[r, :n], z[:n]
        if self.capacity - n < min(len(violated), self.capacity // 2):  # make room: drop idle deviations
            keep = alpha > 0
            work, alpha = work[keep], alpha[keep]
        room = self.capacity - len(work)
        if room == 0:
            self.ok[r] = False
            return False
        violated = violated[:room]
        prompts = np.concatenate([work, violated])
        z[: self.capacity] = 0.0
        z[: len(prompts)] = np.concatenate([alpha, np.zeros(len(violated))])
        self.work[r], self.valid[r], self.mask[r, : self.capacity] = 0, False, False
        self._set(r, prompts, z[: len(prompts)])
        return True

    def prompt_multipliers(self, z, p) -> np.ndarray:
        b = len(self.work)
        out = np.zeros((b, p))
        for r in range(b):
            n = self.count[r]
            out[r, self.work[r, :n]] = z[r, :n]
        return out


# ----------------------------------------------------------------------------------------------
# One replicate's projected Newton (as `_cce_dual.projected_newton`), for vmap.


def _replicate_newton(u, log_tp, log_tk, log_tr, work, valid, z, mask, theta, *, tol, chunk):
    g = dual._koth_arrays(u, jnp.float64)
    dev = jnp.abs(u)[work] * valid[:, None, None]

    def value_joint(z):
        return dual.koth_value_joint(g, log_tp, log_tk, log_tr, dev, z)

    def gradient(x):
        return jnp.where(mask, -dual.koth_working_gaps(g, dev, x), 0.0)

    def residual(z, grad):
        return jnp.max(jnp.abs(jnp.where(mask, z - jnp.maximum(z - grad, 0.0), 0.0)))

    z = jnp.where(mask, jnp.maximum(z, 0.0), 0.0)
    value, x = value_joint(z)
    grad = gradient(x)
    res = residual(z, grad)

    def cond(s):
        z, value, x, grad, res, theta, steps, stalled = s
        return (res > tol) & ~stalled & (steps < chunk)

    def body(s):
        z, value, x, grad, res, theta, steps, stalled = s
        eps = jnp.minimum(1e-3, res)
        free = mask & ~((z <= eps) & (grad > 0.0))
        h = dual.koth_hessian(g, dev, x, -grad)
        both = free[:, None] & free[None, :]
        h = jnp.where(both, h, 0.0)
        scale = jnp.maximum(jnp.max(jnp.where(free, jnp.diag(h), 0.0)), 1e-300)
        rhs = jnp.where(free, -grad, 0.0)

        def solve(mu):
            a = h + jnp.diag(jnp.where(free, mu, 1.0))
            c = jnp.linalg.cholesky(a)
            d = jax.scipy.linalg.cho_solve((c, True), rhs)
            return d

        def not_done(t):
            mu, d, k = t
            return ~jnp.all(jnp.isfinite(d)) & (k < 40)

        mu0 = (theta * jnp.minimum(res, 1.0) + 1e-16) * scale
        mu, d, _ = lax.while_loop(not_done, lambda t: (t[0] * 10.0, solve(t[0] * 10.0), t[2] + 1), (mu0, solve(mu0), 0))
        d = jnp.where(jnp.all(jnp.isfinite(d)), d, rhs / scale)
        direction = jnp.where(free, d, jnp.where(mask, -z, 0.0))

        def trial(step):
            z_new = jnp.where(mask, jnp.maximum(z + step * direction, 0.0), 0.0)
            v_new, x_new = value_joint(z_new)
            good = v_new <= value + _ARMIJO * jnp.dot(grad, z_new - z) + 1e-15 * jnp.abs(value)
            return z_new, v_new, x_new, good

        def search_cond(t):
            step, k, z_new, v_new, x_new, good = t
            return ~good & (k < _MAX_HALVINGS)

        def search_body(t):
            step = t[0] * 0.5
            return (step, t[1] + 1, *trial(step))

        step, _, z_new, v_new, x_new, accepted = lax.while_loop(search_cond, search_body, (1.0, 0, *trial(1.0)))
        # trust-region rule for the damping (`_cce_dual._update_damping`)
        move = z_new - z
        fm = jnp.where(free, move, 0.0)
        predicted = -jnp.dot(grad, move) - 0.5 * fm @ h @ fm
        ratio = jnp.where(predicted > 0, (value - v_new) / jnp.where(predicted > 0, predicted, 1.0), 0.0)
        theta_new = jnp.where(
            (step == 1.0) & (ratio > 0.5),
            jnp.maximum(theta / 8.0, _THETA_MIN),
            jnp.where((step < 1.0) | (ratio < 0.25), jnp.minimum(theta * 4.0, _THETA_MAX), theta),
        )
        grad_new = gradient(x_new)
        res_new = residual(z_new, grad_new)
        keep = lambda new, old: jnp.where(accepted, new, old)  # noqa: E731
        return (
            keep(z_new, z),
            keep(v_new, value),
            keep(x_new, x),
            keep(grad_new, grad),
            keep(res_new, res),
            keep(theta_new, jnp.minimum(theta * 16.0, _THETA_MAX)),
            steps + accepted.astype(jnp.int32),
            ~accepted,
        )

    z, value, x, grad, res, theta, steps, stalled = lax.while_loop(
        cond, body, (z, value, x, grad, res, theta, jnp.int32(0), jnp.bool_(False))
    )
    # Every prompt's gap (for the working set) and the ratings (eq. 1) at the joint.
    a, current = dual._current_payoffs(g, x)
    p = u.shape[0]
    gp = a.reshape(p, -1) @ jnp.sum(x, 0).reshape(-1) - current[0]
    gk, gr = dual._king_rebel_gaps(g, x, current)
    present = jnp.isfinite(log_tp)
    gp_max = jnp.max(jnp.where(present, gp, -jnp.inf))
    expl = sum(jnp.maximum(0.0, v) for v in (gp_max, jnp.max(gk), jnp.max(gr)))
    return z, res, steps, stalled, theta, gp, gk, expl


@functools.partial(jax.jit, static_argnames=("tol", "chunk", "shared"))
def _newton_chunk(u, log_tp, log_tk, log_tr, work, valid, z, mask, theta, *, tol, chunk, shared):
    run = functools.partial(_replicate_newton, tol=tol, chunk=chunk)
    return jax.vmap(run, in_axes=(None if shared else 0,) + (0,) * 8)(
        u, log_tp, log_tk, log_tr, work, valid, z, mask, theta
    )
