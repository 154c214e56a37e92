"""Bootstrap confidence for equilibrium ratings: intervals, rank probabilities, top-k probabilities.

Each replicate re-solves the king-of-the-hill game (paper Section 3.1) exactly as the full data is
solved — the same solution concept and selection target (`solvers.nash.limiting_logit` LLE,
`solvers.cce.max_entropy` max relative entropy) — and stores the king's ratings (paper eq. 1). A CCE
replicate's dual solve starts from the full data's multipliers: the maximum relative entropy CCE is
unique and the stopping test is the same, so this changes only the number of Newton steps (about half
as many at 18 x 65). Two schemes:

- "prompts": the P prompt slices of u_king[P, M, M] drawn with replacement.
- "judgments" (judge noise): every order of every cell (prompt p, model a as A, model b as B) moves
  by a draw of its mean score from the Dirichlet posterior of its score distribution, minus that
  posterior's mean. The posterior's atoms are the order's k ok judgments (weight 1 each) and a prior
  worth one judgment, half scoring +1 and half -1 (for +-1 verdicts: Jeffreys' Beta(1/2, 1/2) on the
  win probability); an order's move then has variance sigma^2 / (k + 2), sigma^2 the variance of the
  atoms' scores. The cell stays the position-balanced mean u = 1/2 [mean(a as A) - mean(b as A)]
  (docs/game.md#the-payoff-tensor), centred on the full-data cell (`judgment_replicate`), which keeps the
  judge-weighted cell as the centre for pooled judges. Unlike resampling the k scores, an order whose
  judgments all agree still moves (eight wins in eight do not make a certain win) and one judgment per
  order is enough. Under resampling such cells stayed fixed, and NE ratings, which rest on the most
  one-sided cells, got intervals that held the true rating in 84% (grid payoffs) and 78% (smooth) of
  cases; now 100% and 95% (bench/coverage.py). A cell judged in one order only (`--orders any`) moves
  with that order's mean; imputed cells do not move.

Clone prompts. A prompt replicate holds ~63% of the distinct prompts, some several times. Exact copies
of a prompt are clones, so the affinity target (Section 3.3, App. B) splits the mass of one prompt among
its copies and the affinity NE / CCE of the replicate equals that of the game of its distinct prompts:
the interval of `ne` / `cce` measures how the ratings depend on *which distinct prompts are present*,
not on how often each was drawn. For a rating that is smooth in the prompts this spread is that of a
~63% subsample without replacement, about sqrt(1/0.632 - 1) ~ 0.76 of the sampling spread of a
P-prompt sample: read these intervals as a sensitivity band, not as calibrated 95% confidence. The
Shannon variants (uniform target) count copies: their replicate equals the distinct-prompt game with
the prompt target proportional to the copy counts (the ordinary bootstrap of a weighted game). Both
identities are used to solve the smaller distinct-prompt game (tests/test_bootstrap.py checks them).

Twins. "ne" and "ne-shannon" (and "cce" and "cce-shannon") call one solver with the affinity and the
uniform target. On a replicate whose prompts are distinct and hold no (near-)clones, the affinity target
is uniform and the two select the same equilibrium (`twins_agree`, the test the rate flow restates the
full data's twin on): a unit of replicates holds both methods (`twin_groups`) and solves the second only
where they differ, which is every prompt replicate and, on data without clones, no judgment replicate.

Intervals: the central `confidence` percentile range of the replicates, widened to hold the full-data
rating shown beside it (`solvers.bootstrap.intervals`, which says why this construction): under "judgments" a
cell at +-1 only moves inward, so with unanimous cells the replicates can all sit to one side of it.

Ranks: per replicate, models whose ratings agree to `RANK_DECIMALS` decimals share their ranks evenly
(two models tied for first each get rank 1 and rank 2 with probability 1/2), so each replicate's rank
matrix is doubly stochastic and the probabilities sum to 1 per model and per rank. P(top-k) is the
sum of a model's probabilities of ranks 1..k.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from eqarena.methods import CCE, NASH, get_method
from eqarena.solvers.bootstrap.intervals import rating_interval
from eqarena.solvers.bootstrap.replicates import (  # noqa: F401  (one replicate's game and solve, re-exported)
    SCHEMES,
    Groups,
    judgment_replicate,
    judgment_rng,
    prompt_replicate,
    replicate_game,
    solve_king_ratings,
    twin_groups,
    twins_agree,
)
from eqarena.solvers.sparse.group_game import GroupReplicates

TOP_K = (1, 3)
RANK_DECIMALS = 6
CONFIDENCE = 0.95
_CHUNK = 8  # replicates per work unit of a worker process
_BATCH_CHUNK = 24  # ... when they are solved as batches (Settling.every when settling)


@dataclass(frozen=True, eq=False)
class BootstrapRatings:
    """One method's bootstrap under one scheme, over M models and B replicates.

    ratings (B, M): king ratings (eq. 1) of each replicate's equilibrium; exploitability (B,);
    rating (M,): the full-data ratings; lo, hi (M,): the percentile interval at `confidence` widened to
    hold `rating` (`solvers.bootstrap.intervals`); rank_probabilities (M, M): [model, rank - 1];
    top_k: {k: (M,) P(rank <= k)}.
    """

    method: str
    scheme: str
    ratings: np.ndarray
    exploitability: np.ndarray
    rating: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    rank_probabilities: np.ndarray
    top_k: dict[int, np.ndarray]
    confidence: float = CONFIDENCE
    seconds: float = 0.0
    diagnostics: dict = field(default_factory=dict)


def rank_probabilities(ratings: np.ndarray, decimals: int = RANK_DECIMALS) -> np.ndarray:
    """(M, M) [model, rank - 1] from replicate ratings (B, M); ties share their ranks evenly."""
    r = np.round(np.asarray(ratings, dtype=np.float64), decimals)
    m = r.shape[1]
    above = (r[:, None, :] > r[:, :, None]).sum(-1)  # (B, M): models rated strictly higher
    tied = (r[:, None, :] == r[:, :, None]).sum(-1)
    ranks = np.arange(m)[None, None, :]
    share = ((ranks >= above[..., None]) & (ranks < (above + tied)[..., None])) / tied[..., None]
    return share.mean(axis=0)


def summarise(
    method: str,
    scheme: str,
    ratings: np.ndarray,
    exploitability: np.ndarray,
    rating: np.ndarray,
    confidence: float = CONFIDENCE,
    seconds: float = 0.0,
) -> BootstrapRatings:
    """Interval around the full-data `rating` (M,), rank and top-k probabilities of replicate ratings (B, M)."""
    ratings = np.asarray(ratings, dtype=np.float64)
    rating = np.asarray(rating, dtype=np.float64)
    lo, hi = rating_interval(ratings, rating, confidence)
    probs = rank_probabilities(ratings)
    top = {k: probs[:, : min(k, probs.shape[1])].sum(axis=1) for k in TOP_K}
    expl = np.asarray(exploitability, dtype=np.float64)
    diag = {
        "replicates": len(ratings),
        "max_exploitability": float(expl.max(initial=0.0)),
        "above_1e-6": int(np.sum(expl > 1e-6)),
    }
    return BootstrapRatings(method, scheme, ratings, expl, rating, lo, hi, probs, top, confidence, seconds, diag)


# ------------------------------------------------------------------------------------ running them

Unit = tuple[tuple[str, ...], str, int, int]  # (methods solved together: `twin_groups`, scheme, first replicate, stop)
Solves = tuple[np.ndarray, np.ndarray, float]  # one method's ratings (n, M), exploitability (n,), seconds
UnitResult = tuple[tuple[str, ...], str, int, list[Solves]]  # a unit and its methods' solves, in its order


@dataclass(eq=False)
class ReplicateSolver:
    """The full data a bootstrap resamples, and the solve of a unit of replicates: (methods, scheme,
    first, stop) -> (methods, scheme, first, [(ratings (n, M), exploitability (n,), seconds) per
    method]). Picklable, so a caller may hand it to worker processes once and map units over them."""

    u_king: np.ndarray
    seed: int
    battles: Mapping[str, np.ndarray] | None = None
    imputed: np.ndarray | None = None
    batch_units: bool = False  # solve a unit's replicates of an NE method as one batch (`batched_bootstrap`)
    starts: Mapping[str, Sequence[np.ndarray]] | None = None  # {method: the full data's dual multipliers}
    source: GroupReplicates | None = None  # a prompt-group game: its "prompts" replicates refit the groups
    _groups: Groups | None = field(default=None, repr=False)
    _refits: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # a unit's group-game replicates

    def game(self, scheme: str, replicate: int) -> np.ndarray:
        """Replicate `replicate`'s tensor under `scheme`; depends only on (seed, scheme, replicate)."""
        if scheme == "prompts" and self.source is not None:  # a refit: kept while the unit needs it
            if replicate not in self._refits:
                rng = np.random.default_rng([self.seed, SCHEMES.index("prompts"), replicate])
                self._refits[replicate] = self.source.replicate(rng)
            return self._refits[replicate]
        if scheme == "prompts":
            return self.u_king[prompt_replicate(len(self.u_king), self.seed, replicate)]
        if self._groups is None:
            self._groups = Groups(self.u_king, self.battles, self.imputed)
        return self._groups.replicate(judgment_rng(self.seed, replicate))

    def start(self, method: str, scheme: str, replicate: int) -> list[np.ndarray] | None:
        """The full data's dual multipliers of `method` for replicate `replicate`'s prompts, if the method
        `warm_starts` (None if not): a start that leaves the replicate's equilibrium as it is. Multipliers
        not in `starts` are solved for here, once per process."""
        if not get_method(method).warm_starts:
            return None
        known = self.starts or {}
        full = known[method] if method in known else _full_multipliers(method, self.u_king)
        if method not in known:
            self.starts = {**known, method: full}
        if full is None:  # a solver that gave none
            return None
        prompts = full[0]
        if scheme == "prompts" and self.source is None:
            prompts = prompts[prompt_replicate(len(self.u_king), self.seed, replicate)]
        return [prompts, full[1], full[2]]

    def __call__(self, unit: Unit) -> UnitResult:
        """Solve the unit's replicates by its first method; by a twin after it (`twin_groups`), solve
        only the replicates where the two disagree (`twins_agree`) and take the first's elsewhere."""
        methods, scheme, first, stop = unit
        self._refits = {b: u for b, u in self._refits.items() if first <= b < stop}  # another unit's: dropped
        start = time.perf_counter()
        lead = self._solve(methods[0], scheme, range(first, stop))
        solved = [(*lead, time.perf_counter() - start)]
        for twin in methods[1:]:
            start = time.perf_counter()
            own = [b for b in range(first, stop) if not twins_agree(self.game(scheme, b))]
            ratings, expl = lead[0].copy(), lead[1].copy()
            if own:
                at = np.asarray(own) - first
                ratings[at], expl[at] = self._solve(twin, scheme, own)
            solved.append((ratings, expl, time.perf_counter() - start))
        return methods, scheme, first, solved

    def _solve(self, method: str, scheme: str, replicates: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """King ratings (n, M) and exploitability (n,) of `method` on each of `replicates`."""
        if self.batch_units and _batchable(method) and get_method(method).concept == NASH:  # CCE: one by one
            from eqarena.solvers.bootstrap.batched import batched_replicates

            ratings, expl, _ = batched_replicates(self, method, scheme, replicates)
            return ratings, expl
        solved = [solve_king_ratings(method, self.game(scheme, b), self.start(method, scheme, b)) for b in replicates]
        return np.stack([r for r, _ in solved]), np.asarray([e for _, e in solved])


def _full_multipliers(method: str, u_king: np.ndarray) -> list[np.ndarray]:
    """The dual multipliers of `method`'s equilibrium of the full data, one per action of each player."""
    from eqarena.solvers.games.equilibrium import solve_equilibrium
    from eqarena.solvers.games.normal_form import koth_game

    return solve_equilibrium(get_method(method), koth_game(u_king)).multipliers


def _batchable(method: str) -> bool:
    """Whether `method` has a batched solver: a CCE or NE method with the affinity or uniform target."""
    spec = get_method(method)
    return spec.concept in (CCE, NASH) and spec.target in ("affinity", "uniform")


UnitMap = Callable[[ReplicateSolver, Sequence[Unit]], Iterable[UnitResult]]


def serial_map(solver: ReplicateSolver, units: Sequence[Unit]) -> Iterator[UnitResult]:
    """Solve the units one after another in this process."""
    return map(solver, units)


@dataclass(frozen=True)
class Settling:
    """Stop adding replicates once the intervals have settled: from `min_replicates` on, every `every`
    replicates the percentile bounds of every method, scheme and model are compared with those
    `every` replicates earlier, and the bootstrap stops when, for every (method, scheme), the bounds
    moved by less than `tol` times its median interval width in root mean square over its models.

    The root mean square, not the largest move: each bound is a percentile of B replicates, whose Monte
    Carlo error shrinks like 1/sqrt(B) whatever the number of models, but the largest of 4M such errors
    grows with M (about 3 standard errors for 400 bounds). On an 805 x 52 table the largest move at 48
    replicates was 0.27-0.40 of the width while the root mean square was 0.07-0.10: a rule on the
    largest would need some 500 replicates there, beyond any default, and never stopped a bootstrap
    early. Deterministic: the replicates are the same, and are taken in the same order, on any machine."""

    tol: float = 0.1
    min_replicates: int = 48
    every: int = 24


def bootstrap_ratings(
    u_king,
    methods: Sequence[str],
    *,
    replicates: int = 200,
    seed: int = 0,
    schemes: Sequence[str] = SCHEMES,
    battles: Mapping[str, np.ndarray] | None = None,
    imputed: np.ndarray | None = None,
    map_units: UnitMap = serial_map,
    confidence: float = CONFIDENCE,
    batched: bool | None = None,
    settling: Settling | None = None,
    progress: Callable[[int], None] | None = None,
    full: Mapping[str, np.ndarray] | None = None,
    starts: Mapping[str, Sequence[np.ndarray]] | None = None,
    source: GroupReplicates | None = None,
    deadline: float | None = None,
    unit_size: int | None = None,
) -> list[BootstrapRatings]:
    """Bootstrap every equilibrium method of `methods` (names of the method registry) under every
    scheme of `schemes`.

    u_king (P, M, M): the full-data tensor; battles: the ok judgments behind it (needed for
    "judgments"; `warehouse.tensor.read_battles` layout); imputed (P, M, M) bool or None. Replicate b
    of a scheme is the same game for every method (common random numbers) and depends only on
    (seed, scheme, b), not on how `map_units` spreads the units of replicates (default: this
    process, one after another). batched: True solves all replicates of each CCE and NE method as
    batches in this process (`solvers.cce.batched`, `solvers.nash.batched`; CCE replicates the batch
    cannot take, or that end above 1e-6, are re-solved one by one: diagnostics["fallback"]; NE replicates
    are retraced on the lanes as `nash` retraces them); False solves every
    replicate one by one; None (default) is True when JAX runs on an accelerator, where it pays
    (bench/batched.py), and on a CPU solves each unit of NE replicates as one batch on one lane where
    that pays (`batched_bootstrap.batches_pay`: up to 200 models). settling: stop before `replicates` once the
    intervals settle (`Settling`; not for the methods batched in this process); diagnostics["stopped"]
    says why the bootstrap ended.
    progress: called with the number of replicates done (per method and scheme) as they complete.
    full: {method: (M,)} the full-data ratings the intervals must hold (the ones shown beside them);
    a method missing from it is solved here (`solve_king_ratings`).
    starts: {method: the full data's dual multipliers (`Equilibrium.multipliers`)} of methods that
    `warm_starts` (the CCEs); their replicates are solved from there, which gives the same equilibrium in
    fewer steps. A method that warm-starts and is missing from it is solved once for them.
    source: the replicates of a prompt-group game (`solvers.sparse.group_game`): its "prompts" replicates draw the
    log's prompts and refit the groups, instead of drawing u_king's slices.
    deadline: a `time.perf_counter()` after which no further block of replicates is waited for (the ones
    done are kept, at least one block; diagnostics["stopped"] says so). unit_size: replicates per work
    unit (default 8, or a settling check's worth when batched): 1 for replicates that take seconds each,
    so that the deadline and the progress see each one.
    Returns one BootstrapRatings per (method, scheme), methods outer.
    """
    if any(not get_method(m).is_equilibrium for m in methods) or any(s not in SCHEMES for s in schemes):
        raise ValueError(f"methods must be equilibrium methods of the registry, schemes among {SCHEMES}")
    if replicates < 2:
        raise ValueError(f"replicates must be >= 2; got {replicates}")
    if "judgments" in schemes and battles is None:
        raise ValueError('the "judgments" scheme needs the battles behind u_king')
    u_king = np.asarray(u_king, dtype=np.float64)
    batch_units = False
    if batched is None:
        batched = accelerated()
        if not batched:
            from eqarena.solvers.bootstrap.batched import batches_pay

            batch_units = batches_pay(u_king.shape)
    together = {m for m in methods if batched and _batchable(m)}
    known = dict(starts or {})  # solved here before the workers need them (batches need them only to fall back)
    starts = {
        m: known[m] if m in known else _full_multipliers(m, u_king)
        for m in methods
        if get_method(m).warm_starts and (m in known or m not in together)
    }
    solver = ReplicateSolver(u_king, seed, battles, imputed, batch_units, starts, source)
    chunk = unit_size or ((settling.every if settling else _BATCH_CHUNK) if batch_units else _CHUNK)
    groups = twin_groups([m for m in methods if m not in together])
    units = [
        (g, s, b, min(b + chunk, replicates)) for b in range(0, replicates, chunk) for s in schemes for g in groups
    ]
    blocks = _Blocks(replicates, chunk, len(schemes) * len(groups) or 1, progress, deadline)
    watch = _SettleWatch(settling, confidence) if settling and not together else None
    collected, stopped = _collect(map_units(solver, units) if units else iter(()), blocks, watch)
    fallbacks: dict[tuple[str, str], int] = {}
    for m in [m for m in methods if m in together]:
        from eqarena.solvers.bootstrap.batched import batched_replicates

        for s in schemes:
            start = time.perf_counter()
            r, e, fallbacks[(m, s)] = batched_replicates(solver, m, s, replicates)
            collected[(m, s)] = [(0, r, e, time.perf_counter() - start)]
    out = []
    for m in methods:
        rating = full[m] if full is not None and m in full else solve_king_ratings(m, solver.u_king)[0]
        for s in schemes:
            out.append(_summary(m, s, collected[(m, s)], rating, confidence))
            out[-1].diagnostics.update(batched=(m, s) in fallbacks, fallback=fallbacks.get((m, s), 0), stopped=stopped)
    return out


@dataclass(frozen=True)
class _Blocks:
    """How units complete into blocks of replicates: `chunk` replicates a unit, `per_block` units a block
    (every method group and scheme); what to call with each block done, and when the time is up."""

    replicates: int
    chunk: int
    per_block: int
    progress: Callable[[int], None] | None
    deadline: float | None


def _collect(results: Iterable[UnitResult], blocks: _Blocks, watch: _SettleWatch | None) -> tuple[dict, str]:
    """The units' solves by (method, scheme), as (first replicate, ratings, exploitability, seconds), and why
    the bootstrap stopped: all replicates, settled (`watch`) or the time limit, checked after each block of
    replicates; stopped early, only the replicates below the last whole block are kept."""
    collected: dict[tuple[str, str], list] = {}
    done, finished, stopped = 0, 0, "all replicates"
    try:
        for unit_methods, scheme, first, solved in results:
            for method, (r, e, sec) in zip(unit_methods, solved):
                collected.setdefault((method, scheme), []).append((first, r, e, sec))
            finished += 1
            if finished % blocks.per_block:
                continue
            done = min(first + blocks.chunk, blocks.replicates)  # units complete in order: all below are done
            if blocks.progress is not None:
                blocks.progress(done)
            if done < blocks.replicates and watch is not None and watch.settled(done, collected):
                tol = watch.settling.tol
                stopped = f"settled: the bounds moved less than {tol:g} of the intervals' width (root mean square)"
                break
            if blocks.deadline is not None and done < blocks.replicates and time.perf_counter() > blocks.deadline:
                if done >= 2:
                    stopped = "time limit: the replicates done when the bootstrap's time ran out"
                    break
    finally:  # settled, or an error or interrupt raised here: a worker pool's map stops its workers now
        close = getattr(results, "close", None)
        if close is not None:
            close()
    if stopped != "all replicates":
        collected = {key: [p for p in parts if p[0] < done] for key, parts in collected.items()}
    return collected, stopped


def _summary(method: str, scheme: str, parts: list, rating: np.ndarray, confidence: float) -> BootstrapRatings:
    """`summarise` of one (method, scheme)'s collected units, in replicate order."""
    parts = sorted(parts, key=lambda p: p[0])
    ratings = np.concatenate([p[1] for p in parts])
    exploitability = np.concatenate([p[2] for p in parts])
    return summarise(method, scheme, ratings, exploitability, rating, confidence, sum(p[3] for p in parts))


_WIDTH_FLOOR = 1e-3  # intervals narrower than this count as this wide (a point mass settles at once)


class _SettleWatch:
    """The bounds of every (method, scheme) at the last check, to tell when they stop moving."""

    def __init__(self, settling: Settling, confidence: float):
        self.settling, self.tail = settling, 100.0 * (1.0 - confidence) / 2.0
        self.last: dict[tuple[str, str], np.ndarray] = {}
        self.checked = 0

    def settled(self, done: int, collected: dict[tuple[str, str], list]) -> bool:
        if done < self.settling.min_replicates - self.settling.every or done - self.checked < self.settling.every:
            return False
        self.checked = done
        bounds = {
            key: np.percentile(
                np.concatenate([p[1] for p in sorted(parts, key=lambda p: p[0])])[:done],
                [self.tail, 100.0 - self.tail],
                axis=0,
            )
            for key, parts in collected.items()
        }
        moved = max((bound_moves(bounds[k], self.last[k]) for k in bounds if k in self.last), default=np.inf)
        self.last = bounds
        return done >= self.settling.min_replicates and moved < self.settling.tol


def bound_moves(bounds: np.ndarray, before: np.ndarray) -> float:
    """How far interval bounds (2, M) moved from `before` (2, M): the root mean square of the moves over
    the M models' two bounds, in units of the median interval width (at least `_WIDTH_FLOOR`)."""
    width = max(float(np.median(bounds[1] - bounds[0])), _WIDTH_FLOOR)
    return float(np.sqrt(np.mean((bounds - before) ** 2))) / width


def accelerated() -> bool:
    """Whether JAX's default device is an accelerator (GPU, TPU): there batched solves pay."""
    import jax

    return jax.default_backend() != "cpu"
