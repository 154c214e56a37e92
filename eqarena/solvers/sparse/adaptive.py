"""Adaptive judging: which cells to judge next so that the NE model ranking becomes certain quickly.

State: per ordered cell (p, a, b) (model a shown first) the number, sum and sum of squares of the
judged scores. u_king(p, i, j) = 1/2 [mean(i as A) - mean(j as A)] on cells judged in both orders
(docs/game.md#the-payoff-tensor); the other cells are filled explicitly by `solvers.sparse.imputation.impute_payoffs`.

Loop (`adaptive_judging`): a seeded random design (every model pair on `initial_prompts` prompts, one
sample per order), then rounds of: rate (LLE with the affinity target, `solvers.nash.limiting_logit`) -> uncertainty
(parametric cell replicates, below) -> stop? -> judge the `batch` cells of highest priority.

Uncertainty (a documented proxy, not the prompt bootstrap of `solvers.bootstrap.confidence`): replicate b redraws
every cell as clip(u + sd * N(0, 1), -1, 1) (antisymmetric) and re-solves the NE. On judged cells
sd = sqrt(v / n) (n samples over both orders, v their variance shrunk towards `prior_variance` with
weight one sample); on imputed cells sd is the pair's root-mean-square residual of its judged cells
around the global Bradley-Terry prediction (`imputation_sd`): how far a prompt can depart from the
average, learnt from the judged prompts. `adjacent_order_probabilities` is the share of replicates in
which each adjacent pair of the current ranking keeps its relation (>, or = within `tie_tol` for
models tied in the support); `tie_probabilities` the share in which the pair's ratings differ by at
most `indifference`.

Stop rule (`stop_reason`): every adjacent pair settled with probability >= `stop_probability`, either
ordered or tied within the indifference zone (two models closer than `indifference` need not be
ordered), or the call budget spent, or no cell left to judge.

Priority of an unordered cell (p, i, j): relevance x sd, relevance = ratings term + `rebel_check` x
rebel term + `discovery` x support term, each normalised to sum 1.
- Ratings term (Thompson-style): a king rating is u(i, x_rebel, x_prompt) - value, so d rating_i /
  d u(p, i, j) = x_prompt[p] x_rebel[j]; it averages x_prompt[p] (x_rebel[j] need_i + x_rebel[i] need_j)
  over the equilibria of the replicates and the current one (masses softened towards the near support
  by softmax(rating / `temperature`)). need_i = max over model i's adjacent pairs of 1 - P(settled),
  floor 0.05.
- Rebel term (`rebel_relevance`): the equilibrium holds only while no rebel gains by deviating, and
  d u_rebel(j) / d u(p, i, j) = -x_prompt[p] x_king[i] for every rebel j, in the mix or not (a rebel outside
  it is kept out by exactly these cells); so x_prompt[p] (x_king[i] + x_king[j]), averaged as above. Without
  it a king whose rebel mix is pure is never checked against the other rebels on its support prompts.
- Support term (`support_relevance`): which prompts belong to the support is decided by the king x
  rebel cells; a prompt is weighted by the chance that its true rating is at the support's level, its
  sd from the cells' sds plus, on imputed cells, a prompt effect shared by them (`prompt_effect_variance`).
A share `explore` of each batch is drawn uniformly at random instead. Ties are broken by a seeded random
order; cells at `max_samples_per_order` are never chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from eqarena.solvers.games.normal_form import KING, PROMPT, REBEL, koth_game
from eqarena.solvers.nash.limiting_logit import nash
from eqarena.solvers.sparse.imputation import ImputationError, impute_payoffs

Requests = np.ndarray  # (K, 3) int: prompt, model shown as A, model shown as B
Judge = Callable[[Requests], np.ndarray]  # scores (K,) for model A in [-1, 1], NaN: failed, NOT_SENT: not sent
NOT_SENT = np.inf  # a judge's score for a request it did not send (a cap of the caller refused it)

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
        """Record the scores of requests (NaN scores are failed calls: only counted in `tried`;
        NOT_SENT ones are not counted)."""
        sent = scores != NOT_SENT
        requests, scores = requests[sent], scores[sent]
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
    """One round's NE (affinity target) on the imputed tensor: masses and ratings per player, and the
    global Bradley-Terry prediction (M, M) that an unjudged prompt's cells are imputed towards."""

    u_king: np.ndarray  # (P, M, M), imputed
    imputed: np.ndarray  # (P, M, M) bool
    masses: list[np.ndarray]  # [prompt (P,), king (M,), rebel (M,)]
    ratings: list[np.ndarray]
    global_prediction: np.ndarray


