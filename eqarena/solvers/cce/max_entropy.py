"""Maximum relative entropy coarse correlated equilibrium (paper Section 3.2, eq. (4), App. A).

`cce(game, target)` returns the CCE x closest to the target joint t = prod_i t_i in relative
entropy, i.e. argmax_x -KL(x || t) subject to x being a CCE. With `target="affinity"` each t_i is
the maximiser of the affinity entropy (Section 3.3), which makes the selection clone-invariant;
with `target="uniform"` it is the maximum Shannon entropy CCE.

Ratings (paper eq. (1)): for the joint x, action a'_i of player i is rated by its CCE deviation gain
g_i(a'_i) = sum_a x(a) [u_i(a'_i, a_-i) - u_i(a)] = u_i(a'_i, x_-i) - u_i(x), where x_-i is the joint's
marginal over the other players. At a CCE every g_i(a'_i) <= 0.

Exploitability of a joint: sum_i max(0, max_{a'_i} g_i(a'_i)). For a CCE the largest gain may be
negative (correlation can pay better than any deviation), so each player's term is clipped at 0:
the value is >= 0 and exactly 0 at a CCE, and it measures the total constraint violation. For a
product profile max_a g_i(a) >= 0 always, and it equals `solvers.exploitability`.

Solver (method "dual_newton"): the dual of App. A, minimised over alpha >= 0 by a projected,
Levenberg-Marquardt damped Newton method (`solvers.cce.dual`); for a KothGame only a working set
of prompt deviations carries free multipliers (the king's and rebel's always do), grown until no
prompt's CCE gap exceeds `tol`. Joint entries that a single deviation's constraint forces to 0 are
removed first (exact facial reduction), so that the dual has a finite minimiser. Small games run
in NumPy, large ones through jax.jit.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from eqarena.solvers._precision import float64
from eqarena.solvers._threads import blas_threads
from eqarena.solvers.cce import dual
from eqarena.solvers.games.entropy import affinity_targets
from eqarena.solvers.games.equilibrium import Equilibrium
from eqarena.solvers.games.normal_form import Game, KothGame, NormalFormGame

Target = str | Sequence[np.ndarray]

DEFAULT_TOL = 1e-9
_WORKING_SET = 64
_MIN_MODELS = 8
_ROUND_TOL = 1e-2  # a round that adds prompts stops at this fraction of their largest gap
_NUMPY_MAX = 1 << 21  # joint entries up to which the NumPy backend is used ("auto"; measured)


def joint_marginals(joint: np.ndarray) -> list[np.ndarray]:
    """Marginal of every player of a joint of shape (A_1, ..., A_N): a list of (A_i,) arrays."""
    x = np.asarray(joint, dtype=np.float64)
    axes = range(x.ndim)
    return [x.sum(axis=tuple(j for j in axes if j != i)) for i in axes]


@float64
def joint_deviation_gains(game: Game, joint: np.ndarray) -> list[np.ndarray]:
    """CCE deviation gains g_i(a'_i) = u_i(a'_i, x_-i) - u_i(x) of a joint (paper eq. (1)); (A_i,) each."""
    x = _check_joint(game, joint)
    if isinstance(game, KothGame):
        return _koth_gains(game.u_king, x)
    gains = []
    n = game.num_players
    for i in range(n):
        u = game.payoff(i)
        others = x.sum(axis=i)  # x_-i over the remaining axes, in order
        deviation = np.tensordot(np.moveaxis(u, i, 0), others, axes=n - 1)
        gains.append(deviation - float(np.sum(x * u)))
    return gains


@float64
def joint_exploitability(game: Game, joint: np.ndarray) -> float:
    """sum_i max(0, max_a g_i(a)): total CCE violation of a joint (>= 0, 0 exactly at a CCE)."""
    return float(sum(max(0.0, float(np.max(g))) for g in joint_deviation_gains(game, joint)))


@float64
def cce(
    game: Game,
    target: Target = "affinity",
    *,
    p: float = 1.0,
    kernel_variance: float = 1e-6,
    tol: float = DEFAULT_TOL,
    max_steps: int = 500,
    max_rounds: int = 200,
    backend: str = "auto",
    start: Sequence[np.ndarray] | None = None,
) -> Equilibrium:
    """Maximum relative entropy CCE to t = prod_i t_i, solved in the dual of App. A.

    Args:
      game: a `NormalFormGame` or `KothGame`.
      target: "affinity" (clone-invariant, paper Section 3.3 with `p`, `kernel_variance`),
        "uniform" (maximum Shannon entropy CCE), or one distribution per player.
      tol: stop when every CCE gap is <= tol and every active multiplier's gap is within tol of 0
        (the projected dual gradient's infinity norm).
      max_steps: Newton steps per working-set round; max_rounds: working-set rounds (KothGame).
      backend: "numpy", "jax" (jit-compiled) or "auto" (NumPy for small games, JAX for large).
      start: the dual's multipliers to start from, one (A_i,) array per player: those of a nearby
        game's solve (its `Equilibrium.multipliers`, e.g. the full data's for a bootstrap
        replicate). The CCE is unique and the stopping test the same, so only the steps change.

    Returns an `Equilibrium` with `joint` of shape (A_1, ..., A_N), its `marginals`, `ratings` (the
    deviation gains of eq. (1)), `exploitability` (see module docstring), `steps` (Newton steps),
    `multipliers` (the dual's, one (A_i,) array per player; prompts that share a constraint each
    show its multiplier) and diagnostics: dual value, KL(x || t), max gap, working-set rounds and
    size, active multipliers per player, joint entries forced to 0 and the deviations forcing them
    per player, and whether a `start` was used.
    """
    if not isinstance(game, (NormalFormGame, KothGame)):
        raise TypeError(f"game must be a NormalFormGame or KothGame; got {type(game).__name__}")
    began = time.perf_counter()
    targets = _targets(game, target, p, kernel_variance)
    label = target if isinstance(target, str) else "custom"
    start = _start(game, start)
    # One BLAS thread on small games, where threads only contend (`_threads`).
    with blas_threads(int(np.prod(game.num_actions))):
        solve = _solve_koth if isinstance(game, KothGame) else _solve_dense
        joint, multipliers, steps, diag = solve(game, targets, tol, max_steps, max_rounds, backend, start)
        if start is not None and not diag["converged"]:
            # A start far out in the dual (a nearby game's CCE close to a face: huge multipliers) can
            # stall the line search in rounding; the solve from 0 always works.
            joint, multipliers, retry, diag = solve(game, targets, tol, max_steps, max_rounds, backend, None)
            steps += retry
            diag["start"] = "abandoned: solved from 0"
        elif start is not None:
            diag["start"] = "used"
    gains = joint_deviation_gains(game, joint)
    exploit = float(sum(max(0.0, float(np.max(g))) for g in gains))
    diag["max_gap"] = float(max(np.max(g) for g in gains))
    diag["kl_to_target"] = _relative_entropy(joint, targets)
    if not diag["converged"]:
        diag["message"] = f"stopped before the projected dual gradient reached tol={tol}"
    return Equilibrium(
        marginals=joint_marginals(joint),
        joint=joint,
        ratings=gains,
        exploitability=exploit,
        method="dual_newton",
        target=label,
        steps=steps,
        final_temperature=None,
        seconds=time.perf_counter() - began,
        diagnostics=diag,
        multipliers=multipliers,
    )


# ----------------------------------------------------------------------------------------------


def _targets(game: Game, target: Target, p: float, kernel_variance: float) -> list[np.ndarray]:
    sizes = game.num_actions
    if isinstance(target, str):
        if target == "uniform":
            return [np.full(n, 1.0 / n) for n in sizes]
        if target == "affinity":
            return [np.asarray(t, dtype=np.float64) for t in affinity_targets(game, p, kernel_variance)]
        raise ValueError(f"target must be 'affinity', 'uniform' or one distribution per player; got {target!r}")
    if len(target) != len(sizes):
        raise ValueError(f"target: expected {len(sizes)} distributions (one per player); got {len(target)}")
    out = []
    for i, (t, n) in enumerate(zip(target, sizes)):
        t = np.asarray(t, dtype=np.float64)
        if t.shape != (n,) or np.any(~np.isfinite(t)) or np.any(t < 0) or not t.sum() > 0:
            raise ValueError(f"target[{i}]: expected a non-negative ({n},) array with positive sum")
        out.append(t / t.sum())
    return out


def _start(game: Game, start: Sequence[np.ndarray] | None) -> list[np.ndarray] | None:
    """The `start` multipliers checked: one finite, non-negative (A_i,) array per player."""
    if start is None:
        return None
    sizes = game.num_actions
    if len(start) != len(sizes):
        raise ValueError(f"start: expected {len(sizes)} multiplier arrays (one per player); got {len(start)}")
    out = []
    for i, (a, n) in enumerate(zip(start, sizes)):
        a = np.asarray(a, dtype=np.float64)
        if a.shape != (n,) or np.any(~np.isfinite(a)) or np.any(a < 0):
            raise ValueError(f"start[{i}]: expected a finite, non-negative ({n},) array")
        out.append(a)
    return out


def _log(t: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(t)


def _backend(backend: str, size: int) -> str:
    """ "auto": NumPy for small games and on a CPU (its BLAS matrix products, which dominate the Newton
    steps of large games, run 2-3x faster than XLA's there: a CCE of 805 x 200 took 102 s under JAX,
    63-68 s in NumPy), JAX on an accelerator."""
    if backend == "auto":
        return "numpy" if size <= _NUMPY_MAX or jax.default_backend() == "cpu" else "jax"
    if backend not in ("numpy", "jax"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'jax'; got {backend!r}")
    return backend


def _solve_dense(game: NormalFormGame, targets, tol, max_steps, max_rounds, backend, start):
    """The dense dual in one Newton solve (`max_rounds` is for the working-set rounds of `_solve_koth`)."""
    features = dual.dense_features(game.payoffs)
    log_t = sum(
        np.expand_dims(_log(t), tuple(j for j in range(game.num_players) if j != i)) for i, t in enumerate(targets)
    ).reshape(-1)
    rows, cols = features.shape
    # Exact facial reduction (see `dual.dense_face`): entries forced to 0 leave the target's support.
    support, forcing = dual.dense_face(features, np.isfinite(log_t))
    forced_zeros = int(np.sum(np.isfinite(log_t) & ~support))
    log_t = np.where(support, log_t, -np.inf)
    backend = _backend(backend, features.size)
    if backend == "jax":  # pad joint actions (zero mass) and constraints (held at 0): fewer compilations
        padded = np.zeros((dual.bucket(rows, 64), dual.bucket(cols, 8)))
        padded[:rows, :cols] = features
        features = padded
        log_t = np.concatenate([log_t, np.full(padded.shape[0] - rows, -np.inf)])
    mask = np.arange(features.shape[1]) < cols
    mask[:cols] &= ~forcing  # their constraints hold with equality on the face
    oracle = dual.DenseDual(features, log_t, backend)
    z0 = np.zeros(features.shape[1])
    if start is not None:
        z0[:cols] = np.concatenate(start)
    res = dual.projected_newton(oracle.value_joint, oracle.gaps, oracle.hessian, z0, mask, tol, max_steps)
    joint = np.asarray(res.joint)[:rows].reshape(game.num_actions)
    z = res.z[:cols]
    bounds = np.cumsum((0,) + game.num_actions)
    multipliers = [z[a:b].copy() for a, b in itertools.pairwise(bounds)]
    diag = {
        "dual_value": res.value,
        "residual": res.residual,
        "converged": res.residual <= tol,
        "backend": backend,
        "rounds": 1,
        "working_set": int(cols),
        "forced_zeros": forced_zeros,
        "forcing_deviations": [int(np.sum(forcing[a:b])) for a, b in itertools.pairwise(bounds)],
        "active_multipliers": [int(np.sum(z[a:b] > 0)) for a, b in itertools.pairwise(bounds)],
    }
    return joint, multipliers, res.steps, diag


def _solve_koth(game: KothGame, targets, tol, max_steps, max_rounds, backend, start):
    """Working-set rounds: solve the dual restricted to prompt deviations W (plus all 2M model
    deviations) to tol, then add the prompt deviations whose gap exceeds tol; stop when none does.
    From a `start`, W begins as the prompts with a positive multiplier there, at those values.

    Prompts with identical |u_king(q, ., .)| give identical constraints and share one multiplier.
    Joint entries that the constraints force to 0 are removed first (`dual.koth_face`).
    """
    u = game.u_king
    num_prompts, num_models, _ = u.shape
    rows = dual.distinct_prompt_rows(u)
    reps = rows.representatives
    abs_reps = np.abs(u[reps])
    backend = _backend(backend, u.size)
    logs = [_log(t) for t in targets]
    tp, tk, tr = targets
    in_target = (tp > 0)[:, None, None] & (tk > 0)[None, :, None] & (tr > 0)[None, None, :]
    support, (forcing_p, forcing_k, forcing_r) = dual.koth_face(u, in_target)
    forced_zeros = int(np.sum(in_target & ~support))
    reduced = forced_zeros > 0
    if backend == "jax":
        # Pad prompts and models (u = 0, target mass 0, multipliers held at 0) so that games of
        # similar size share compilations.
        padded, m = dual.bucket(num_prompts, 64), max(num_models, _MIN_MODELS)
        u_work = np.zeros((padded, m, m))
        u_work[:num_prompts, :num_models, :num_models] = u
        abs_reps = np.pad(abs_reps, ((0, 0), (0, m - num_models), (0, m - num_models)))
        logs = [np.pad(v, (0, n - len(v)), constant_values=-np.inf) for v, n in zip(logs, (padded, m, m))]
        g = dual.koth_arrays(u_work, jnp)
        pad_support = np.ones((padded, m, m), dtype=bool)
        pad_support[:num_prompts, :num_models, :num_models] = support
    else:
        m = num_models
        g = dual.koth_arrays(u)
        pad_support = support
    oracle = dual.KothDual(g, logs, backend, pad_support if reduced else None)
    # Deviations whose feature vanishes on the support: constraints that hold with equality.
    mask_k = np.pad(~forcing_k, (0, m - num_models))
    mask_r = np.pad(~forcing_r, (0, m - num_models))
    candidate = ~forcing_p[reps]

    joint = None
    work = np.zeros(0, dtype=np.int64)  # indices into reps
    alpha_w = np.zeros(0)
    alpha_k = np.zeros(m)
    alpha_r = np.zeros(m)
    capacity = _WORKING_SET
    dev_rows = abs_reps.reshape(len(reps), m * m)
    # Prompt-deviation gaps at the dual's z = 0: the target joint t (not formed) or t on the face.
    if reduced:
        x0 = np.where(support, tp[:, None, None] * np.outer(tk, tr)[None], 0.0)
        x0 /= x0.sum()
        y0 = np.zeros((m, m))
        y0[:num_models, :num_models] = x0.sum(0)
        moments = (y0.reshape(-1), float(np.sum(x0 * np.abs(u))))
    else:
        value = float(tp @ (np.abs(u).reshape(num_prompts, -1) @ np.outer(tk, tr).reshape(-1)))
        moments = (np.outer(np.exp(logs[1]), np.exp(logs[2])).reshape(-1), value)

    def load(work, alpha_w, alpha_k, alpha_r, capacity):
        """Give the oracle the working set padded to `capacity`; return the matching z and mask."""
        pad = capacity - len(work)
        oracle.set_working_set(
            abs_reps[np.concatenate([work, np.zeros(pad, dtype=np.int64)])]
            * np.concatenate([np.ones(len(work)), np.zeros(pad)])[:, None, None]
        )
        mask = np.concatenate([np.ones(len(work), dtype=bool), np.zeros(pad, dtype=bool), mask_k, mask_r])
        return np.concatenate([alpha_w, np.zeros(pad), alpha_k, alpha_r]), mask

    if start is not None:  # the start's working set and multipliers; gaps at its joint
        work = np.flatnonzero((start[0][reps] > 0) & candidate)
        alpha_w = start[0][reps[work]]
        alpha_k[:num_models], alpha_r[:num_models] = start[1], start[2]
        while capacity < len(work):
            capacity *= 2
        z0, mask = load(work, alpha_w, alpha_k, alpha_r, capacity)
        moments = oracle.prompt_moments(oracle.value_joint(np.where(mask, z0, 0.0))[1])
    steps = 0
    converged = False
    res = None
    rounds = 0
    for _ in range(max_rounds):
        rounds += 1
        gaps = dev_rows @ moments[0] - moments[1]
        in_work = np.zeros(len(reps), dtype=bool)
        in_work[work] = True
        violated = np.flatnonzero((gaps > tol) & ~in_work & candidate)
        if res is not None and (res.stalled or res.residual <= tol) and len(violated) == 0:
            converged = res.residual <= tol
            break
        if res is not None and res.stalled:
            break
        violated = violated[np.argsort(-gaps[violated], kind="stable")]
        # Make room: drop working deviations whose multiplier is 0 and whose gap is most negative.
        room = capacity - len(work)
        if room < min(len(violated), capacity // 2):
            idle = np.flatnonzero(alpha_w <= 0)
            idle = idle[np.argsort(gaps[work[idle]], kind="stable")]
            drop = idle[: min(len(idle), len(violated) - room)]
            keep = np.setdiff1d(np.arange(len(work)), drop)
            work, alpha_w = work[keep], alpha_w[keep]
            room = capacity - len(work)
            if room < min(len(violated), capacity // 2):
                capacity *= 2
                room = capacity - len(work)
        add = violated[:room]
        work = np.concatenate([work, add])
        alpha_w = np.concatenate([alpha_w, np.zeros(len(add))])

        z0, mask = load(work, alpha_w, alpha_k, alpha_r, capacity)
        # While prompts are being added, a round need not be solved to `tol`: only the last one (nothing
        # to add) is. A looser round stops at a fraction of the largest gap it was opened for.
        round_tol = max(tol, _ROUND_TOL * float(gaps[add].max())) if len(add) else tol
        res = dual.projected_newton(oracle.value_joint, oracle.gaps, oracle.hessian, z0, mask, round_tol, max_steps)
        alpha_w = res.z[: len(work)]
        alpha_k = res.z[capacity : capacity + m]
        alpha_r = res.z[capacity + m :]
        joint = res.joint
        moments = oracle.prompt_moments(joint)
        steps += res.steps
    alpha_prompt = np.zeros(len(reps))
    alpha_prompt[work] = alpha_w
    multipliers = [alpha_prompt[rows.group_of], alpha_k[:num_models].copy(), alpha_r[:num_models].copy()]
    diag = {
        "dual_value": res.value,
        "residual": res.residual,
        "converged": converged,
        "backend": backend,
        "rounds": rounds,
        "working_set": len(work),
        "distinct_prompt_rows": len(reps),
        "forced_zeros": forced_zeros,
        "forcing_deviations": [int(np.sum(f)) for f in (forcing_p, forcing_k, forcing_r)],
        "active_multipliers": [
            int(np.sum(alpha_prompt > 0)),
            int(np.sum(alpha_k > 0)),
            int(np.sum(alpha_r > 0)),
        ],
    }
    return np.asarray(joint)[:num_prompts, :num_models, :num_models], multipliers, steps, diag


def _koth_gains(u: np.ndarray, x: np.ndarray) -> list[np.ndarray]:
    """Deviation gains of a joint in the king-of-the-hill game from u_king alone, O(P M^2)."""
    p, m, _ = u.shape
    a = np.abs(u)
    diag = np.einsum("pkk->pk", x)
    value_king = float(np.sum(x * u))
    value_rebel = -value_king - float(diag.sum())  # u_rebel = -u_king - 1[k = r]
    prompt = a.reshape(p, m * m) @ x.sum(0).reshape(m * m) - float(np.sum(x * a))
    king = np.einsum("pir,pr->i", u, x.sum(1)) - value_king
    x_pk = x.sum(2)
    rebel = -np.einsum("pkj,pk->j", u, x_pk) - x_pk.sum(0) - value_rebel
    return [prompt, king, rebel]


def _relative_entropy(joint: np.ndarray, targets: Sequence[np.ndarray]) -> float:
    x = np.asarray(joint)
    n = x.ndim
    log_t = sum(np.expand_dims(_log(t), tuple(j for j in range(n) if j != i)) for i, t in enumerate(targets))
    support = x > 0
    return float(np.sum(x[support] * (np.log(x[support]) - np.broadcast_to(log_t, x.shape)[support])))


def _check_joint(game: Game, joint: np.ndarray) -> np.ndarray:
    x = np.asarray(joint, dtype=np.float64)
    if x.shape != tuple(game.num_actions):
        raise ValueError(f"joint: expected shape {tuple(game.num_actions)}; got {x.shape}")
    if np.any(~np.isfinite(x)) or np.any(x < 0) or abs(float(x.sum()) - 1.0) > 1e-6:
        raise ValueError("joint: expected a non-negative distribution summing to 1")
    return x
