"""`_continuation.trace_branch` for many king-of-the-hill games at once: one `jax.jit`, `jax.vmap`-ed
over lanes, each lane tracing one game's logit branch (`run_lanes`); or one game after another on a
single lane, not vmapped (`run_lane`), whose attempts then skip the prompts that carry no mass.

The predictor-corrector and its step-size control are those of `trace_branch`, step for step (bent
predictor, chord-Newton corrector with the predictor's Jacobian, the same acceptance tests and step
growth), on the reduced king-of-the-hill system of `_logit` (the prompt player eliminated exactly).
A call makes `record` attempts on every unfinished lane, recording the accepted points, until the
lane stops (max_steps, step underflow, lambda < 0, max_lambda); each point is recorded with the marginals,
values and counters the monitor of `trace_branch` would have seen there. The monitor only decides
where a trace ends (it never changes a step), so the caller replays it over the recorded points and
stops the lane at the same point as the one-by-one trace; the steps a lane ran past that point are
discarded. A lane flagged `fresh` first starts over at its game's branch start (the caller has just
loaded a new game into it), inside the same program: one compilation per game size, not two.
Options are traced arguments, so tighter step control needs no new compilation.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from eqarena.solvers.nash._continuation import ContinuationOptions, predictor_bend
from eqarena.solvers.nash.logit import _CHORD_LOGIT, _NEGLIGIBLE_MASS, _koth_chord_impl, _koth_factor_impl

RUNNING, MAX_STEPS, STEP_UNDERFLOW, LEFT_BRANCH, MAX_LAMBDA = range(5)
STOP_REASONS = {
    MAX_STEPS: "max_steps",
    STEP_UNDERFLOW: "step_underflow",
    LEFT_BRANCH: "left_branch",
    MAX_LAMBDA: "max_lambda",
}
# Counters recorded with every accepted point: steps, rejected steps, factorisations, chord
# evaluations, arclength (as `_continuation.ContinuationStats`), and attempts run on kept rows only.
STEPS, REJECTED, FACTORISATIONS, EVALUATIONS, ARCLENGTH, KEPT_ROWS = range(6)
_COUNTERS = 6


def option_vector(options: ContinuationOptions) -> jnp.ndarray:
    """The options as one float vector (a traced argument)."""
    return jnp.asarray(
        [
            options.first_step,
            options.max_accel,
            options.max_distance,
            options.max_contraction,
            options.corrector_tol,
            options.max_corrector,
            options.min_step,
            options.max_steps,
            options.max_lambda,
        ],
        dtype=jnp.float64,
    )


class Lane(NamedTuple):
    """One lane's trace: the current point and tangent, the predictor's bend, the next step length,
    counters, stop code, and the points recorded in this call (count of them, z, marginals, values,
    counters)."""

    z: jnp.ndarray
    tangent: jnp.ndarray
    bend: jnp.ndarray
    h: jnp.ndarray
    counters: jnp.ndarray  # (_COUNTERS,)
    stop: jnp.ndarray
    count: jnp.ndarray
    zs: jnp.ndarray  # (record, 2M+3)
    marginals: tuple  # (record, P), (record, M), (record, M)
    values: tuple
    at: jnp.ndarray  # (record, _COUNTERS) the counters at each recorded point


def _weights(z, m):
    """`LogitSystem.distance_weights` of the reduced system."""
    y = z[: 2 * m]
    w = jnp.minimum(1.0, jnp.exp(jnp.minimum(y, 0.0)) / _NEGLIGIBLE_MASS)
    return jnp.concatenate([w, jnp.ones(3)])


def blank_lanes(lanes: int, prompts: int, models: int, record: int) -> Lane:
    """NumPy buffers of `lanes` lanes for games of (prompts, models), each to be started (`fresh`) by
    its first `run_lanes` / `run_lane` call."""
    n = 2 * models + 3
    per_player = tuple(np.zeros((lanes, record, k)) for k in (prompts, models, models))
    return Lane(
        np.zeros((lanes, n)),
        np.zeros((lanes, n)),
        np.zeros((lanes, n)),
        np.zeros(lanes),
        np.zeros((lanes, _COUNTERS)),
        np.zeros(lanes, dtype=np.int32),
        np.zeros(lanes, dtype=np.int32),
        np.zeros((lanes, record, n)),
        per_player,
        per_player,
        np.zeros((lanes, record, _COUNTERS)),
    )


def _start(log_t, u, a, opts, antisymmetric, record):
    """A lane at the branch's start (lambda = 0) with its first tangent."""
    p, m = u.shape[0], u.shape[1]
    z = jnp.concatenate([log_t[p:], jnp.zeros(3)])
    e_lam = jnp.zeros(2 * m + 3).at[-1].set(1.0)
    _, _, tangent, _, _, _ = _koth_factor_impl(z, e_lam, u, a, log_t, antisymmetric, jnp)
    counters = jnp.zeros(_COUNTERS).at[FACTORISATIONS].set(1.0)
    per_player = (jnp.zeros((record, p)), jnp.zeros((record, m)), jnp.zeros((record, m)))
    return Lane(
        z,
        tangent / jnp.linalg.norm(tangent),
        jnp.zeros_like(z),
        opts[0],
        counters,
        jnp.int32(RUNNING),
        jnp.int32(0),
        jnp.zeros((record, 2 * m + 3)),
        per_player,
        per_player,
        jnp.zeros((record, _COUNTERS)),
    )


