"""The dual of the maximum relative entropy CCE (paper App. A) and a projected Newton solver for it.

Primal: maximise -KL(x || t) over joints x subject to the CCE constraints
g_{i,a'}(x) = sum_a x(a) [u_i(a', a_-i) - u_i(a)] <= 0 for every player i and deviation a'.
Dual (App. A): with multipliers alpha >= 0 and features f_{i,a'}(a) = u_i(a', a_-i) - u_i(a),

    l(a) = log t(a) - sum_{i,a'} alpha_{i,a'} f_{i,a'}(a),   L(alpha) = logsumexp_a l(a),

minimised over alpha >= 0; the primal is x = softmax(l). grad L = -g(x) (minus the CCE gaps) and
hess L = Cov_x(f), a covariance of features. The paper keeps alpha >= 0 through
alpha = softplus(theta) and takes first-order steps; here alpha >= 0 is kept by projection and the
steps are Levenberg-Marquardt regularised Newton steps on the free coordinates (Bertsekas'
projected Newton, damping adapted by a trust-region rule), so the active constraints are solved
to machine precision in a few steps.

When a single deviation's constraint can only hold with x = 0 on part of the joint (e.g. a prompt
whose |u_king| is largest in every cell), the CCE lies on a face of the simplex and the dual
minimiser is at infinity; `dense_face` / `koth_face` restrict the support to that face first.

Oracles evaluate L, x, g and the Hessian:
- dense games: an explicit feature matrix F of shape (|A|, sum_i A_i);
- king-of-the-hill games: never form F. Logits, gaps and Hessian blocks are contractions of
  u_king (P, M, M) with the joint: O(P M^2) memory, O(P M^3) time. Only a working set W of the
  prompt player's deviations carries free multipliers; the king's and rebel's 2M always do.
The oracle code is written once for NumPy and jax.numpy: small problems run in NumPy (nothing to
compile), large ones through jax.jit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg

from eqarena.solvers._rows import identical_rows

_ARMIJO = 1e-4
_MAX_HALVINGS = 50
# Relative LM damping: initial, bounds. Starting at 1 rather than 0.01 spares the warm-started
# bootstrap replicates (500 x 17) a third of their backtracking (24.7-26.6 ms instead of 27.1-28.9 ms a
# replicate); solves from 0 take as many steps either way.
_THETA0, _THETA_MIN, _THETA_MAX = 1.0, 1e-12, 1e8
_SLOW_STEPS = 3  # steps without halving the residual after which the Hessian is float64 ...
_SLOW_BELOW = 1e-5  # ... once the projected-gradient norm is below this (farther out, slow steps are damping's)
_PRECISE_BELOW = 1e-8  # projected-gradient norm below which the Hessian is computed in float64


def _xp(a):
    """The array namespace of `a`: jax.numpy for JAX arrays and tracers, else NumPy."""
    return jnp if isinstance(a, jax.Array) else np


# ----------------------------------------------------------------------------------------------
# Projected Newton on  min_{z >= 0} L(z)  (coordinates with mask False are held at 0).


class NewtonResult(NamedTuple):
    z: np.ndarray  # dual multipliers
    joint: object  # primal x = softmax(l(z)) (NumPy or JAX array)
    value: float  # L(z)
    steps: int  # Newton steps taken
    residual: float  # infinity norm of the projected gradient at z
    stalled: bool  # the line search found no decrease (rounding level reached)


def projected_newton(
    value_joint: Callable[[np.ndarray], tuple[float, object]],
    gaps: Callable[[object], np.ndarray],
    hessian: Callable[[object, np.ndarray, bool], np.ndarray],
    z0: np.ndarray,
    mask: np.ndarray,
    tol: float,
    max_steps: int,
) -> NewtonResult:
    """Minimise L over z >= 0. `value_joint(z) -> (L, x)`, `gaps(x) -> -grad L`,
    `hessian(x, gaps, precise) -> Cov_x(f)` (float64 if precise, else possibly float32). Stops when
    the projected gradient's infinity norm is <= tol."""
    z = np.where(mask, np.maximum(z0, 0.0), 0.0)
    value, joint = value_joint(z)

    def gradient(joint):
        return np.where(mask, -np.asarray(gaps(joint), dtype=np.float64), 0.0)

    def residual(z, grad):
        return float(np.max(np.abs(np.where(mask, z - np.maximum(z - grad, 0.0), 0.0)), initial=0.0))

    grad = gradient(joint)
    res = residual(z, grad)
    steps = slow = 0
    stalled = precise = False
    best = res
    theta = _THETA0
    while res > tol and steps < max_steps:
        # A float32 Hessian is used far from the solution; float64 once close, after a failed line
        # search or when progress stalls (float32 rounding hides small curvatures).
        precise = precise or res <= _PRECISE_BELOW or (slow >= _SLOW_STEPS and res <= _SLOW_BELOW)
        # Coordinates at (or within eps of) the bound whose gradient pushes them out stay there.
        eps = min(1e-3, res)
        free = np.flatnonzero(mask & ~((z <= eps) & (grad > 0.0)))
        direction = np.where(mask, -z, 0.0)
        direction[free] = 0.0
        h = None
        if len(free):
            h = np.asarray(hessian(joint, -grad, precise), dtype=np.float64)[np.ix_(free, free)]
            direction[free] = _damped_newton_step(h, grad[free], theta * min(res, 1.0))
        step, accepted = 1.0, False
        for _ in range(_MAX_HALVINGS):  # Armijo backtracking on the projected path
            z_new = np.where(mask, np.maximum(z + step * direction, 0.0), 0.0)
            value_new, joint_new = value_joint(z_new)
            if value_new <= value + _ARMIJO * float(grad @ (z_new - z)) + 1e-15 * abs(value):
                accepted = True
                break
            step *= 0.5
        if not accepted:
            theta = min(theta * 16.0, _THETA_MAX)
            if not precise:
                precise = True
                continue
            stalled = True
            break
        theta = _update_damping(theta, step, value - value_new, grad, z_new - z, free, h)
        z, value, joint = z_new, value_new, joint_new
        grad = gradient(joint)
        res = residual(z, grad)
        slow = slow + 1 if res > 0.5 * best else 0
        best = min(best, res)
        steps += 1
    return NewtonResult(z, joint, float(value), steps, res, stalled)