def rate(stats: CellStats) -> Rating:
    """Impute the uncovered cells (prompt-wise BT, solvers.sparse.imputation) and solve the affinity LLE."""
    covered = stats.covered
    u = stats.u_king()
    M = u.shape[1]
    if covered.all():
        filled, imputed, beta = u, np.zeros_like(covered), np.zeros(M)
    else:
        result = impute_payoffs(u, covered)
        filled, imputed = np.asarray(result.u_king, float), np.asarray(result.imputed, bool)
        beta = np.asarray(result.strengths, float)
    eq = nash(koth_game(filled), target="affinity")
    return Rating(
        filled,
        imputed,
        [np.asarray(m, float) for m in eq.marginals],
        [np.asarray(r, float) for r in eq.ratings],
        np.tanh((beta[:, None] - beta[None, :]) / 2),
    )


def imputation_sd(stats: CellStats, rating: Rating, pseudo_cells: float = 5.0) -> np.ndarray:
    """(M, M) sd of an unjudged cell of each pair: the root mean square of the pair's judged cells
    around the global Bradley-Terry prediction, shrunk towards all pairs' with `pseudo_cells` cells."""
    covered = stats.covered & ~np.eye(stats.n.shape[1], dtype=bool)[None]
    residual = np.where(covered, stats.u_king() - rating.global_prediction[None], 0.0) ** 2
    cells = covered.sum(axis=0)
    overall = residual.sum() / cells.sum() if cells.sum() else 0.5
    return np.sqrt((residual.sum(axis=0) + pseudo_cells * overall) / (cells + pseudo_cells))