class _Corrector(NamedTuple):
    point: jnp.ndarray
    correction: jnp.ndarray
    marginals: tuple
    values: tuple
    iteration: jnp.ndarray
    previous: jnp.ndarray
    decel: jnp.ndarray
    status: jnp.ndarray  # 0 correcting, 1 converged, 2 rejected
    evaluations: jnp.ndarray


def _predicted(lane: Lane):
    """The predictor's point (`trace_branch`'s)."""
    return lane.z + lane.h * lane.tangent + lane.h * lane.h * lane.bend


def _attempt(lane: Lane, u, a, log_t, opts, antisymmetric, rows=None):
    """One predictor-corrector attempt from the lane's point: (accepted, point, tangent, decel,
    marginals, values, chord evaluations, whether it ran on kept rows), as one iteration of
    `trace_branch`'s loop.

    rows (static): if given, ascending row counts (tiers). An attempt where all prompts but the r
    of highest logit at the predicted point lie `_CHORD_LOGIT` below the best (mass < e^-80
    relative) runs on those r rows only, r the smallest tier that holds them, as the one-by-one
    trace's pruned factorisation and chords do; the prompt values of the other rows are those of
    the predicted point. A `lax.switch`: it saves work only outside `vmap`. An attempt costs about
    as much as its rows (one process, no other kept rows: 0.23 ms on 384 rows, 0.08 on 128, 0.06 on 64,
    0.035 on 16).
    """
    if rows is None:
        return *_attempt_on(lane, u, a, log_t, opts, antisymmetric), False
    p, m = u.shape[0], u.shape[1]
    point = _predicted(lane)
    vp = (a.reshape(p * m, m) @ jnp.exp(point[m : 2 * m])).reshape(p, m) @ jnp.exp(point[:m])
    logits = log_t[:p] + point[-1] * vp
    alive = logits >= jnp.max(logits) - _CHORD_LOGIT
    count = jnp.sum(alive)

    def on_kept_rows(size, _):
        (keep,) = jnp.nonzero(alive, size=size, fill_value=0)
        filled = jnp.arange(size) >= count  # slots past the alive rows: row 0 again, without mass
        log_t_kept = jnp.concatenate([jnp.where(filled, -jnp.inf, log_t[keep]), log_t[p:]])
        accepted, z, tangent, decel, xs, values, evaluations = _attempt_on(
            lane, u[keep], a[keep], log_t_kept, opts, antisymmetric
        )
        kept = jnp.where(filled, p, keep)  # out of bounds: dropped by the scatters
        xs = (jnp.zeros(p).at[kept].set(xs[0], mode="drop"), xs[1], xs[2])
        values = (vp.at[kept].set(values[0], mode="drop"), values[1], values[2])
        return accepted, z, tangent, decel, xs, values, evaluations, jnp.bool_(True)

    def on_all_rows(_):
        return *_attempt_on(lane, u, a, log_t, opts, antisymmetric), jnp.bool_(False)

    branches = [functools.partial(on_kept_rows, size) for size in rows] + [on_all_rows]
    tier = jnp.sum(jnp.asarray(rows) < count)  # the first tier that holds the alive rows, else all
    return lax.switch(tier, branches, None)


