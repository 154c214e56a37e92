"""Nash equilibrium ratings: the limiting logit equilibrium selected from a target (paper Section 3.2-3.3).

The logit-QRE branch x_i ∝ t_i exp(lambda * u_i(., x_-i)) starts at the target t (lambda = 0) and its
end (lambda -> infinity) is the limiting logit equilibrium (LLE). With the uniform target this is the
classic LLE (McKelvey & Palfrey; the "Shannon" variant); with the max-affinity-entropy target
(`solvers.entropy.affinity_target`) it is invariant to cloned actions (paper Section 3.3).

method="branch" follows the branch by pseudo-arclength continuation in log-probabilities and
finishes with a Newton polish on the support read off the branch. method="anneal" is the paper's
annealed QRE loss with Adam (Section 3.2, App. F), kept to reproduce it.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Literal, Sequence, Union

import numpy as np
from threadpoolctl import threadpool_limits

from solvers._anneal import AnnealOptions, anneal
from solvers._continuation import ContinuationOptions, trace_branch
from solvers._logit import logit_system
from solvers._polish import branch_supports, polish, values_function
from solvers.entropy import DEFAULT_KERNEL_VARIANCE, DEFAULT_P, affinity_targets
from solvers.equilibrium import Equilibrium
from solvers.games import Game, KothGame, NormalFormGame

Target = Union[Literal["affinity", "uniform"], Sequence[np.ndarray]]

_SUPPORT_GAPS = (8.0, 16.0, 32.0)
# A polished point farther than this (L1 over players) from the branch is never taken for its end.
_MAX_POLISH_DISTANCE = 0.1
# Each retrace (after a trace that left the branch or stalled) tightens the step control this much.
_RETRACE_DISTANCE_FACTOR = 0.25
_RETRACE_CONTRACTION_FACTOR = 0.6


def nash(
    game: Game,
    target: Target = "affinity",
    method: Literal["branch", "anneal"] = "branch",
    *,
    p: float = DEFAULT_P,
    kernel_variance: float = DEFAULT_KERNEL_VARIANCE,
    tol: float = 1e-6,
    polish_from: float = 1e-3,
    backend: Literal["numpy", "jax"] = "numpy",
    retraces: int = 2,
    **options,
) -> Equilibrium:
    """The limiting logit equilibrium of `game` selected from `target`, with its ratings (eq. 1).

    target: "affinity" (t_i = argmax H_a^p, clone-invariant), "uniform" (classic LLE), or one
    probability vector per player. method="branch" (default): continuation to exploitability <= `tol`
    (a Newton polish on the branch's support is tried once the branch is `polish_from`-exact);
    a trace that jumps off the branch (lambda < 0) or stalls above `tol` is retraced from the
    start with tighter step control, up to `retraces` times; extra options are fields of
    `ContinuationOptions`. method="anneal": the paper's schedule; extra
    options are fields of `AnnealOptions` (e.g. max_steps). backend: where the king-of-the-hill
    continuation runs its memory-bound contractions ("numpy": BLAS, no compilation; "jax": jitted).
    Returns an Equilibrium with marginals (one (A_i,) array per player), joint None, ratings =
    deviation gains u_i(a, x_-i) - u_i(x), exploitability = sum_i max_a ratings_i[a].
    """
    if not isinstance(game, (NormalFormGame, KothGame)):
        raise TypeError(f"game must be a NormalFormGame or KothGame; got {type(game).__name__}")
    start = time.perf_counter()
    # The solver's matrix-vector passes are memory-bound: one BLAS thread is as fast, and avoids
    # OpenBLAS's thread spinning when the machine is busy.
    with threadpool_limits(limits=1, user_api="blas"):
        return _nash(game, target, method, p, kernel_variance, tol, polish_from, backend, retraces, options, start)


def _nash(game, target, method, p, kernel_variance, tol, polish_from, backend, retraces, options, start):
    targets, target_name = _resolve_targets(game, target, p, kernel_variance)
    if method == "branch":
        continuation = _options(ContinuationOptions, options)
        xs, info = _branch_with_retraces(game, targets, tol, polish_from, backend, continuation, retraces)
        temperature = info.pop("temperature")
        steps = info["steps"]
    elif method == "anneal":
        xs, info = anneal(game, targets, _options(AnnealOptions, options))
        temperature = info.pop("temperature")
        steps = info["steps"]
    else:
        raise ValueError(f"method must be 'branch' or 'anneal'; got {method!r}")
    ratings = _ratings(values_function(game), xs)
    expl = float(sum(max(0.0, r.max()) for r in ratings))  # each max >= 0 up to rounding
    return Equilibrium(
        marginals=[np.asarray(x) for x in xs],
        joint=None,
        ratings=ratings,
        exploitability=expl,
        method=method,
        target=target_name,
        steps=int(steps),
        final_temperature=temperature,
        seconds=time.perf_counter() - start,
        diagnostics=info,
    )


def _resolve_targets(game: Game, target: Target, p: float, kernel_variance: float):
    if isinstance(target, str):
        if target == "affinity":
            return affinity_targets(game, p=p, kernel_variance=kernel_variance), "affinity"
        if target == "uniform":
            return [np.full(n, 1.0 / n) for n in game.num_actions], "uniform"
        raise ValueError(f"target must be 'affinity', 'uniform' or one distribution per player; got {target!r}")
    targets = [np.asarray(t, dtype=np.float64) for t in target]
    if len(targets) != game.num_players:
        raise ValueError(f"target: expected {game.num_players} distributions, got {len(targets)}")
    for i, (t, n) in enumerate(zip(targets, game.num_actions)):
        if t.shape != (n,) or np.any(t <= 0) or not np.isclose(t.sum(), 1.0):
            raise ValueError(f"target[{i}] must be a strictly positive distribution of shape ({n},)")
    return [t / t.sum() for t in targets], "custom"


def _options(cls, options: dict):
    names = {f.name for f in fields(cls)}
    unknown = set(options) - names
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; expected some of {sorted(names)}")
    return cls(**options)


def _ratings(values_fn, xs) -> list[np.ndarray]:
    """Deviation gains u_i(a, x_-i) - u_i(x) (paper eq. 1)."""
    return [v - v @ x for v, x in zip(values_fn(xs), xs)]


def _candidate_supports(values, lam: float):
    """Supports to try: split each player's lambda-scaled value gaps at their widest jump, then fixed cuts."""
    scores = [lam * (np.max(v) - v) for v in values]
    widest = []
    for s in scores:
        ordered = np.sort(s[s <= 4.0 * _SUPPORT_GAPS[-1]])
        if len(ordered) < 2:
            widest.append(np.flatnonzero(s <= 0.0))
            continue
        jumps = np.diff(ordered)
        k = int(np.argmax(jumps))
        widest.append(np.flatnonzero(s <= ordered[k]))
    yield widest
    for gap in _SUPPORT_GAPS:
        yield branch_supports(values, lam, gap)


def _same(xs, ys, atol: float = 1e-9) -> bool:
    return all(np.allclose(x, y, atol=atol, rtol=0.0) for x, y in zip(xs, ys))


def _branch_with_retraces(game, targets, tol, polish_from, backend, options: ContinuationOptions, retraces: int):
    """Trace the branch; while a trace ends above `tol`, retrace with tighter step control.

    Returns the best trace's end (lowest exploitability); `steps` counts every trace.
    """
    if retraces < 0:
        raise ValueError(f"retraces must be >= 0; got {retraces}")
    log_targets = [np.log(t) for t in targets]
    system = logit_system(game, log_targets, backend)
    best, history = None, []
    for _ in range(retraces + 1):
        xs, info = _branch(game, system, log_targets, tol, polish_from, backend, options)
        history.append({"max_distance": options.max_distance, "steps": info["steps"],
                        "stop_reason": info["stop_reason"], "exploitability": info["exploitability"]})
        if best is None or info["exploitability"] < best[1]["exploitability"]:
            best = (xs, info)
        if info["exploitability"] <= tol:
            break
        options = replace(
            options,
            first_step=options.first_step * _RETRACE_DISTANCE_FACTOR,
            max_distance=options.max_distance * _RETRACE_DISTANCE_FACTOR,
            max_contraction=options.max_contraction * _RETRACE_CONTRACTION_FACTOR,
        )
    xs, info = best
    info["steps"] = sum(trace["steps"] for trace in history)
    info["retraces"] = len(history) - 1
    info["traces"] = history
    return xs, info


def _branch(game: Game, system, log_targets, tol: float, polish_from: float, backend: str,
            options: ContinuationOptions):
    targets = [np.exp(t) for t in log_targets]
    values_fn = values_function(game)
    state = {"polished": None, "last_polish_lambda": 0.0, "polish_attempts": 0, "polish_iterations": 0,
             "branch_exploitability": np.inf, "xs": None, "lambda": 0.0,
             "candidate": None, "degenerate": None}

    def monitor(z, evaluation) -> bool:
        xs = [np.asarray(x, dtype=np.float64) for x in evaluation.marginals]
        xs = [x / x.sum() for x in xs]
        values = [np.asarray(v) for v in evaluation.values]
        expl = float(sum(v.max() - v @ x for v, x in zip(values, xs)))
        lam = float(z[-1])
        state["xs"], state["branch_exploitability"], state["lambda"] = xs, expl, lam
        if expl <= polish_from and lam >= 1.5 * state["last_polish_lambda"]:
            state["last_polish_lambda"] = lam
            tried = set()
            for supports in _candidate_supports(values, lam):
                key = tuple(tuple(s) for s in supports)
                if key in tried:
                    continue
                tried.add(key)
                state["polish_attempts"] += 1
                polished, iterations, regular = polish(game, xs, supports)
                state["polish_iterations"] += iterations
                if polished is None:
                    continue
                polished_expl = float(sum(r.max() for r in _ratings(values_fn, polished)))
                if polished_expl > min(tol, expl):
                    continue
                if not regular:  # a continuum of equilibria: keep following the branch
                    state["degenerate"] = polished
                    break
                distance = sum(float(np.abs(a - b).sum()) for a, b in zip(polished, xs))
                # Accept a polished point next to the branch, or one that a polish from an earlier,
                # farther branch point reached too (both then converge to the same limit).
                previous = state["candidate"]
                again = (
                    previous is not None
                    and _same(polished, previous[0])
                    and distance < previous[1]
                    and distance <= _MAX_POLISH_DISTANCE
                )
                if distance <= max(1e-3, 20.0 * expl) or again:
                    state["polished"] = polished
                    state["polish_distance"] = distance
                    return True
                state["candidate"] = (polished, distance)
                break
        return expl <= tol

    z, stats = trace_branch(system, system.start(log_targets), monitor, options)
    if state["polished"] is None and state["branch_exploitability"] > tol and state["degenerate"] is not None:
        # The branch could not be followed to `tol` (e.g. stuck at a bifurcation of a degenerate
        # game): fall back to the exact equilibrium polished on the continuum it approaches.
        state["polished"] = state["degenerate"]
        state["polish_distance"] = sum(float(np.abs(a - b).sum()) for a, b in zip(state["degenerate"], state["xs"]))
    xs = state["polished"] if state["polished"] is not None else state["xs"]
    if xs is None:  # not a single accepted step
        xs = [np.asarray(t) for t in targets]
    info = {
        "exploitability": float(sum(r.max() for r in _ratings(values_fn, xs))),
        "steps": stats.steps,
        "rejected_steps": stats.rejected,
        "factorisations": stats.factorisations,
        "chord_evaluations": stats.evaluations,
        "arclength": stats.arclength,
        "stop_reason": stats.stop_reason,
        "lambda": float(z[-1]),
        "branch_exploitability": state["branch_exploitability"],
        "polished": state["polished"] is not None,
        "degenerate": state["degenerate"] is not None,
        "polish_attempts": state["polish_attempts"],
        "polish_iterations": state["polish_iterations"],
        "backend": backend if isinstance(game, KothGame) else "numpy",
        "temperature": 1.0 / float(z[-1]) if z[-1] > 0 else None,
    }
    if state["polished"] is not None:
        info["polish_distance"] = state["polish_distance"]
    return xs, info