def _update_damping(theta, step, decrease, grad, move, free, h) -> float:
    """Trust-region rule for the relative damping theta: shrink it after a full step that the
    quadratic model predicted well, grow it after a poor prediction or a backtracked step.

    Damping only proportional to the residual would cap each step at O(1 / max diag H): a dual
    minimiser at infinity (a CCE on a face of the simplex) is then approached linearly in the
    multipliers, not geometrically as Newton's steps do.
    """
    predicted = -float(grad @ move)
    if h is not None:
        predicted -= 0.5 * float(move[free] @ h @ move[free])
    ratio = decrease / predicted if predicted > 0 else 0.0
    if step == 1.0 and ratio > 0.5:
        return max(theta / 8.0, _THETA_MIN)
    if step < 1.0 or ratio < 0.25:
        return min(theta * 4.0, _THETA_MAX)
    return theta


def _damped_newton_step(h: np.ndarray, grad: np.ndarray, damping: float) -> np.ndarray:
    """-(H + mu I)^-1 grad with Levenberg-Marquardt damping mu = damping * max diag(H); mu grows if
    H + mu I is not numerically positive definite (the Hessian may carry float32 rounding)."""
    scale = max(float(np.max(np.diag(h))), 1e-300)
    mu = (damping + 1e-16) * scale
    eye = np.eye(len(h))
    for _ in range(40):
        try:
            return scipy.linalg.cho_solve(scipy.linalg.cho_factor(h + mu * eye, lower=True), -grad)
        except np.linalg.LinAlgError:
            mu *= 10.0
    return -grad / scale


# ----------------------------------------------------------------------------------------------
# Dense N-player games: explicit feature matrix.


def dense_features(payoffs: np.ndarray) -> np.ndarray:
    """F[a, (i, a')] = u_i(a', a_-i) - u_i(a), shape (prod A, sum A_i); players' blocks in order."""
    n = payoffs.shape[0]
    blocks = []
    for i in range(n):
        u = payoffs[i]
        moved = np.moveaxis(u, i, -1)  # (A_-i..., A_i): u_i(a', a_-i) with a' last
        dev = np.broadcast_to(np.expand_dims(moved, axis=i), u.shape + (u.shape[i],))
        blocks.append((dev - u[..., None]).reshape(-1, u.shape[i]))
    return np.concatenate(blocks, axis=1)


def dense_value_joint(features, log_target, z):
    return _softmax_and_value(log_target - features @ z)


def dense_gaps(features, x):
    return features.T @ x


