"""Toy games of the paper (App. D rock-paper-scissors, App. E chicken) and synthetic king tensors.

The toy games are 2-player `NormalFormGame`s whose payoffs are exactly the paper's tables: with
and without a duplicated (cloned) action for both players. `synthetic_king_tensor` draws random
king-of-the-hill tensors with the value grid of real judgments, for tests and benchmarks;
`simulated_battles` the individual verdicts of a noisy judge of a given tensor.
"""

from __future__ import annotations

import numpy as np

from eqarena.solvers.games.normal_form import NormalFormGame

_RPS = np.array(
    [
        [0.0, -1.0, 1.0],  # Rock vs (Rock, Paper, Scissors)
        [1.0, 0.0, -1.0],  # Paper
        [-1.0, 1.0, 0.0],  # Scissors
    ]
)

# Row player's payoff; chicken is symmetric, so the column player's is the transpose.
_CHICKEN = np.array(
    [
        [0.0, -1.0],  # Swerve vs (Swerve, Straight)
        [1.0, -12.0],  # Straight
    ]
)


def _with_clone(matrix: np.ndarray, action: int) -> np.ndarray:
    """Duplicate `action` for both players: the copy is placed right after the original."""
    order = np.insert(np.arange(matrix.shape[0]), action + 1, action)
    return matrix[np.ix_(order, order)]


def rps(clone_rock: bool = False) -> NormalFormGame:
    """Rock-paper-scissors (paper App. D): zero-sum, win +1, loss -1, draw 0.

    Actions (Rock, Paper, Scissors); with `clone_rock` (Rock-1, Rock-2, Paper, Scissors) for both
    players. Its max-entropy NE and CCE rate every action 0.
    """
    row = _with_clone(_RPS, 0) if clone_rock else _RPS
    return NormalFormGame(np.stack([row, -row]))


def chicken(clone_straight: bool = False) -> NormalFormGame:
    """Chicken (paper App. E): both swerve 0; swerve vs straight -1 / +1; both straight -12.

    Actions (Swerve, Straight); with `clone_straight` (Swerve, Straight, Straight) for both players.
    The symmetric mixed NE swerves with probability 11/12; every action is then worth -1/12.
    """
    row = _with_clone(_CHICKEN, 1) if clone_straight else _CHICKEN
    return NormalFormGame(np.stack([row, row.T]))


def synthetic_king_tensor(
    num_prompts: int,
    num_models: int,
    *,
    seed: int = 0,
    judgments: int | None = 8,
    prompt_noise: float = 1.0,
) -> np.ndarray:
    """A random king tensor u_king of shape (P, M, M) that looks like judged data.

    Model i has skill s_i ~ N(0, 1) and prompt-specific skill s_i + prompt_noise * N(0, 1); each of
    `judgments` position-balanced verdicts scores +1/-1 with the Bradley-Terry probability of the
    skill gap, so entries lie on the grid of means of `judgments` verdicts; `judgments=None` gives the
    expected payoffs 2 sigmoid(gap) - 1 of the same skills instead (no grid, no exact ties).
    Antisymmetric with a zero diagonal.
    """
    if num_prompts < 1 or num_models < 1 or (judgments is not None and judgments < 1):
        raise ValueError("num_prompts, num_models and judgments must be positive")
    rng = np.random.default_rng(seed)
    skill = rng.normal(size=num_models)[None, :] + prompt_noise * rng.normal(size=(num_prompts, num_models))
    gap = skill[:, :, None] - skill[:, None, :]
    p_win = 1.0 / (1.0 + np.exp(-gap))
    win = p_win if judgments is None else rng.binomial(judgments, p_win) / judgments
    upper = np.triu(2.0 * win - 1.0, k=1)
    return upper - np.swapaxes(upper, 1, 2)


def simulated_battles(
    u: np.ndarray, per_order: int, rng: np.random.Generator
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """A noisy judge of u_king (P, M, M): `per_order` verdicts per ordered cell (p, a shown as A, b as B),
    +1 with probability (1 + u[p, a, b]) / 2, else -1. Returns the position-balanced tensor they give
    (expected value u) and the battles in `warehouse.tensor.read_battles` layout (prompt, model_a,
    model_b, score index arrays)."""
    P, M, _ = u.shape
    p, a, b = np.nonzero(~np.eye(M, dtype=bool)[None].repeat(P, axis=0))
    p, a, b = (np.repeat(x, per_order) for x in (p, a, b))
    score = np.where(rng.random(len(p)) < (1.0 + u[p, a, b]) / 2.0, 1.0, -1.0)
    means = np.zeros((P, M, M))
    np.add.at(means, (p, a, b), score / per_order)
    return 0.5 * (means - np.swapaxes(means, 1, 2)), {"prompt": p, "model_a": a, "model_b": b, "score": score}
