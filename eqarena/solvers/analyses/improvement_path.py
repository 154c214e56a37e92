"""The simulated model and prompt improvement path (paper Section 2, App. "Simulated model and prompt
improvement path", Algorithm 1).

K orthogonal skills; a prompt is a probability vector p in the simplex, a model a nonnegative vector m
(a sum of Dirichlet(1_K) improvement vectors). The king's payoff is u_m(p, m_i, m_j) = p^T (m_i - m_j)
(= u_king[p, i, j]) and the prompt player's |u_m|, i.e. the game is `KothGame(u_king)`. Each iteration
(i) in the "additional" setting adds the best of P' Dirichlet candidate prompts, (ii) grows a candidate
model from 0 by adding, round after round, the best of M' Dirichlet improvement vectors, until the
candidate is top-ranked among all models; it is then added. A rater scores prompts and models: Elo
(Bradley-Terry) by separability and BT ratings, an equilibrium method by its deviation gains (eq. 1).

Conventions: u_king is divided by its largest |entry| before rating (eqarena's payoffs lie in [-1, 1];
a positive scale leaves every best response unchanged); "top-ranked" allows a tie within `TIE`
(equilibrium ratings are exactly 0 on the support); entropies are in nats. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from eqarena.methods import canonical, get_method
from eqarena.options import SETTINGS, PathSizes
from eqarena.solvers.games.equilibrium import solve_equilibrium

TIE = 1e-6  # a candidate whose rating is within TIE of the best model's is top-ranked


@dataclass(frozen=True, eq=False)
class PathStep:
    """The state after `iteration` (0 = the initial draw): the skill entropies H(p̄_t), H(m̄_t), the
    model and prompt added (None at 0; the prompt also None in the "initial" setting), the improvement
    rounds the model took (top_ranked False if it hit max_rounds), the prompt player's equilibrium
    marginal x over the P_t prompts and the equilibrium-weighted prompt skills sum_p x_p p (K,), what
    the paper's Figure 4 right shows (both None for a model-rating method)."""

    iteration: int
    prompt_entropy: float
    model_entropy: float
    added_model: np.ndarray | None
    added_prompt: np.ndarray | None
    prompt_marginal: np.ndarray | None
    rounds: int = 0
    top_ranked: bool = True
    equilibrium_prompt_skills: np.ndarray | None = None


def skill_entropy(vectors: np.ndarray) -> float:
    """H(v̄): Shannon entropy (nats) of the mean of `vectors` (N, K), normalised to sum 1 (paper Section 2)."""
    mean = np.asarray(vectors, dtype=np.float64).mean(axis=0)
    q = mean / mean.sum()
    q = q[q > 0]
    return float(-(q * np.log(q)).sum())


def king_tensor(prompts: np.ndarray, models: np.ndarray) -> np.ndarray:
    """u_king[p, i, j] = p^T (m_i - m_j), scaled so max |u_king| = 1 (module docstring)."""
    score = prompts @ models.T  # (P, M)
    u = score[:, :, None] - score[:, None, :]
    top = np.abs(u).max()
    return u / top if top > 0 else u


def separability(u_king: np.ndarray) -> np.ndarray:
    """(1 / M^2) sum_ij |u_m(p, m_i, m_j)| per prompt: how Elo-era benchmarks pick prompts (Section 2)."""
    return np.abs(u_king).mean(axis=(1, 2))


@dataclass(frozen=True, eq=False)
class Rater:
    """Algorithm 1's rating function r: prompt scores (P,), king ratings (M,), and the prompt player's
    equilibrium marginal (P,) or None, each of the game of `prompts` (P, K) and `models` (M, K)."""

    name: str
    prompt_scores: Callable[[np.ndarray, np.ndarray], np.ndarray]
    model_ratings: Callable[[np.ndarray, np.ndarray], np.ndarray]
    prompt_marginal: Callable[[np.ndarray, np.ndarray], np.ndarray | None]