def dense_hessian(features, x, gaps):
    xp = _xp(x)
    return features.T @ (x[:, None] * features) - xp.outer(gaps, gaps)


def _softmax_and_value(logits):
    """(logsumexp(l), softmax(l)) with a single exponential pass."""
    xp = _xp(logits)
    top = xp.max(logits)
    e = xp.exp(logits - top)
    total = xp.sum(e)
    return top + xp.log(total), e / total


class DenseDual:
    """Oracle of a dense game's dual; `backend` "numpy" or "jax" (jit-compiled)."""

    def __init__(self, features: np.ndarray, log_target: np.ndarray, backend: str):
        self.jit = backend == "jax"
        xp = jnp if self.jit else np
        self.features = xp.asarray(features)
        self.log_target = xp.asarray(log_target)

    def value_joint(self, z):
        f = _jit_dense_value_joint if self.jit else dense_value_joint
        value, x = f(self.features, self.log_target, self._arr(z))
        return float(value), x

    def gaps(self, x):
        return np.asarray((_jit_dense_gaps if self.jit else dense_gaps)(self.features, x))

    def hessian(self, x, gaps, precise=True):
        f = _jit_dense_hessian if self.jit else dense_hessian
        return np.asarray(f(self.features, x, self._arr(gaps)))

    def _arr(self, v):
        return jnp.asarray(v) if self.jit else v


_jit_dense_value_joint = jax.jit(dense_value_joint)
_jit_dense_gaps = jax.jit(dense_gaps)
_jit_dense_hessian = jax.jit(dense_hessian)


# ----------------------------------------------------------------------------------------------
# King-of-the-hill: structured contractions of u_king.


class KothArrays(NamedTuple):
    """u_king in the layouts the contractions want, each (P, M, M) in some axis order.

    `u`, `u_t` are float64 (logits and gradient, exact). The `h_*` layouts feed the Hessian:
    float32 under JAX, whose O(P M^3) batched products and reductions are several times faster in
    float32 (relative error ~1e-7 only perturbs the Newton direction: the line search and the
    stopping test use float64), and float64 under NumPy.
    """

    u: object  # king payoff u(p, k, r)
    u_t: object  # u_t[p, r, i] = u(p, i, r)
    a: object  # |u|, the prompt player's payoff (NumPy; None under JAX, which fuses |u| into its passes)
    h_u: object  # u
    h_u_t: object  # u_t
    h_ur: object  # rebel payoff u_rebel(p, k, j) = -u(p, k, j) - 1[k = j]
    h_u_rpi: object  # u as (r, p, i)
    h_ur_kpj: object  # u_rebel as (k, p, j)


def koth_arrays(u, xp=np) -> KothArrays:
    """The layouts of `KothArrays` for u_king (P, M, M), as NumPy or (xp=jnp) JAX arrays."""
    if xp is jnp:
        u = jnp.asarray(u)
        return _jit_koth_arrays(u, jnp.float32)
    return _koth_arrays(np.asarray(u, dtype=np.float64), np.float32)


def _hessian_layouts(u, dtype):
    xp = _xp(u)
    u = u.astype(dtype)
    ur = -u - xp.eye(u.shape[1], dtype=dtype)[None]
    return (
        u,
        _contiguous(xp.transpose(u, (0, 2, 1))),
        ur,
        _contiguous(xp.transpose(u, (2, 0, 1))),
        _contiguous(xp.transpose(ur, (1, 0, 2))),
    )


def _koth_arrays(u, dtype) -> KothArrays:
    xp = _xp(u)
    a = np.abs(u) if xp is np else None
    return KothArrays(u, _contiguous(xp.transpose(u, (0, 2, 1))), a, *_hessian_layouts(u, dtype))


def _abs_u(g: KothArrays):
    """|u_king|: stored under NumPy, formed where it is used under JAX."""
    return _xp(g.u).abs(g.u) if g.a is None else g.a


def _contiguous(a):
    """NumPy's matmul only reaches BLAS on contiguous operands; JAX arrays pass through."""
    return a if isinstance(a, jax.Array) else np.ascontiguousarray(a)


_jit_koth_arrays = jax.jit(_koth_arrays, static_argnums=1)


