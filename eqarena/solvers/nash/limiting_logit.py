"""Nash equilibrium ratings: the limiting logit equilibrium selected from a target (paper Section 3.2-3.3).

The logit-QRE branch x_i ∝ t_i exp(lambda * u_i(., x_-i)) starts at the target t (lambda = 0) and its
end (lambda -> infinity) is the limiting logit equilibrium (LLE). With the uniform target this is the
classic LLE (McKelvey & Palfrey; the "Shannon" variant); with the max-affinity-entropy target
(`solvers.games.entropy.affinity_target`) it is invariant to cloned actions (paper Section 3.3).

method="branch" follows the branch by pseudo-arclength continuation in log-probabilities. Where the
limit is an isolated equilibrium, a Newton polish on the support read off the branch finds it. On a
degenerate game (a continuum of equilibria, common with payoffs on a coarse judgment grid) every
point of the face the branch approaches is exact, so the first exact point is not the limit: the
branch is followed until its extrapolated limit stops moving, and that limit is polished onto the
equilibrium set. method="anneal" is the paper's annealed QRE loss with Adam (Section 3.2, App. F),
kept to reproduce it.
"""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import Literal, Sequence, Union

import numpy as np

from eqarena.solvers._precision import float64
from eqarena.solvers._threads import blas_threads
from eqarena.solvers.games.entropy import DEFAULT_KERNEL_VARIANCE, DEFAULT_P, affinity_targets
from eqarena.solvers.games.equilibrium import Equilibrium
from eqarena.solvers.games.normal_form import Game, KothGame, NormalFormGame
from eqarena.solvers.nash._anneal import AnnealOptions, anneal
from eqarena.solvers.nash._continuation import BranchLimit, ContinuationOptions, trace_branch
from eqarena.solvers.nash._polish import branch_supports, polish, project, values_function
from eqarena.solvers.nash.logit import logit_system

Target = Union[Literal["affinity", "uniform"], Sequence[np.ndarray]]

_SUPPORT_GAPS = (8.0, 16.0, 32.0)
# A polished point farther than this (L1 over players) from the branch is never taken for its end.
_MAX_POLISH_DISTANCE = 0.1
# Each retrace (after a trace that left the branch or stalled) tightens the step control this much.
_RETRACE_DISTANCE_FACTOR = 0.25
_RETRACE_CONTRACTION_FACTOR = 0.6
# On a degenerate game the trace stops once two successive estimates of the branch's limit (half a
# decade of lambda apart) are this close (L1 over players), or at this lambda.
_LIMIT_TOL = 1e-7
_LIMIT_MAX_LAMBDA = 1e6
# ... or once it crawls (rounding noise in the branch's equations grows with lambda and eventually
# stalls the step control, which then rejects most steps): this many attempts (accepted steps and
# rejected ones) over which lambda stayed within this factor and the marginals moved less than this
# (L1; a turning point of the branch moves them more). A crawl adds no limit estimate (lambda must
# grow by sqrt(10) for one), so a longer window only costs steps: on 40 bootstrap replicates of a
# 500 x 17 game, 30 accepted steps instead of 200 ended 39 traces at the same point and one within
# its own limit_change, in 28% fewer steps; counting rejected attempts too ends the crawls of a third
# of them ~60 attempts sooner, at the same limit estimate.
_LIMIT_CRAWL_ATTEMPTS = 30
_LIMIT_CRAWL_RANGE = 1.1
_LIMIT_CRAWL_MOVE = 1e-4
# The limit estimate is polished on its best responses within each of these value gaps, and on the
# actions whose probability exceeds each of these cut-offs; a polished point this close to the
# estimate (or closer than ten times the estimate's last change) is preferred to the estimate.
_PROJECTION_GAPS = (1e-9, 1e-7, 1e-5)
_PROJECTION_CUTS = (1e-3, 1e-6, 1e-10)
_PROJECTION_DISTANCE = 1e-6
_MACHINE_EXACT = 1e-12
# A support whose polish failed is polished again once lambda has grown by this factor.
_RETRY_FAILED_POLISH = 10.0
# The affinity target may give actions exactly zero mass (near-clones, App. B); the logit branch needs
# a strictly positive start, else those actions could never enter the equilibrium. They get this
# share of uniform mass: far below anything a rating shows, but a finite log-probability.
_TARGET_FLOOR = 1e-12


