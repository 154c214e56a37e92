"""Limiting logit equilibria (`solvers.nash.limiting_logit`, method "branch") of many king-of-the-hill games at once,
such as a bootstrap's replicates.

Every game's branch is traced by `_batched_trace` (one jitted, vmapped loop over lanes; a lane whose
game is done takes the next game) and its end is picked by the monitor of the one-by-one solve
(`nash.BranchMonitor`), replayed over the recorded points: the same support polishes, limit
extrapolation and stopping rule, so each game gets the equilibrium `nash` selects. The two traces
differ only in rounding (summation order; the one-by-one trace skips prompts of mass below e^-50):
an isolated end is the same to ~1e-12; an end extrapolated on a degenerate game agrees to the
extrapolation's accuracy (`diagnostics["limit_change"]`). Where `nash` retraces a game with tighter
step control (its trace ended above `tol`), so do the lanes, with the same compiled program.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple, Sequence

import jax
import numpy as np

from eqarena.solvers._precision import float64
from eqarena.solvers.games.normal_form import KothGame
from eqarena.solvers.nash import _batched_trace as trace
from eqarena.solvers.nash._continuation import ContinuationOptions
from eqarena.solvers.nash._polish import values_function
from eqarena.solvers.nash.limiting_logit import BranchMonitor, best_trace, deviation_ratings, retrace_options
from eqarena.solvers.nash.logit import is_antisymmetric

LANES = 16  # games traced side by side
RECORD = 32  # accepted points per lane and call; the monitor then replays them
# A single lane's attempts run on the fewest of these many prompts that hold all that carry mass
# (`_batched_trace._attempt`); tiers below half the game's (padded) prompts. On 500 x 17 bootstrap
# replicates (~316 distinct prompts) the prompts carry mass on all rows up to lambda ~ 100, on ~120
# rows up to ~1e3 and on ~10 beyond.
KEPT_ROWS = (16, 64, 128)
# ... on games of at least this many (padded) cells P x M x M: on smaller ones an attempt costs about the
# same on any rows, and each tier is one more branch to compile. Per replicate, one process, kept rows
# against all rows: 805 x 12 28-29 against 34-36 ms, 500 x 17 (see `_batched_trace._attempt`); 40 x 20
# 20-21 against 19-20, 300 x 8 24-26 against 23, 80 x 5 8-9 against 7.5-8.
KEPT_ROWS_FROM = 1 << 15

# Held while a lane program is compiled or read back from JAX's persistent compilation cache, once per
# process: program key -> context manager (`guard_compiles`).
_COMPILE_GUARD: list[Callable[[tuple], AbstractContextManager]] = [lambda program: nullcontext()]
_COMPILED: dict[tuple, Callable] = {}  # the lane programs compiled in this process, by key


def guard_compiles(guard: Callable[[tuple], AbstractContextManager]) -> None:
    """Hold `guard(program)` while a lane program is compiled, or read back from the compilation cache, in
    this process (`program`: a tuple of ints, bools and None that names it; tracing it is not guarded).
    Worker pools give every program a lock the workers share: with the compilation cache on, a program two
    workers need is compiled by one while the other waits, then read back from the cache, instead of
    compiled twice at once on the same cores (`runtime.worker_pool`)."""
    _COMPILE_GUARD[:] = [guard]


def _compiled(program: tuple, *args) -> Callable:
    """The lane program `program` (`batched_nash`) for arguments like `args`, compiled once per process."""
    compiled = _COMPILED.get(program)
    if compiled is None:
        lanes, _, _, record, antisymmetric, rows = program
        if lanes == 1:
            lowered = trace.run_lane.lower(*args, antisymmetric=antisymmetric, record=record, rows=rows)
        else:
            lowered = trace.run_lanes.lower(*args, antisymmetric=antisymmetric, record=record)
        with _COMPILE_GUARD[0](program):
            compiled = _COMPILED[program] = lowered.compile()
    return compiled


@dataclass(frozen=True, eq=False)
class BranchEnd:
    """One game's equilibrium: marginals and ratings (one array per player, eq. 1), exploitability,
    and the diagnostics `nash` gives."""

    marginals: list[np.ndarray]
    ratings: list[np.ndarray]
    exploitability: float
    diagnostics: dict


class _Point(NamedTuple):
    """What the monitor reads at an accepted point (the fields of `_logit.Evaluation` it uses)."""

    marginals: tuple
    values: tuple


@float64
def batched_nash(
    games: Sequence[KothGame],
    targets: Sequence[Sequence[np.ndarray]],
    *,
    prompts: int | None = None,
    tol: float = 1e-6,
    polish_from: float = 1e-3,
    lanes: int = LANES,
    record: int = RECORD,
    options: ContinuationOptions = ContinuationOptions(),
    retraces: int = 2,
    timings: dict[str, float] | None = None,
) -> list[BranchEnd]:
    """The branch end of every game from its targets (strictly positive, one per player, as
    `nash.selection_targets` gives them): the end `nash` gives it.

    The games share their number of models. Each lane holds its game's tensor padded to `prompts`
    prompts (default: the largest game's) with prompts of target mass 0, which never carry mass; a
    fixed `prompts` and `lanes` keep one compilation for any set of games. With one lane the trace
    is not vmapped, and on games of `KEPT_ROWS_FROM` cells or more its attempts run on the fewest
    `KEPT_ROWS` prompts of highest logit that hold all that carry mass (as the one-by-one trace prunes
    the others). A game whose trace ends above `tol` is traced again on the lanes with `nash`'s tighter
    step control (`limiting_logit.retrace_options`), up to `retraces` times, and gets its least
    exploitable trace's end, as `nash` does (the options are a traced argument: the same compiled
    program). timings: if given, a dict to which the seconds spent in the compiled trace (waited for
    and copied to the host), in the monitor's replay of its points and in finishing the ends are added
    ("trace", "monitor", "finish").
    """
    if not games:
        return []
    if retraces < 0:
        raise ValueError(f"retraces must be >= 0; got {retraces}")
    m = games[0].num_actions[1]
    p = prompts or max(g.num_actions[0] for g in games)
    if any(g.num_actions[0] > p or g.num_actions[1] != m for g in games):
        raise ValueError(f"every game needs at most {p} prompts and {m} models")
    antisymmetric = all(is_antisymmetric(np.asarray(g.u_king)) for g in games)
    lanes_of = _Lanes(lanes, p, m, record, antisymmetric, polish_from, tol, _Clock(timings))
    best: list[tuple] = [()] * len(games)
    history: list[list[dict]] = [[] for _ in games]
    pending = list(range(len(games)))
    for _ in range(retraces + 1):
        for g, (xs, info) in lanes_of.ends([games[k] for k in pending], [targets[k] for k in pending], options):
            g = pending[g]
            history[g].append({key: info[key] for key in ("steps", "stop_reason", "exploitability")})
            history[g][-1]["max_distance"] = options.max_distance
            if not best[g] or info["exploitability"] < best[g][1]["exploitability"]:
                best[g] = (xs, info)
        pending = [g for g in pending if best[g][1]["exploitability"] > tol]
        if not pending:
            break
        options = retrace_options(options)
    out = []
    for game, end, traces in zip(games, best, history):
        xs, info = best_trace(end, traces)
        ratings = deviation_ratings(values_function(game), xs)
        out.append(BranchEnd(xs, ratings, float(sum(max(0.0, r.max()) for r in ratings)), info))
    return out


@dataclass
class _Lanes:
    """The lane program of one batch's sizes, and the traces of games on it."""

    lanes: int
    prompts: int
    models: int
    record: int
    antisymmetric: bool
    polish_from: float
    tol: float
    clock: "_Clock"

    def ends(self, games, targets, options: ContinuationOptions) -> Iterator[tuple[int, tuple]]:
        """(game index, (end, diagnostics)) of every game's trace under `options`, as the traces end."""
        lanes, p, m = self.lanes, self.prompts, self.models
        opts = trace.option_vector(options)
        log_t, u_lanes = np.zeros((lanes, p + 2 * m)), np.zeros((lanes, p, m, m))

        def load(lane: int, g: int) -> None:
            n = games[g].num_actions[0]
            log_t[lane] = -np.inf
            log_t[lane, :n] = np.log(targets[g][0])
            log_t[lane, p:] = np.concatenate([np.log(targets[g][1]), np.log(targets[g][2])])
            u_lanes[lane] = 0.0
            u_lanes[lane, :n] = games[g].u_king

        queue = iter(range(len(games)))
        game_of = [next(queue, None) for _ in range(lanes)]
        for lane, g in enumerate(game_of):
            load(lane, g if g is not None else 0)  # an idle lane traces game 0 and is ignored
        rows = None  # the kept-row tiers of a single lane (`run_lane`)
        if lanes == 1:
            rows = tuple(r for r in KEPT_ROWS if 2 * r < p and p * m * m >= KEPT_ROWS_FROM) or None
        program = (lanes, p, m, self.record, self.antisymmetric, rows)
        state = trace.blank_lanes(lanes, p, m, self.record)
        fresh = np.ones(lanes, dtype=bool)  # every lane starts its game in the first call
        monitors = [BranchMonitor(games[g or 0], self.tol, self.polish_from) for g in game_of]  # idle lanes': unread
        clock = self.clock
        while any(g is not None for g in game_of):
            run = _compiled(program, state, fresh, log_t, u_lanes, opts)  # compiled on the first call
            with clock("trace"):
                state = _host(run(state, fresh, log_t, u_lanes, opts))
            fresh[:] = False
            for lane, g in enumerate(game_of):
                if g is None:
                    continue
                with clock("monitor"):
                    reason, counters = _replay(monitors[lane], state, lane, games[g].num_actions[0], self.polish_from)
                if reason is None:
                    continue
                with clock("finish"):
                    finished = _finish(monitors[lane], targets[g], reason, counters)
                yield g, finished
                game_of[lane] = g_next = next(queue, None)
                if g_next is None:
                    state.stop[lane] = trace.MAX_STEPS  # idle from now on
                    continue
                monitors[lane] = BranchMonitor(games[g_next], self.tol, self.polish_from)
                load(lane, g_next)
                fresh[lane] = True  # the next call starts it at its new game's branch start