def koth_logits(g: KothArrays, log_tp, log_tk, log_tr, dev_w, alpha_w, alpha_k, alpha_r, log_support=None):
    """l(p, k, r) of App. A for the king-of-the-hill game, shape (P, M, M).

    dev_w (W, M, M): payoffs |u_king(q, ., .)| of the working set's prompt deviations q. With
    u_rebel = -u - 1[k = r]: sum_j alpha_j u_rebel(p, k, j) = -sum_j alpha_j u(p, k, j) - alpha_k.
    log_support (P, M, M), 0 or -inf, restricts the joint to a face (`koth_face`). The terms that
    vary along fewer than three axes are summed first, so that NumPy makes few passes over the joint.
    """
    xp = _xp(g.u)
    p, m, _ = g.u.shape
    king_dev = (g.u_t.reshape(p * m, m) @ alpha_k).reshape(p, 1, m)  # sum_i alpha_i u(p, i, r)
    rebel_sum = (g.u.reshape(p * m, m) @ alpha_r).reshape(p, m, 1)  # sum_j alpha_j u(p, k, j)
    prompt_dev = (alpha_w @ dev_w.reshape(dev_w.shape[0], m * m)).reshape(m, m)
    # logit = log t - (prompt, king and rebel deviation payoffs) + (the payoffs deviated from):
    # per (k, r), per (p, k) and (p, r), and the full-size terms in u and |u|.
    per_kr = (
        log_tk[:, None] + log_tr[None, :] + alpha_r[:, None] - prompt_dev - xp.sum(alpha_r) * xp.eye(m, dtype=g.u.dtype)
    )
    per_pkr = (rebel_sum + log_tp[:, None, None]) - king_dev
    logits = (g.u * (xp.sum(alpha_k) - xp.sum(alpha_r)) + _abs_u(g) * xp.sum(alpha_w)) + per_pkr + per_kr[None]
    if log_support is not None:
        logits = logits + log_support
    return logits


def koth_value_joint(g: KothArrays, log_tp, log_tk, log_tr, dev_w, z, log_support=None):
    """(L(z), x(z)) for z = (alpha_w (W), alpha_king (M), alpha_rebel (M))."""
    w, m = dev_w.shape[0], g.u.shape[1]
    logits = koth_logits(g, log_tp, log_tk, log_tr, dev_w, z[:w], z[w : w + m], z[w + m :], log_support)
    return _softmax_and_value(logits)


def _inner(a, b):
    """sum(a * b) over all axes as one product (a single pass in NumPy)."""
    return a.reshape(-1) @ b.reshape(-1)


def _axis_sums(v):
    """Sums of a (P, M, M) array over each axis: (M, M), (P, M), (P, M). Under NumPy the last two as
    products with ones, which run as BLAS passes (its reductions over short inner axes are ~5x slower);
    XLA reduces in place."""
    xp = _xp(v)
    if xp is not np:
        return xp.sum(v, 0), xp.sum(v, 1), xp.sum(v, 2)
    p, m, _ = v.shape
    ones = np.ones(m, dtype=v.dtype)
    return v.sum(0), np.matmul(ones, v), (v.reshape(p * m, m) @ ones).reshape(p, m)


def _current_payoffs(g: KothArrays, x):
    """u_i(x) for prompt, king, rebel (u_rebel(x) = -u_king(x) - P(k = r))."""
    xp = _xp(x)
    vk = _inner(x, g.u)
    a = _abs_u(g)
    return a, [_inner(x, a), vk, -vk - xp.trace(xp.sum(x, 0))]


def _king_rebel_gaps(g: KothArrays, x, current):
    p, m, _ = g.u.shape
    _, x_pr, x_pk = _axis_sums(x)
    gk = x_pr.reshape(p * m) @ g.u_t.reshape(p * m, m) - current[1]
    gr = -(x_pk.reshape(p * m) @ g.u.reshape(p * m, m)) - _xp(x).sum(x_pk, 0) - current[2]
    return gk, gr


def koth_gaps(g: KothArrays, x):
    """CCE gaps of a joint x (P, M, M): (prompt (P,), king (M,), rebel (M,)); eq. 1 with x_-i from x."""
    xp = _xp(x)
    p, m, _ = g.u.shape
    a, current = _current_payoffs(g, x)
    gp = a.reshape(p, m * m) @ xp.sum(x, 0).reshape(m * m) - current[0]
    gk, gr = _king_rebel_gaps(g, x, current)
    return gp, gk, gr