@float64
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
    probability vector per player. method="branch" (default): continuation to the branch's limit,
    returned with exploitability <= `tol` (a Newton polish on the branch's support is tried once the
    branch is `polish_from`-exact; diagnostics["limit"] says how the limit was obtained: "isolated",
    "extrapolated", "max_lambda" or "trace_stopped", the last two with `limit_change`, the estimate's
    last move, as its accuracy); a trace that jumps off the branch (lambda < 0) or ends above `tol` is
    retraced from the start with tighter step control, up to `retraces` times; extra options are fields of
    `ContinuationOptions`. method="anneal": the paper's schedule; extra
    options are fields of `AnnealOptions` (e.g. max_steps). backend: where the king-of-the-hill
    continuation runs its memory-bound contractions ("numpy": BLAS, no compilation; "jax": jitted).
    Returns an Equilibrium with marginals (one (A_i,) array per player), joint None, ratings =
    deviation gains u_i(a, x_-i) - u_i(x), exploitability = sum_i max_a ratings_i[a].
    """
    if not isinstance(game, (NormalFormGame, KothGame)):
        raise TypeError(f"game must be a NormalFormGame or KothGame; got {type(game).__name__}")
    start = time.perf_counter()
    # The solver's matrix-vector passes are memory-bound: one BLAS thread on small games (`_threads`).
    with blas_threads(int(np.prod(game.num_actions))):
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
    ratings = deviation_ratings(values_function(game), xs)
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


def selection_targets(
    game: Game, target: Target, p: float = DEFAULT_P, kernel_variance: float = DEFAULT_KERNEL_VARIANCE
) -> list[np.ndarray]:
    """The strictly positive start of the branch `nash` traces for `target` (one array per player)."""
    return _resolve_targets(game, target, p, kernel_variance)[0]


def _resolve_targets(game: Game, target: Target, p: float, kernel_variance: float):
    if isinstance(target, str):
        if target == "affinity":
            targets = affinity_targets(game, p=p, kernel_variance=kernel_variance)
            return [(1.0 - _TARGET_FLOOR) * t + _TARGET_FLOOR / len(t) for t in targets], "affinity"
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


def deviation_ratings(values_fn, xs) -> list[np.ndarray]:
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
        history.append(
            {
                "max_distance": options.max_distance,
                "steps": info["steps"],
                "stop_reason": info["stop_reason"],
                "exploitability": info["exploitability"],
            }
        )
        if best is None or info["exploitability"] < best[1]["exploitability"]:
            best = (xs, info)
        if info["exploitability"] <= tol:
            break
        options = retrace_options(options)
    assert best is not None  # retraces >= 0: one trace at least
    return best_trace(best, history)


def retrace_options(options: ContinuationOptions) -> ContinuationOptions:
    """The tighter step control of the next retrace, after a trace that ended above `tol`."""
    return replace(
        options,
        first_step=options.first_step * _RETRACE_DISTANCE_FACTOR,
        max_distance=options.max_distance * _RETRACE_DISTANCE_FACTOR,
        max_contraction=options.max_contraction * _RETRACE_CONTRACTION_FACTOR,
    )


def best_trace(best: tuple, history: list[dict]) -> tuple:
    """The least exploitable trace's (end, diagnostics), the diagnostics counting every trace's steps."""
    xs, info = best
    info["steps"] = sum(trace["steps"] for trace in history)
    info["retraces"] = len(history) - 1
    info["traces"] = history
    return xs, info


def _branch(
    game: Game, system, log_targets, tol: float, polish_from: float, backend: str, options: ContinuationOptions
):
    end = BranchMonitor(game, tol, polish_from)
    z, stats = trace_branch(system, system.start(log_targets), end.monitor, options)
    xs, info = end.result([np.exp(t) for t in log_targets], stats.stop_reason)
    info.update(
        steps=stats.steps,
        rejected_steps=stats.rejected,
        factorisations=stats.factorisations,
        chord_evaluations=stats.evaluations,
        arclength=stats.arclength,
        stop_reason=stats.stop_reason,
        backend=backend if isinstance(game, KothGame) else "numpy",
    )
    return xs, info


class BranchMonitor:
    """The trace's monitor; picks the branch's end from what it saw.

    A Newton polish on the support read off the branch is tried whenever lambda has grown by half since
    the last try. A regular polished point (isolated and interior to its face) next to the branch is
    the branch's unique limit and ends the trace. Otherwise (a degenerate game: the branch approaches
    a continuum of equilibria and creeps along it) the trace goes on until the extrapolated limit
    (`BranchLimit`) stops moving, and the end is that limit polished onto the equilibrium set.
    """

    def __init__(self, game: Game, tol: float, polish_from: float):
        self.game, self.tol, self.polish_from = game, tol, polish_from
        self.values_fn = values_function(game)
        self.limit = BranchLimit()
        self.xs, self.values, self.lam, self.expl = None, None, 0.0, np.inf
        self.isolated, self.candidate, self.degenerate = None, None, None
        self.last_polish_lambda, self.polish_attempts, self.polish_iterations = 0.0, 0, 0
        self.continua: set[tuple] = set()  # supports whose polish found a continuum of equilibria
        self.failed: dict[tuple, float] = {}  # supports whose polish failed -> lambda to try them again at
        self.window = None  # [attempts when it opened, lowest lambda, highest lambda, marginals] since then

    def monitor(self, z, evaluation, attempts: int) -> bool:
        """Read an accepted branch point (`attempts`: the trace's accepted and rejected steps so far);
        True ends the trace."""
        xs = [np.asarray(x, dtype=np.float64) for x in evaluation.marginals]
        self.xs = [x / x.sum() for x in xs]
        self.values = [np.asarray(v) for v in evaluation.values]
        self.expl = float(sum(v.max() - v @ x for v, x in zip(self.values, self.xs)))
        self.lam = float(z[-1])
        if self.expl > self.polish_from:
            return False
        if self.lam >= 1.5 * self.last_polish_lambda and self._polish_isolated():
            return True
        self.limit.add(self.lam, np.concatenate(self.xs))
        if self._crawling(attempts):
            return True
        return self.expl <= self.tol and (self.limit.change <= _LIMIT_TOL or self.lam >= _LIMIT_MAX_LAMBDA)

    def _crawling(self, attempts: int) -> bool:
        window = self.window
        if window is None:
            self.window = [attempts, self.lam, self.lam, self.xs]
            return False
        window[1], window[2] = min(window[1], self.lam), max(window[2], self.lam)
        if attempts - window[0] < _LIMIT_CRAWL_ATTEMPTS:
            return False
        crawled = window[2] < _LIMIT_CRAWL_RANGE * window[1] and _distance(self.xs, window[3]) < _LIMIT_CRAWL_MOVE
        self.window = [attempts, self.lam, self.lam, self.xs]  # the next window opens here
        return crawled

    def _polish_isolated(self) -> bool:
        """Polish on the candidate supports; True when a regular polished point is taken for the end.

        Supports whose polish found a continuum are not polished again (the verdict is the support
        system's, not the start's): meeting them ends the round as their polish would. Supports whose
        polish failed wait until lambda has grown tenfold (a start nearer the limit may converge). On
        24 replicates of a 500 x 17 game this skips 60% of the polishes, none of which would have
        ended differently.
        """
        self.last_polish_lambda = self.lam
        tried = set()
        for supports in _candidate_supports(self.values, self.lam):
            key = tuple(tuple(s) for s in supports)
            if key in self.continua:  # the polish would find that continuum again
                return False
            if key in tried or self.lam < self.failed.get(key, 0.0):
                continue
            tried.add(key)
            self.polish_attempts += 1
            polished, iterations, regular = polish(self.game, self.xs, supports)
            self.polish_iterations += iterations
            if polished is None or self._exploitability(polished) > min(self.tol, self.expl):
                self.failed[key] = _RETRY_FAILED_POLISH * self.lam
                continue
            if not regular:  # a continuum of equilibria: keep following the branch
                self.degenerate = polished
                self.continua.add(key)
                return False
            distance = _distance(polished, self.xs)
            # Accept a polished point next to the branch, or one that a polish from an earlier,
            # farther branch point reached too (both then converge to the same limit).
            previous = self.candidate
            again = (
                previous is not None
                and _same(polished, previous[0])
                and distance < previous[1]
                and distance <= _MAX_POLISH_DISTANCE
            )
            if distance <= max(1e-3, 20.0 * self.expl) or again:
                self.isolated = polished
                return True
            self.candidate = (polished, distance)
            return False
        return False

    def _exploitability(self, xs) -> float:
        return float(sum(r.max() for r in deviation_ratings(self.values_fn, xs)))

    def result(self, targets, stop_reason: str):
        """(end point, diagnostics). After a trace that left the branch, its last point (for a retrace)."""
        info = {
            "lambda": self.lam,
            "branch_exploitability": self.expl,
            "temperature": 1.0 / self.lam if self.lam > 0 else None,
        }
        if self.isolated is not None:
            xs = self.isolated
            info.update(limit="isolated", polished=True, polish_distance=_distance(xs, self.xs))
        elif self.xs is None:  # not a single accepted step
            xs = [np.asarray(t) for t in targets]
            info.update(limit="none", polished=False)
        elif stop_reason == "left_branch":
            xs = self.xs
            info.update(limit="none", polished=False)
        else:
            xs, limit_info = self._limit_end()
            info.update(limit_info)
        info.update(
            degenerate=self.degenerate is not None,
            polish_attempts=self.polish_attempts,
            polish_iterations=self.polish_iterations,
            exploitability=self._exploitability(xs),
        )
        return xs, info

    def _limit_end(self):
        """The extrapolated limit polished onto the equilibrium set (or the exact point nearest to it)."""
        sizes = [len(x) for x in self.xs]
        estimate = _split(self.limit.estimate() if self.limit.points else np.concatenate(self.xs), sizes)
        candidates = [(xs, True) for xs in self._projections(estimate)] + [(estimate, False), (self.xs, False)]
        if self.degenerate is not None:
            candidates.append((self.degenerate, True))
        xs, polished, distance = self._pick(candidates, estimate)
        if self.limit.change <= _LIMIT_TOL:
            how = "extrapolated"
        elif self.lam >= _LIMIT_MAX_LAMBDA:
            how = "max_lambda"
        else:
            how = "trace_stopped"
        change = self.limit.change
        info = {
            "limit": how,
            "polished": polished,
            "limit_distance": distance,
            "limit_change": change if np.isfinite(change) else None,
        }
        if polished:
            info["polish_distance"] = _distance(xs, self.xs)
        return xs, info

    def _pick(self, candidates, estimate):
        """(xs, polished, distance to the estimate) of the candidate taken for the end.

        Polished points as close to the estimate as its own accuracy: the most exact, then the closest;
        else the exact (<= tol) candidate closest to the estimate; else the least exploitable one.
        """
        scored = [(self._exploitability(xs), _distance(xs, estimate), xs, polished) for xs, polished in candidates]
        exact = [c for c in scored if c[0] <= self.tol]
        near = max(_PROJECTION_DISTANCE, 10.0 * self.limit.change)
        preferred = [c for c in exact if c[3] and c[1] <= near]
        if preferred:
            best = min(preferred, key=lambda c: (c[0] > _MACHINE_EXACT, c[1]))
        elif exact:
            best = min(exact, key=lambda c: c[1])
        else:
            best = min(scored, key=lambda c: c[0])
        return best[2], best[3], best[1]

    def _projections(self, estimate):
        """Polishes of `estimate` on supports read off it (its best responses within a few value gaps,
        its probabilities above a few cut-offs) and on the supports read off the last branch point."""
        gaps = [v.max() - v for v in self.values_fn(estimate)]
        supports = [[np.flatnonzero(g <= gap) for g in gaps] for gap in _PROJECTION_GAPS]
        supports += [[np.flatnonzero(x > cut) for x in estimate] for cut in _PROJECTION_CUTS]
        supports += list(_candidate_supports(self.values, self.lam))
        tried, out = set(), []
        for support in supports:
            key = tuple(tuple(s) for s in support)
            if key in tried or any(len(s) == 0 for s in support):
                continue
            tried.add(key)
            polished, iterations = project(self.game, estimate, support)
            self.polish_attempts += 1
            self.polish_iterations += iterations
            if polished is not None:
                out.append(polished)
        return out


def _distance(xs, ys) -> float:
    return sum(float(np.abs(x - y).sum()) for x, y in zip(xs, ys))


def _split(flat: np.ndarray, sizes) -> list[np.ndarray]:
    parts = np.split(np.clip(flat, 0.0, None), np.cumsum(sizes)[:-1])
    return [p / p.sum() for p in parts]