def _attempt_on(lane: Lane, u, a, log_t, opts, antisymmetric):
    """`_attempt` on the prompts of u (all of them, or the kept rows)."""
    max_accel, max_distance, max_contraction, corrector_tol, max_corrector = opts[1], opts[2], opts[3], opts[4], opts[5]
    m = u.shape[1]
    point = _predicted(lane)
    _, correction, tangent, xs, values, jac = _koth_factor_impl(point, lane.tangent, u, a, log_t, antisymmetric, jnp)
    new_tangent = tangent / jnp.linalg.norm(tangent)
    ok = jnp.all(jnp.isfinite(new_tangent)) & (new_tangent @ lane.tangent > 0.0)
    weights = _weights(point, m)

    def judge(c: _Corrector):
        """`trace_branch`'s tests of the correction in hand: move by it, or stop (converged, rejected)."""
        dist = jnp.linalg.norm(weights * c.correction)
        too_far = ~jnp.isfinite(dist) | (dist >= max_distance)
        decel = jnp.maximum(c.decel, jnp.sqrt(dist / max_distance) * max_accel)
        contraction = dist / (c.previous + 1e-3 * corrector_tol)
        later = c.iteration >= 1
        diverging = later & (contraction > max_contraction)
        decel = jnp.where(later, jnp.maximum(decel, jnp.sqrt(contraction / max_contraction) * max_accel), decel)
        moved = c.point + c.correction
        converged = dist <= corrector_tol * (1.0 + 1e-6 * jnp.abs(moved[-1]))
        iteration = c.iteration + 1
        rejected = too_far | diverging | (~converged & (iteration >= max_corrector))
        status = jnp.where(too_far | diverging, 2, jnp.where(converged, 1, jnp.where(rejected, 2, 0)))
        return c._replace(
            point=jnp.where(too_far | diverging, c.point, moved),
            iteration=iteration,
            previous=dist,
            decel=decel,
            status=status,
        )

    def correct(c: _Corrector):
        """A chord step from the moved point (only while correcting: no evaluation is wasted), judged."""
        _, chord, xs_c, values_c = _koth_chord_impl(c.point, jac, u, a, log_t, jnp)
        return judge(c._replace(correction=chord, marginals=xs_c, values=values_c, evaluations=c.evaluations + 1))

    start = _Corrector(
        point,
        correction,
        tuple(xs),
        tuple(values),
        jnp.int32(0),
        jnp.float64(0.0),
        1.0 / max_accel,
        jnp.int32(0),
        jnp.int32(0),
    )
    judged = judge(start)
    first = judged._replace(status=jnp.where(ok, judged.status, 2))
    end = lax.while_loop(lambda c: c.status == 0, correct, first)
    return end.status == 1, end.point, new_tangent, end.decel, end.marginals, end.values, end.evaluations