def koth_working_gaps(g: KothArrays, dev_w, x):
    """Gaps of the working prompt deviations and of all king and rebel deviations, (W + 2M,)."""
    xp = _xp(x)
    m = g.u.shape[1]
    _, current = _current_payoffs(g, x)
    gw = dev_w.reshape(-1, m * m) @ xp.sum(x, 0).reshape(m * m) - current[0]
    gk, gr = _king_rebel_gaps(g, x, current)
    return xp.concatenate([gw, gk, gr])


def koth_prompt_moments(g: KothArrays, x):
    """(y, u_prompt(x)): the joint's (king, rebel) marginal y (M*M,) and the prompt player's payoff.

    A prompt deviation q then has gap |u(q, ., .)| . y - u_prompt(x).
    """
    xp = _xp(x)
    return xp.sum(x, 0).reshape(-1), _inner(x, _abs_u(g))


def koth_hessian(g: KothArrays, dev_w, x, gaps, precise=False):
    """Cov_x(f) over (working prompt deviations, king deviations, rebel deviations).

    f = D - C with D the deviation payoff and C the current payoff of the deviating player, so
    Cov(f_a, f_b) = E[D_a D_b] - E[D_a C_b] - E[C_a D_b] + E[C_a C_b] - gaps_a gaps_b (gaps = E f,
    passed in float64). The current payoffs lie in span{|u|, u, 1[k = r]} (C_prompt = |u|,
    C_king = u, C_rebel = -u - 1[k = r]), so only x, x|u| and xu are reduced. The E[D_a D_b] are
    batched M x M products over prompts: O(P M^3) time, O(P M^2) memory. These use the dtype of the
    `h_*` layouts, or float64 (layouts built on the fly) when `precise`; so do the moments with the
    current payoffs (O(P M^2)) under JAX, which are float64 under NumPy.
    """
    xp = _xp(x)
    p, m, _ = g.u.shape
    w = dev_w.shape[0]
    if precise and g.h_u.dtype != xp.float64:
        dtype = xp.float64
        u, u_t, ur, u_rpi, ur_kpj = _hessian_layouts(g.u, dtype)
    else:
        dtype = g.h_u.dtype
        u, u_t, ur, u_rpi, ur_kpj = g.h_u, g.h_u_t, g.h_ur, g.h_u_rpi, g.h_ur_kpj
    dev = dev_w.reshape(w, m * m)

    # Moments with the current payoffs (O(P M^2)): reductions of x*C over each co-player axis, for
    # C = 1, |u|, u, 1[k=r]: over p -> (k, r) weights of prompt deviations; over k -> (p, r) of king
    # ones; over r -> (p, k) of rebel ones. In float64 under NumPy (a float32 BLAS pass there raised
    # spurious invalid-value warnings); in the layouts' dtype under JAX, where these passes over the
    # joint are memory-bound (805 x 200: float64 took 5 s and 1 GB more per solve).
    if xp is np:
        xm, am, um, utm = x, g.a, g.u, g.u_t
    else:
        xm, am, um, utm = x.astype(dtype), xp.abs(u), u, u_t
    dev = dev.astype(xm.dtype)
    xa = xm * am
    xu = xm * um
    diag_x = xp.diagonal(xm, axis1=1, axis2=2)  # x(p, k, k)
    r_one = _axis_sums(xm)
    r_a = _axis_sums(xa)
    r_u = _axis_sums(xu)
    r_d = (xp.diag(xp.sum(diag_x, 0)), diag_x, diag_x)
    r_rebel = tuple(-ru - rd for ru, rd in zip(r_u, r_d))

    def dev_moments(r):  # E[D_b C] for the three deviation blocks b; u_rebel(p, k, j) = -u(p, k, j) - 1[k = j]
        rebel = -(r[2].reshape(p * m) @ um.reshape(p * m, m)) - xp.sum(r[2], 0)
        return xp.concatenate([dev @ r[0].reshape(m * m), r[1].reshape(p * m) @ utm.reshape(p * m, m), rebel])

    owner = np.concatenate([np.zeros(w, np.int32), np.ones(m, np.int32), np.full(m, 2, np.int32)])
    dc = xp.stack([dev_moments(r_a), dev_moments(r_u), dev_moments(r_rebel)])  # (3, n): E[D_b C_X]
    e_uu = _inner(xu, um)
    e_au = _inner(xa, um)
    e_d = xp.sum(diag_x)
    cc = xp.stack(
        [
            xp.stack([e_uu, e_au, -e_au]),
            xp.stack([e_au, e_uu, -e_uu]),
            xp.stack([-e_au, -e_uu, e_uu + e_d]),
        ]
    )

    # Products of deviation payoffs (O(P M^3)) in the layouts' dtype.
    if x.dtype != dtype:
        x = x.astype(dtype)
    dev = dev.astype(dtype)
    r_one = tuple(r.astype(dtype) for r in r_one)
    u_t_flat = u_t.reshape(p * m, m)  # rows (p, r), columns i: u(p, i, r)
    ur_flat = ur.reshape(p * m, m)  # rows (p, k), columns j: u_rebel(p, k, j)
    y = r_one[0]
    t_king = xp.matmul(_contiguous(xp.transpose(x, (2, 1, 0))), u_rpi)  # (r, k, i): sum_p x(p,k,r) u(p,i,r)
    t_rebel = xp.matmul(_contiguous(xp.transpose(x, (1, 2, 0))), ur_kpj)  # (k, r, j): sum_p x u_r(p,k,j)
    dd_ww = (dev * y.reshape(1, m * m)) @ dev.T
    dd_wk = dev @ xp.transpose(t_king, (1, 0, 2)).reshape(m * m, m)
    dd_wr = dev @ t_rebel.reshape(m * m, m)
    # One (M x PM) @ (PM x M) product each: a single large GEMM runs several times faster than P
    # batched M x M products summed over p (same arithmetic).
    dd_kk = (u_t_flat * r_one[1].reshape(p * m, 1)).T @ u_t_flat
    dd_rr = (ur_flat * r_one[2].reshape(p * m, 1)).T @ ur_flat
    # sum_{p,k,r} x(p,k,r) u(p,i,r) u_r(p,k,j) = sum_{p,k} (X_p U_t,p)(k, i) U_r,p(k, j)
    xu_t = xp.matmul(x, u_t)  # (p, k, i): sum_r x(p,k,r) u(p,i,r)
    dd_kr = xu_t.reshape(p * m, m).T @ ur_flat
    dd = xp.block([[dd_ww, dd_wk, dd_wr], [dd_wk.T, dd_kk, dd_kr], [dd_wr.T, dd_kr.T, dd_rr]])

    d_c = dc[owner, :].T  # [a, b] = E[D_a C_owner(b)]
    second = (dd - d_c - d_c.T + cc[owner][:, owner]).astype(gaps.dtype)
    return second - xp.outer(gaps, gaps)