class _Clock:
    """`with clock(part):` adds the block's seconds to timings[part]; nothing when timings is None."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings = timings

    @contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        if self.timings is None:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[part] = self.timings.get(part, 0.0) + time.perf_counter() - start


def _host(lanes):
    return jax.tree_util.tree_map(lambda v: np.array(v), lanes)


def _replay(end: BranchMonitor, state: trace.Lane, lane: int, n: int, polish_from: float):
    """Feed lane's recorded points to its monitor: (stop reason, counters) once the trace ends, else
    (None, None). A point the monitor would only read and pass over (exploitability above
    `polish_from`) is skipped, unless it is the last: the monitor then holds the same last point."""
    count = int(state.count[lane])
    passed_over = _exploitability_above(state, lane, n, count, polish_from)
    for k in range(count):
        if passed_over[k] and k < count - 1:
            continue
        point = _Point(
            (state.marginals[0][lane, k, :n], state.marginals[1][lane, k], state.marginals[2][lane, k]),
            (state.values[0][lane, k, :n], state.values[1][lane, k], state.values[2][lane, k]),
        )
        at = state.at[lane, k]
        if end.monitor(state.zs[lane, k], point, int(at[trace.STEPS] + at[trace.REJECTED])):
            return "converged", state.at[lane, k]
    stop = int(state.stop[lane])
    if stop != trace.RUNNING:
        return trace.STOP_REASONS[stop], state.counters[lane]
    return None, None


def _exploitability_above(state: trace.Lane, lane: int, n: int, count: int, bound: float) -> np.ndarray:
    """Whether each of lane's first `count` points has exploitability above `bound` (all points at once;
    the margin covers the rounding between these sums and the monitor's own, so the monitor would
    find every point marked here above `bound` too)."""
    expl = np.zeros(count)
    for player, (marginals, values) in enumerate(zip(state.marginals, state.values)):
        x, v = marginals[lane, :count], values[lane, :count]
        if player == 0:
            x, v = x[:, :n], v[:, :n]
        expl += v.max(axis=1) - np.einsum("ka,ka->k", v, x / x.sum(axis=1, keepdims=True))
    return expl > bound * (1.0 + 1e-9) + 1e-15


def _finish(end: BranchMonitor, targets, reason: str, counters) -> tuple[list[np.ndarray], dict]:
    """A trace's end and its diagnostics, as `limiting_logit._branch` gives them."""
    xs, info = end.result([np.asarray(t) for t in targets], reason)
    info.update(
        steps=int(counters[trace.STEPS]),
        rejected_steps=int(counters[trace.REJECTED]),
        factorisations=int(counters[trace.FACTORISATIONS]),
        chord_evaluations=int(counters[trace.EVALUATIONS]),
        arclength=float(counters[trace.ARCLENGTH]),
        kept_row_attempts=int(counters[trace.KEPT_ROWS]),
        stop_reason=reason,
        backend="jax-batched",
    )
    return xs, info