def _step(lane: Lane, u, a, log_t, opts, antisymmetric, rows=None):
    """`trace_branch`'s loop body for one lane: stop checks, one attempt, bookkeeping and recording."""
    max_accel, min_step, max_steps, max_lambda = opts[1], opts[6], opts[7], opts[8]
    counters = lane.counters
    stop = jnp.where(counters[STEPS] >= max_steps, MAX_STEPS, jnp.where(lane.h < min_step, STEP_UNDERFLOW, RUNNING))
    going = stop == RUNNING
    accepted, point, tangent, decel, xs, values, evaluations, kept = _attempt(
        lane, u, a, log_t, opts, antisymmetric, rows
    )
    accepted = going & accepted
    rejected = going & ~accepted
    counters = counters.at[FACTORISATIONS].add(going).at[EVALUATIONS].add(jnp.where(going, evaluations, 0))
    counters = counters.at[KEPT_ROWS].add(going & kept)
    counters = counters.at[STEPS].add(accepted).at[REJECTED].add(rejected)
    chord = jnp.linalg.norm(point - lane.z)
    counters = counters.at[ARCLENGTH].add(jnp.where(accepted, chord, 0.0))
    z = jnp.where(accepted, point, lane.z)
    bend = jnp.where(accepted, predictor_bend(lane.z, point, tangent, jnp.where(accepted, chord, 1.0)), lane.bend)
    h = jnp.where(accepted, lane.h / jnp.minimum(decel, max_accel), jnp.where(rejected, lane.h / max_accel, lane.h))
    stop = jnp.where(
        accepted & (z[-1] < 0.0), LEFT_BRANCH, jnp.where(accepted & (z[-1] >= max_lambda), MAX_LAMBDA, stop)
    )
    k = lane.count

    def put(buffer, value):  # slot k is counted only if the step was accepted; otherwise it is reused
        return buffer.at[k].set(value)

    return Lane(
        z,
        jnp.where(accepted, tangent, lane.tangent),
        bend,
        h,
        counters,
        stop.astype(jnp.int32),
        k + accepted,
        put(lane.zs, z),
        tuple(put(b, v) for b, v in zip(lane.marginals, xs)),
        tuple(put(b, v) for b, v in zip(lane.values, values)),
        put(lane.at, counters),
    )


def _run(lane: Lane, fresh, u, a, log_t, opts, antisymmetric, record, rows=None):
    """`record` attempts (a stopped lane idles through them), after starting the lane over if `fresh`
    (under `vmap` every lane computes the start, one factorisation, and the fresh ones take it). A loop of
    fixed length: under `vmap` a while loop with a per-lane condition would select every buffer of every
    lane at each step."""
    lane = lax.cond(fresh, lambda: _start(log_t, u, a, opts, antisymmetric, record), lambda: lane)
    lane = lane._replace(count=jnp.int32(0))
    return lax.fori_loop(0, record, lambda _, s: _step(s, u, a, log_t, opts, antisymmetric, rows), lane)


@functools.partial(jax.jit, static_argnames=("antisymmetric", "record"))
def run_lanes(lanes: Lane, fresh, log_t, u, opts, *, antisymmetric: bool, record: int):
    """`record` attempts on every lane (see `_run`): lanes (L leading), fresh (L,) bool, log-targets
    (L, P + 2M), tensors u (L, P, M, M)."""
    go = jax.vmap(_run, in_axes=(0, 0, 0, 0, 0, None, None, None))
    return go(lanes, fresh, u, jnp.abs(u), log_t, opts, antisymmetric, record)


@functools.partial(jax.jit, static_argnames=("antisymmetric", "record", "rows"))
def run_lane(lanes: Lane, fresh, log_t, u, opts, *, antisymmetric: bool, record: int, rows: tuple[int, ...] | None):
    """`run_lanes` for a single lane (leading axis of length 1), not vmapped: its attempts run on the
    prompts of highest logit (as few as a tier of `rows` holds) wherever the others carry no mass
    (`_attempt`)."""
    one = jax.tree_util.tree_map(lambda v: v[0], lanes)
    out = _run(one, fresh[0], u[0], jnp.abs(u[0]), log_t[0], opts, antisymmetric, record, rows)
    return jax.tree_util.tree_map(lambda v: v[None], out)