_jit_koth_value_joint = jax.jit(koth_value_joint)
_jit_koth_working_gaps = jax.jit(koth_working_gaps)
_jit_koth_hessian = jax.jit(koth_hessian, static_argnames=("precise",))
_jit_koth_prompt_moments = jax.jit(koth_prompt_moments)


class KothDual:
    """Oracle of the king-of-the-hill dual for a fixed prompt working set `dev_w` (W, M, M).

    Coordinates z = (alpha_w (W), alpha_king (M), alpha_rebel (M)). `backend` "numpy" or "jax";
    `support` (P, M, M) bool, if given, restricts the joint to a face (`koth_face`).
    """

    def __init__(self, g: KothArrays, log_targets, backend: str, support: np.ndarray | None = None):
        self.jit = backend == "jax"
        xp = jnp if self.jit else np
        self.g = g
        self.log_tp, self.log_tk, self.log_tr = (xp.asarray(v) for v in log_targets)
        self.log_support = None if support is None else xp.asarray(np.where(support, 0.0, -np.inf))
        self.dev_w = None
        self._precise_g: KothArrays | None = None

    def set_working_set(self, dev_w: np.ndarray) -> None:
        self.dev_w = jnp.asarray(dev_w) if self.jit else dev_w

    def value_joint(self, z):
        f = _jit_koth_value_joint if self.jit else koth_value_joint
        logs = (self.log_tp, self.log_tk, self.log_tr)
        value, x = f(self.g, *logs, self.dev_w, self._arr(z), self.log_support)
        return float(value), x

    def gaps(self, x):
        return np.asarray((_jit_koth_working_gaps if self.jit else koth_working_gaps)(self.g, self.dev_w, x))

    def hessian(self, x, gaps, precise=False):
        if self.jit:
            return np.asarray(_jit_koth_hessian(self.g, self.dev_w, x, jnp.asarray(gaps), precise=precise))
        if precise and self.g.h_u.dtype != np.float64:  # float64 layouts, built once, when first needed
            if self._precise_g is None:
                self._precise_g = _koth_arrays(self.g.u, np.float64)
            return koth_hessian(self._precise_g, self.dev_w, x, gaps)
        return koth_hessian(self.g, self.dev_w, x, gaps)

    def prompt_moments(self, x) -> tuple[np.ndarray, float]:
        y, value = (_jit_koth_prompt_moments if self.jit else koth_prompt_moments)(self.g, x)
        return np.asarray(y), float(value)

    def _arr(self, v):
        return jnp.asarray(v) if self.jit else v