def cell_sd(stats: CellStats, rating: Rating, prior_variance: float) -> np.ndarray:
    """(P, M, M) sd of u_king per cell (module docstring); `imputation_sd` where uncovered."""
    n = stats.n + stats.n.transpose(0, 2, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = stats.s / stats.n
        dev = np.nan_to_num(stats.ss - stats.n * mean**2)
    dev = dev + dev.transpose(0, 2, 1)
    var = (prior_variance + np.maximum(dev, 0.0)) / (1 + np.maximum(n - 1, 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(var / np.maximum(n, 1))
    M = n.shape[1]
    return np.where(stats.covered, sd, imputation_sd(stats, rating)[None]) * (1 - np.eye(M))[None]


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


@dataclass(frozen=True)
class Replicates:
    """NE of B parametric cell replicates: king ratings (B, M), prompt masses (B, P), rebel and king masses (B, M)."""

    ratings: np.ndarray
    prompt_masses: np.ndarray
    rebel_masses: np.ndarray
    king_masses: np.ndarray


def replicate_equilibria(rating: Rating, sd: np.ndarray, replicates: int, rng: np.random.Generator) -> Replicates:
    """NE (affinity LLE) of `replicates` parametric cell replicates (module docstring)."""
    P, M, _ = sd.shape
    upper = np.triu(np.ones((M, M), bool), 1)[None]
    ratings, prompts = np.empty((replicates, M)), np.empty((replicates, P))
    rebels, kings = np.empty((replicates, M)), np.empty((replicates, M))
    for b in range(replicates):
        noise = np.where(upper, rng.standard_normal((P, M, M)) * sd, 0.0)
        u = np.clip(rating.u_king + noise - noise.transpose(0, 2, 1), -1.0, 1.0)
        eq = nash(koth_game(u), target="affinity")
        ratings[b] = np.asarray(eq.ratings[KING], float)
        prompts[b], rebels[b] = np.asarray(eq.marginals[PROMPT], float), np.asarray(eq.marginals[REBEL], float)
        kings[b] = np.asarray(eq.marginals[KING], float)
    return Replicates(ratings, prompts, rebels, kings)


def tie_probabilities(full: np.ndarray, replicates: np.ndarray, indifference: float) -> np.ndarray:
    """(M - 1,) P(the ratings of adjacent pair k of ranking(full) differ by at most `indifference`)."""
    order = ranking(full)
    return (np.abs(replicates[:, order[:-1]] - replicates[:, order[1:]]) <= indifference).mean(axis=0)


def stop_reason(
    probabilities: np.ndarray, calls: int, max_calls: int | None, threshold: float, ties: np.ndarray | None = None
) -> str | None:
    """ "confident" when every adjacent pair is settled with probability >= threshold: ordered as in the
    full-data ranking (`probabilities`) or, with `ties`, within the indifference zone (`tie_probabilities`);
    "budget" when `calls` reached `max_calls`; else None (confidence wins when both hold)."""
    settled = probabilities >= threshold
    if ties is not None:
        settled |= ties >= threshold
    if np.all(settled):
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


def support_relevance(rating: Rating, sd: np.ndarray) -> np.ndarray:
    """(P, M, M) relevance of a cell to whether its prompt belongs to the prompt support, summing to 1.

    A prompt's payoff moves with u(p, i, j) by x_king[i] x_rebel[j]; its rating r_p (0 in the support,
    below elsewhere) has sd s_p = sqrt(sum (x_king[i] x_rebel[j] sd[p, i, j])^2) under the cell noise.
    Weight of prompt p: exp(-(r_p / s_p)^2 / 2), the chance its true rating is at the support's level."""
    xk, xr = rating.masses[KING], rating.masses[REBEL]
    w = xk[:, None] * xr[None, :]
    w = w + w.T  # unordered cell (i, j)
    upper = np.triu(w, 1)
    s = np.sqrt(np.einsum("ij,pij->p", upper**2, sd**2) + prompt_effect_variance(rating))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(s > 0, rating.ratings[PROMPT] / s, np.where(rating.ratings[PROMPT] < -1e-9, -np.inf, 0.0))
    weight = np.exp(-0.5 * z**2)
    out = weight[:, None, None] * w[None]
    total = out.sum()
    return out / total if total > 0 else out


def prompt_effect_variance(rating: Rating) -> np.ndarray:
    """(P,) variance of the king's payoff on prompt p, u(p, x_king, x_rebel), from its imputed cells.

    A prompt's effects on its cells are correlated (a prompt hard for the king is hard against every
    rebel), which independent cell sds miss. The prompts whose cells that carry the payoff are all
    judged show how far a prompt's payoff departs from the Bradley-Terry prediction; a prompt gets that
    variance in proportion to the share of its payoff weight on imputed cells."""
    xk, xr = rating.masses[KING], rating.masses[REBEL]
    d = xk[:, None] * xr[None, :]
    d = np.triu(d - d.T, 1)  # d payoff / d u(p, i, j), i < j
    weight = np.abs(d)
    share = np.einsum("ij,pij->p", weight, rating.imputed) / max(weight.sum(), 1e-300)
    payoff = np.einsum("ij,pij->p", d, rating.u_king)
    judged = share < 1e-9
    if judged.sum() < 2:
        return np.zeros(len(share))
    residual = payoff[judged] - float(np.sum(d * rating.global_prediction))
    return share * float(np.mean(residual**2))


def rebel_relevance(prompt_masses: np.ndarray, king_masses: np.ndarray) -> np.ndarray:
    """(P, M, M) rebel term (module docstring) from equilibria b: mean of x_prompt_b[p] (x_king_b[i] + x_king_b[j]),
    normalised to sum 1. Masses (B, P) and (B, M)."""
    pair = king_masses[:, :, None] + king_masses[:, None, :]
    out = np.einsum("bp,bij->pij", prompt_masses, pair * (1 - np.eye(pair.shape[1]))[None])
    return out / max(out.sum(), 1e-300)


def cell_priority(
    rating: Rating,
    replicates: Replicates,
    sd: np.ndarray,
    need: np.ndarray,
    temperature: float = 0.05,
    discovery: float = 3.0,
    rebel_check: float = 1.0,
) -> np.ndarray:
    """(P, M, M) priority of each unordered cell, upper triangle (i < j) only (module docstring)."""
    xp = np.vstack(
        [_softened(rating.masses[PROMPT], rating.ratings[PROMPT], temperature)[None], replicates.prompt_masses]
    )
    xr = np.vstack([_softened(rating.masses[REBEL], rating.ratings[REBEL], temperature)[None], replicates.rebel_masses])
    xk = np.vstack([rating.masses[KING][None], replicates.king_masses])
    pair = xr[:, None, :] * need[None, :, None]  # [b, i, j] = x_rebel_b[j] need_i
    pair = pair + pair.transpose(0, 2, 1)
    M = len(need)
    relevance = np.einsum("bp,bij->pij", xp, pair) / len(xp)
    relevance = (
        relevance / max(relevance.sum(), 1e-300)
        + rebel_check * rebel_relevance(xp, xk)
        + discovery * support_relevance(rating, sd)
    )
    return relevance * sd * np.triu(np.ones((M, M)), 1)[None]


def select_cells(
    priority: np.ndarray,
    stats: CellStats,
    batch: int,
    rng: np.random.Generator,
    max_samples_per_order: int | None = None,
    explore: float = 0.0,
) -> np.ndarray:
    """(K, 3) unordered cells (p, i, j), i < j, K <= batch: a share `explore` drawn uniformly at random,
    the rest highest priority first (seeded tie-breaks)."""
    P, M, _ = priority.shape
    allowed = np.triu(np.ones((M, M), bool), 1)[None] & np.ones((P, 1, 1), bool)
    if max_samples_per_order is not None:
        allowed &= (stats.tried < max_samples_per_order) & (stats.tried.transpose(0, 2, 1) < max_samples_per_order)
    idx = np.flatnonzero(allowed)
    if len(idx) == 0:
        return np.zeros((0, 3), int)
    idx = idx[rng.permutation(len(idx))]
    explored = int(round(explore * min(batch, len(idx))))
    rest = idx[explored:]
    best = rest[np.argsort(-priority.ravel()[rest], kind="stable")[: batch - explored]]
    chosen = np.concatenate([idx[:explored], best])
    return np.stack(np.unravel_index(chosen, priority.shape), axis=1)


def both_orders(cells: np.ndarray) -> Requests:
    """(2K, 3) requests: each cell (p, i, j) with i shown first, then with j shown first."""
    return np.concatenate([cells, cells[:, [0, 2, 1]]]) if len(cells) else np.zeros((0, 3), int)


def initial_design(num_prompts: int, num_models: int, prompts: int, seed: int) -> np.ndarray:
    """(K, 3) every model pair on `prompts` prompts drawn without replacement (seeded)."""
    chosen = np.sort(
        np.random.default_rng([seed, 0]).choice(num_prompts, size=min(prompts, num_prompts), replace=False)
    )
    i, j = np.triu_indices(num_models, 1)
    return np.array([(p, a, b) for p in chosen for a, b in zip(i, j)], dtype=int)


@dataclass
class AdaptiveResult:
    """Per round: calls made so far, the NE king ratings, the adjacent-pair probabilities; why it stopped."""

    stats: CellStats
    calls: list[int] = field(default_factory=list)
    ratings: list[np.ndarray] = field(default_factory=list)
    probabilities: list[np.ndarray] = field(default_factory=list)
    tie_probabilities: list[np.ndarray] = field(default_factory=list)
    stopped_by: str | None = None


def adaptive_judging(
    judge: Judge,
    num_prompts: int,
    num_models: int,
    *,
    max_calls: int | None = None,
    batch_calls: int = 200,
    stop_probability: float = 0.95,
    indifference: float = 0.02,
    initial_prompts: int = 5,
    explore: float = 0.1,
    discovery: float = 3.0,
    replicates: int = 30,
    prior_variance: float = 0.5,
    max_samples_per_order: int | None = None,
    strategy: str = "adaptive",
    seed: int = 0,
    initial: CellStats | None = None,
    on_round: Callable[[AdaptiveResult], None] | None = None,
    spent: Callable[[], str | None] | None = None,
) -> AdaptiveResult:
    """Judge adaptively (module docstring) through `judge`; `strategy="uniform"` picks uniformly among
    the allowed cells instead (the baseline). Each chosen cell costs 2 calls (both orders). `initial`:
    judgments held already (not counted as calls); when it has any, the random design is skipped.
    spent: the name of the caller's cap (e.g. "max-cost") once it refused a request of a round, else
    None; the run then stops after that round with that name as `stopped_by` (before any rating when
    the judgments so far leave a model without a covered cell)."""
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
            scores = np.asarray(judge(requests), float)
            stats.add(requests, scores)
            calls += int((scores != NOT_SENT).sum())
        try:
            rating = rate(stats)
        except ImputationError:  # the cap cut the design short: too few judgments to rate every model
            if spent is None or spent() is None:
                raise
            result.stopped_by = spent()
            return result
        round_ += 1
        rng = np.random.default_rng([seed, round_])
        sd = cell_sd(stats, rating, prior_variance)
        reps = replicate_equilibria(rating, sd, replicates, rng)
        probs = adjacent_order_probabilities(rating.ratings[KING], reps.ratings)
        ties = tie_probabilities(rating.ratings[KING], reps.ratings, indifference)
        result.calls.append(calls)
        result.ratings.append(rating.ratings[KING])
        result.probabilities.append(probs)
        result.tie_probabilities.append(ties)
        if on_round is not None:
            on_round(result)
        result.stopped_by = stop_reason(probs, calls, max_calls, stop_probability, ties)
        if result.stopped_by is None and spent is not None:
            result.stopped_by = spent()
        if result.stopped_by is None and not len(requests) and (round_ > 1 or not held):
            result.stopped_by = STOP_EXHAUSTED
        if result.stopped_by is not None:
            return result
        k = max(1, batch_calls // 2)
        if strategy == "uniform":
            priority = np.ones_like(sd)
        else:
            priority = cell_priority(
                rating, reps, sd, model_need(rating.ratings[KING], np.maximum(probs, ties), 0.05), discovery=discovery
            )
        cells = select_cells(priority, stats, k, rng, max_samples_per_order, 0.0 if strategy == "uniform" else explore)
