"""Adaptive judging: which cells to judge next so that the NE model ranking becomes certain quickly.

State: per ordered cell (p, a, b) (model a shown first) the number, sum and sum of squares of the
judged scores. u_king(p, i, j) = 1/2 [mean(i as A) - mean(j as A)] on cells judged in both orders
(DESIGN.md, "The game"); the other cells are filled explicitly by `solvers.imputation.impute_payoffs`.

Loop (`adaptive_judging`): a seeded random design (every model pair on `initial_prompts` prompts, one
sample per order), then rounds of: rate (LLE with the affinity target, `solvers.nash`) -> uncertainty
(parametric cell bootstrap, below) -> stop? -> judge the `batch` cells of highest priority.

Uncertainty proxy (documented, not the prompt bootstrap of `solvers.bootstrap`): replicate b redraws
every cell as clip(u + sd * N(0, 1), -1, 1) (antisymmetric), sd = sqrt(v / n) on judged cells (n
samples over both orders, v their variance shrunk towards `prior_variance` with weight one sample) and
sd = sqrt(prior_variance) on imputed cells, then re-solves the NE. `adjacent_order_probabilities` is
the share of replicates in which each adjacent pair of the full-data ranking keeps its relation (>, or
= within `tie_tol` for models tied in the support).

Priority of an unordered cell (p, i, j): sensitivity x sd. A king rating is u(i, x_rebel, x_prompt) -
value, so d rating_i / d u(p, i, j) = x_prompt[p] x_rebel[j]; with masses softened towards the near
support (x + softmax(rating / `temperature`), renormalised) and each model weighted by how unsure its
place is (`need_i` = max over its adjacent pairs of 1 - P(order), floor `need_floor`):
    priority = x~_prompt[p] (x~_rebel[j] need_i + x~_rebel[i] need_j) sd(p, i, j).
Ties are broken by a seeded random order; cells at `max_samples_per_order` are never chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from solvers.games import KING, PROMPT, REBEL, koth_game
from solvers.imputation import impute_payoffs
from solvers.nash import nash

Requests = np.ndarray  # (K, 3) int: prompt, model shown as A, model shown as B
Judge = Callable[[Requests], np.ndarray]  # scores (K,) for model A in [-1, 1], NaN for a failed call

STOP_CONFIDENT, STOP_BUDGET, STOP_EXHAUSTED = "confident", "budget", "exhausted"


@dataclass
class CellStats:
    """Judged scores per ordered cell, arrays (P, M, M): counts n, sums s, sums of squares ss, and
    `tried` (calls made, failed ones included: the per-order sample cap counts these)."""

    n: np.ndarray
    s: np.ndarray
    ss: np.ndarray
    tried: np.ndarray

    @classmethod
    def empty(cls, num_prompts: int, num_models: int) -> CellStats:
        shape = (num_prompts, num_models, num_models)
        return cls(np.zeros(shape, int), np.zeros(shape), np.zeros(shape), np.zeros(shape, int))

    def add(self, requests: Requests, scores: np.ndarray) -> None:
        """Record the scores of requests (NaN scores are failed calls: only counted in `tried`)."""
        np.add.at(self.tried, tuple(requests.T), 1)
        ok = ~np.isnan(scores)
        p, a, b = requests[ok].T
        np.add.at(self.n, (p, a, b), 1)
        np.add.at(self.s, (p, a, b), scores[ok])
        np.add.at(self.ss, (p, a, b), scores[ok] ** 2)

    @property
    def covered(self) -> np.ndarray:
        """(P, M, M) bool, symmetric: both orders judged (the diagonal counts as covered)."""
        both = (self.n > 0) & (self.n.transpose(0, 2, 1) > 0)
        return both | np.eye(self.n.shape[1], dtype=bool)[None]

    def u_king(self) -> np.ndarray:
        """Position-balanced means on covered cells, NaN elsewhere (0 on the diagonal)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = self.s / self.n
        u = 0.5 * (mean - mean.transpose(0, 2, 1))
        return np.where(self.covered, np.nan_to_num(u), np.nan)


@dataclass(frozen=True)
class Rating:
    """One round's NE (affinity target) on the imputed tensor: masses and ratings per player."""

    u_king: np.ndarray          # (P, M, M), imputed
    imputed: np.ndarray         # (P, M, M) bool
    masses: list[np.ndarray]    # [prompt (P,), king (M,), rebel (M,)]
    ratings: list[np.ndarray]


