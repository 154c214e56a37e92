"""Pseudo-arclength predictor-corrector continuation along the logit-QRE branch.

Euler predictor along the unit tangent; chord-Newton corrector on the hyperplane orthogonal to it
(Keller's bordering) with the Jacobian factorised once at the predicted point; the new tangent
comes from the same factorisation and keeps its orientation by continuity, so turning points in
lambda are passed. Step-size control as in Gambit's path tracer (Allgower & Georg): a step is
rejected when the first correction is too long or the corrections stop contracting, and the next
step length is scaled by the observed distance and contraction rate. A `monitor` called after
every accepted point decides when to stop.

The branch starts at the unique point with lambda = 0 and cannot return there, so a point with
lambda < 0 means the tracer jumped onto another branch: it stops with stop_reason "left_branch"
(the caller may retrace with tighter step control).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from solvers._logit import Evaluation, LogitSystem


@dataclass(frozen=True)
class ContinuationOptions:
    first_step: float = 0.03
    max_accel: float = 1.5  # largest step growth (and shrink) factor
    max_distance: float = 0.1  # largest accepted corrector step (weighted norm)
    max_contraction: float = 0.6  # largest accepted ratio of successive corrector steps
    corrector_tol: float = 1e-7  # corrector converged below this step length
    max_corrector: int = 20
    min_step: float = 1e-10
    max_steps: int = 20_000
    max_lambda: float = 1e12


@dataclass
class ContinuationStats:
    steps: int = 0
    rejected: int = 0
    factorisations: int = 0
    evaluations: int = 0
    arclength: float = 0.0
    stop_reason: str = ""


Monitor = Callable[[np.ndarray, Evaluation], bool]


def trace_branch(
    system: LogitSystem, z0: np.ndarray, monitor: Monitor, options: ContinuationOptions
) -> tuple[np.ndarray, ContinuationStats]:
    """Follow H(z) = 0 from z0 (lambda = 0) with lambda initially increasing; returns the last point."""
    stats = ContinuationStats()
    e_lam = np.zeros(system.dim)
    e_lam[-1] = 1.0
    z = np.asarray(z0, dtype=np.float64)
    first = system.factor(z, e_lam)
    stats.factorisations += 1
    tangent = _unit(first.tangent)
    h = options.first_step
    while True:
        if stats.steps >= options.max_steps:
            stats.stop_reason = "max_steps"
            break
        if h < options.min_step:
            stats.stop_reason = "step_underflow"
            break
        point = z + h * tangent
        evaluation = system.factor(point, tangent)
        stats.factorisations += 1
        new_tangent = _unit(evaluation.tangent)
        decel = 1.0 / options.max_accel
        accept = np.all(np.isfinite(new_tangent)) and float(new_tangent @ tangent) > 0.0
        previous = 0.0
        iteration = 0
        weights = system.distance_weights(point)
        while accept:
            delta = evaluation.correction
            dist = float(np.linalg.norm(weights * delta))
            if not np.isfinite(dist) or dist >= options.max_distance:
                accept = False
                break
            decel = max(decel, np.sqrt(dist / options.max_distance) * options.max_accel)
            if iteration >= 1:
                contraction = dist / (previous + 1e-3 * options.corrector_tol)
                if contraction > options.max_contraction:
                    accept = False
                    break
                decel = max(decel, np.sqrt(contraction / options.max_contraction) * options.max_accel)
            point = point + delta
            if dist <= options.corrector_tol * (1.0 + 1e-6 * abs(point[-1])):
                break
            iteration += 1
            if iteration >= options.max_corrector:
                accept = False
                break
            previous = dist
            evaluation = system.chord(point, evaluation.factors)
            stats.evaluations += 1
        if not accept:
            stats.rejected += 1
            h /= options.max_accel
            continue
        stats.arclength += float(np.linalg.norm(point - z))
        z, tangent = point, new_tangent
        stats.steps += 1
        if monitor(z, evaluation):
            stats.stop_reason = "converged"
            break
        if z[-1] < 0.0:
            stats.stop_reason = "left_branch"
            break
        if z[-1] >= options.max_lambda:
            stats.stop_reason = "max_lambda"
            break
        h /= min(decel, options.max_accel)
    return z, stats


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)