# ----------------------------------------------------------------------------------------------
# Facial reduction: deviations that force joint entries to zero.
#
# If a deviation's feature f is >= 0 on the whole support of the joint, its constraint
# E_x f <= 0 forces x = 0 wherever f > 0 (and then holds with equality). The maximum entropy CCE
# then lies on a face of the simplex and the dual infimum of App. A is not attained: the
# deviation's multiplier diverges and Newton's method only approaches x at the rate at which
# exp(-alpha f) vanishes on the smallest positive f (slowly when near-duplicate prompts make f
# tiny). Restricting the support to the face first is exact and leaves a dual with a finite
# minimiser. Comparisons are exact: x - y >= 0 iff x >= y in floating point. An empty face means
# that no CCE lies in the target's support; the support is then left as it was.


def dense_face(features: np.ndarray, support: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(support, forcing): the reduced support (|A|,) and the deviations whose feature vanishes on it."""
    initial = support
    while True:
        forcing = np.all((features >= 0) | ~support[:, None], axis=0)
        reduced = support & np.all((features == 0) | ~forcing[None, :], axis=1)
        if not reduced.any():
            return initial, np.zeros(features.shape[1], dtype=bool)
        if np.array_equal(reduced, support):
            return support, forcing
        support = reduced


def koth_face(u: np.ndarray, support: np.ndarray) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """`dense_face` for the king-of-the-hill game from u_king (P, M, M) alone, O(P M^2) per pass.

    Deviation payoffs are compared with the best payoff the deviating player gets on the support
    in each cell of its co-players' actions: prompt q forces the face if |u(q, k, r)| >= |u(p, k, r)|
    for all supported (p, k, r); king i if u(p, i, r) >= u(p, k, r); rebel j likewise on u_rebel.
    Returns the reduced support (P, M, M) and (prompt (P,), king (M,), rebel (M,)) masks of the
    deviations whose feature vanishes on it.
    """
    m = u.shape[1]
    payoffs = (np.abs(u), u, -u - np.eye(m)[None])  # prompt, king, rebel (own action on axis 0, 1, 2)
    initial = support
    while True:
        reduced = support.copy()
        forcing = []
        full = bool(support.all())
        for axis, v in enumerate(payoffs):
            others = tuple(j for j in range(3) if j != axis)
            if full:
                best = np.max(v, axis=axis, keepdims=True)
                dominates = np.all(v >= best, axis=others)  # deviation a' of this player
            else:
                best = np.max(np.where(support, v, -np.inf), axis=axis, keepdims=True)
                cells = np.any(support, axis=axis, keepdims=True)
                dominates = np.all((v >= best) | ~cells, axis=others)
            forcing.append(dominates)
            if dominates.any():
                chosen = np.compress(dominates, v, axis=axis)
                exceeded = np.any(chosen > best, axis=axis, keepdims=True)
                reduced &= (v == best) & ~exceeded
        if not reduced.any():
            return initial, tuple(np.zeros(n, dtype=bool) for n in u.shape)
        if np.array_equal(reduced, support):
            return support, tuple(forcing)
        support = reduced


@dataclass(frozen=True)
class PromptRows:
    """De-duplicated prompt deviations: identical |u_king(q, ., .)| rows give identical constraints."""

    representatives: np.ndarray  # (Q,) prompt index of each distinct row, in order of first occurrence
    group_of: np.ndarray  # (P,) distinct-row index of each prompt


def distinct_prompt_rows(u_king: np.ndarray) -> PromptRows:
    first, labels = identical_rows(np.abs(u_king).reshape(u_king.shape[0], -1))
    return PromptRows(first, labels)


def bucket(n: int, quantum: int) -> int:
    """n rounded up to a multiple of `quantum` (of 8 quanta beyond 16 quanta): fewer recompilations."""
    step = quantum if n <= 16 * quantum else 8 * quantum
    return step * -(-n // step)