def rater(name: str) -> Rater:
    """The rater of a registry method (`elo` is `bt`): equilibrium methods rate prompts and models by
    their deviation gains (eq. 1) at the method's equilibrium of `KothGame(u_king)`; a model-rating
    method rates models by its fit of u_king alone and prompts by separability."""
    method = get_method(canonical(name))
    if method.is_equilibrium:
        from eqarena.solvers.games.normal_form import KothGame

        def solve(prompts, models):
            return solve_equilibrium(method, KothGame(king_tensor(prompts, models)))

        return Rater(
            name,
            lambda p, m: np.asarray(solve(p, m).ratings[0]),
            lambda p, m: np.asarray(solve(p, m).ratings[1]),
            lambda p, m: np.asarray(solve(p, m).marginals[0]),
        )
    return Rater(
        name,
        lambda p, m: separability(king_tensor(p, m)),
        lambda p, m: method.model_fit(king_tensor(p, m)).ratings,
        lambda p, m: None,
    )


def improvement_path(rate: Rater, setting: str, sizes: PathSizes = PathSizes(), seed: int = 0) -> list[PathStep]:
    """One trial of Algorithm 1 under `rate` in `setting` ("initial" or "additional"): the initial state
    and one PathStep per iteration. The draws depend on `seed` only, so every rater and setting of a
    trial starts from the same prompts and models."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}; got {setting!r}")
    rng = np.random.default_rng(seed)
    ones = np.ones(sizes.skills)
    prompts = rng.dirichlet(ones, sizes.initial_prompts)
    models = rng.dirichlet(ones, sizes.initial_models)
    marginal = rate.prompt_marginal(prompts, models)
    steps = [
        PathStep(
            0,
            skill_entropy(prompts),
            skill_entropy(models),
            None,
            None,
            marginal,
            0,
            True,
            _weighted(marginal, prompts),
        )
    ]
    for t in range(1, sizes.iterations + 1):
        added_prompt = None
        if setting == "additional":
            candidates = rng.dirichlet(ones, sizes.candidate_prompts)
            scores = rate.prompt_scores(np.vstack([candidates, prompts]), models)
            added_prompt = candidates[int(np.argmax(scores[: sizes.candidate_prompts]))]
            prompts = np.vstack([prompts, added_prompt])
        model, rounds, top = _new_model(rate, prompts, models, sizes, rng)
        models = np.vstack([models, model])
        marginal = rate.prompt_marginal(prompts, models)
        steps.append(
            PathStep(
                t,
                skill_entropy(prompts),
                skill_entropy(models),
                model,
                added_prompt,
                marginal,
                rounds,
                top,
                _weighted(marginal, prompts),
            )
        )
    return steps


def _weighted(marginal: np.ndarray | None, prompts: np.ndarray) -> np.ndarray | None:
    """sum_p x_p p: the prompts' skills (P, K) weighted by the prompt player's equilibrium x (P,)."""
    return None if marginal is None else np.asarray(marginal) @ prompts


def _new_model(rate: Rater, prompts, models, sizes: PathSizes, rng) -> tuple[np.ndarray, int, bool]:
    """Algorithm 1's inner loop: candidate A'_m = 0; each round rates A'_m + Delta (M' improvement
    vectors) together with the existing models in one game and keeps the best; stops when that one is
    top-ranked of all, or after max_rounds. Returns (model, rounds, top-ranked)."""
    candidate = np.zeros(sizes.skills)
    m = sizes.candidate_models
    for rounds in range(1, sizes.max_rounds + 1):
        trial = candidate + rng.dirichlet(np.ones(sizes.skills), m)
        ratings = np.asarray(rate.model_ratings(prompts, np.vstack([trial, models])), dtype=np.float64)
        best = int(np.argmax(ratings[:m]))
        candidate = trial[best]
        if ratings[best] >= ratings.max() - TIE:
            return candidate, rounds, True
    return candidate, sizes.max_rounds, False