def rate(stats: CellStats) -> Rating:
    """Impute the uncovered cells (prompt-wise BT, solvers.imputation) and solve the affinity LLE."""
    covered = stats.covered
    u = stats.u_king()
    if covered.all():
        filled, imputed = u, np.zeros_like(covered)
    else:
        result = impute_payoffs(u, covered)
        filled, imputed = np.asarray(result.u_king, float), np.asarray(result.imputed, bool)
    eq = nash(koth_game(filled), target="affinity")
    return Rating(filled, imputed, [np.asarray(m, float) for m in eq.marginals],
                  [np.asarray(r, float) for r in eq.ratings])


def cell_sd(stats: CellStats, prior_variance: float) -> np.ndarray:
    """(P, M, M) sd of u_king per cell (module docstring); sqrt(prior_variance) where uncovered."""
    n = stats.n + stats.n.transpose(0, 2, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = stats.s / stats.n
        dev = np.nan_to_num(stats.ss - stats.n * mean ** 2)
    dev = dev + dev.transpose(0, 2, 1)
    var = (prior_variance + np.maximum(dev, 0.0)) / (1 + np.maximum(n - 1, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(var / np.maximum(n, 1))
    return np.where(stats.covered, sd, np.sqrt(prior_variance)) * (1 - np.eye(n.shape[1]))[None]


def ranking(ratings: np.ndarray) -> np.ndarray:
    """Models best first (ties: lower index first)."""
    return np.lexsort((np.arange(len(ratings)), -np.asarray(ratings)))


def _relation(x: np.ndarray, tie_tol: float) -> np.ndarray:
    return np.where(np.abs(x) <= tie_tol, 0, np.sign(x))


def adjacent_order_probabilities(full: np.ndarray, replicates: np.ndarray, tie_tol: float = 1e-6) -> np.ndarray:
    """(M - 1,) P(adjacent pair k of ranking(full) keeps its relation) over replicates (B, M)."""
    order = ranking(full)
    hi, lo = order[:-1], order[1:]
    want = _relation(full[hi] - full[lo], tie_tol)
    got = _relation(replicates[:, hi] - replicates[:, lo], tie_tol)
    return (got == want[None]).mean(axis=0)


def replicate_ratings(rating: Rating, sd: np.ndarray, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(B, M) NE king ratings of parametric cell replicates (module docstring)."""
    P, M, _ = sd.shape
    upper = np.triu(np.ones((M, M), bool), 1)[None]
    out = np.empty((replicates, M))
    for b in range(replicates):
        noise = np.where(upper, rng.standard_normal((P, M, M)) * sd, 0.0)
        u = np.clip(rating.u_king + noise - noise.transpose(0, 2, 1), -1.0, 1.0)
        out[b] = np.asarray(nash(koth_game(u), target="affinity").ratings[KING], float)
    return out


def stop_reason(probabilities: np.ndarray, calls: int, max_calls: int | None, threshold: float) -> str | None:
    """"confident" when every adjacent pair is ordered with probability >= threshold, "budget" when
    `calls` reached `max_calls`, else None (confidence wins when both hold)."""
    if len(probabilities) == 0 or np.all(probabilities >= threshold):
        return STOP_CONFIDENT
    if max_calls is not None and calls >= max_calls:
        return STOP_BUDGET
    return None


def _softened(mass: np.ndarray, rating: np.ndarray, temperature: float) -> np.ndarray:
    z = np.exp((rating - rating.max()) / temperature)
    x = mass + z / z.sum()
    return x / x.sum()


def model_need(full: np.ndarray, probabilities: np.ndarray, floor: float) -> np.ndarray:
    """(M,) max over a model's adjacent pairs of 1 - P(order), at least `floor`."""
    order = ranking(full)
    need = np.full(len(full), floor)
    for k, p in enumerate(probabilities):
        for m in (order[k], order[k + 1]):
            need[m] = max(need[m], 1.0 - p)
    return need


def cell_priority(rating: Rating, sd: np.ndarray, need: np.ndarray, temperature: float = 0.05) -> np.ndarray:
    """(P, M, M) priority of each unordered cell, upper triangle (i < j) only (module docstring)."""
    xp = _softened(rating.masses[PROMPT], rating.ratings[PROMPT], temperature)
    xr = _softened(rating.masses[REBEL], rating.ratings[REBEL], temperature)
    pair = xr[None, :] * need[:, None]        # [i, j] = x~_rebel[j] need_i
    pair = pair + pair.T
    M = len(need)
    return xp[:, None, None] * pair[None] * sd * np.triu(np.ones((M, M)), 1)[None]


def select_cells(priority: np.ndarray, stats: CellStats, batch: int, rng: np.random.Generator,
                 max_samples_per_order: int | None = None) -> np.ndarray:
    """(K, 3) unordered cells (p, i, j), i < j, K <= batch: highest priority first, seeded tie-breaks."""
    P, M, _ = priority.shape
    allowed = np.triu(np.ones((M, M), bool), 1)[None] & np.ones((P, 1, 1), bool)
    if max_samples_per_order is not None:
        allowed &= (stats.tried < max_samples_per_order) & (stats.tried.transpose(0, 2, 1) < max_samples_per_order)
    idx = np.flatnonzero(allowed)
    if len(idx) == 0:
        return np.zeros((0, 3), int)
    idx = idx[rng.permutation(len(idx))]
    chosen = idx[np.argsort(-priority.ravel()[idx], kind="stable")[:batch]]
    return np.stack(np.unravel_index(chosen, priority.shape), axis=1)


def both_orders(cells: np.ndarray) -> Requests:
    """(2K, 3) requests: each cell (p, i, j) with i shown first, then with j shown first."""
    return np.concatenate([cells, cells[:, [0, 2, 1]]]) if len(cells) else np.zeros((0, 3), int)


def initial_design(num_prompts: int, num_models: int, prompts: int, seed: int) -> np.ndarray:
    """(K, 3) every model pair on `prompts` prompts drawn without replacement (seeded)."""
    chosen = np.sort(np.random.default_rng([seed, 0]).choice(num_prompts, size=min(prompts, num_prompts),
                                                             replace=False))
    i, j = np.triu_indices(num_models, 1)
    return np.array([(p, a, b) for p in chosen for a, b in zip(i, j)], dtype=int)


@dataclass
class AdaptiveResult:
    """Per round: calls made so far, the NE king ratings, the adjacent-pair probabilities; why it stopped."""

    stats: CellStats
    calls: list[int] = field(default_factory=list)
    ratings: list[np.ndarray] = field(default_factory=list)
    probabilities: list[np.ndarray] = field(default_factory=list)
    stopped_by: str | None = None


def adaptive_judging(judge: Judge, num_prompts: int, num_models: int, *, max_calls: int | None = None,
                     batch_calls: int = 200, stop_probability: float = 0.95, initial_prompts: int = 5,
                     replicates: int = 30, prior_variance: float = 0.5, max_samples_per_order: int | None = None,
                     strategy: str = "adaptive", seed: int = 0, initial: CellStats | None = None,
                     on_round: Callable[[AdaptiveResult], None] | None = None) -> AdaptiveResult:
    """Judge adaptively (module docstring) through `judge`; `strategy="uniform"` picks uniformly among
    the allowed cells instead (the baseline). Each chosen cell costs 2 calls (both orders). `initial`:
    judgments held already (not counted as calls); when it has any, the random design is skipped."""
    if strategy not in ("adaptive", "uniform"):
        raise ValueError(f"strategy must be 'adaptive' or 'uniform', got {strategy!r}")
    stats = initial if initial is not None else CellStats.empty(num_prompts, num_models)
    result = AdaptiveResult(stats)
    held = initial is not None and stats.n.sum() > 0
    cells = np.zeros((0, 3), int) if held else initial_design(num_prompts, num_models, initial_prompts, seed)
    calls, round_ = 0, 0
    while True:
        if max_calls is not None:
            cells = cells[: max(0, (max_calls - calls) // 2)]
        requests = both_orders(cells)
        if len(requests):
            stats.add(requests, np.asarray(judge(requests), float))
            calls += len(requests)
        round_ += 1
        rng = np.random.default_rng([seed, round_])
        rating = rate(stats)
        sd = cell_sd(stats, prior_variance)
        reps = replicate_ratings(rating, sd, replicates, rng)
        probs = adjacent_order_probabilities(rating.ratings[KING], reps)
        result.calls.append(calls)
        result.ratings.append(rating.ratings[KING])
        result.probabilities.append(probs)
        if on_round is not None:
            on_round(result)
        result.stopped_by = stop_reason(probs, calls, max_calls, stop_probability)
        if result.stopped_by is None and not len(requests) and (round_ > 1 or not held):
            result.stopped_by = STOP_EXHAUSTED
        if result.stopped_by is not None:
            return result
        k = max(1, batch_calls // 2)
        if strategy == "uniform":
            priority = np.ones_like(sd)
        else:
            priority = cell_priority(rating, sd, model_need(rating.ratings[KING], probs, 0.05))
        cells = select_cells(priority, stats, k, rng, max_samples_per_order)
