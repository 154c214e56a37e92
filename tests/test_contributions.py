"""Marginal rating contributions (paper Section 4.3) against brute force and closed forms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from eqarena.solvers import (
    Equilibrium,
    NormalFormGame,
    cce,
    chicken,
    contributions,
    deviation_gains,
    koth_game,
    rps,
    synthetic_king_tensor,
)
from eqarena.solvers.nash.limiting_logit import nash

pytestmark = pytest.mark.unit


def brute_force_delta(payoffs: np.ndarray, joint: np.ndarray, i: int, j: int) -> np.ndarray:
    """delta(a'_i, a_j) = sum_{a_-j} x(a) [u_i(a'_i, a_j, a_-i,-j) - u_i(a)] by enumeration."""
    u = payoffs[i]
    out = np.zeros((u.shape[i], u.shape[j]))
    for a in itertools.product(*(range(n) for n in joint.shape)):
        for dev in range(u.shape[i]):
            b = list(a)
            b[i] = dev
            out[dev, a[j]] += joint[a] * (u[tuple(b)] - u[a])
    return out


def product(marginals):
    joint = marginals[0]
    for m in marginals[1:]:
        joint = np.multiply.outer(joint, m)
    return joint


@pytest.fixture(scope="module")
def small_koth():
    return koth_game(synthetic_king_tensor(7, 4, seed=21))


def test_cce_contributions_match_brute_force_and_sum_to_ratings(small_koth):
    eq = cce(small_koth, target="affinity")
    for i, j in itertools.permutations(range(3), 2):
        delta = contributions(small_koth, eq, i, j)
        assert delta.shape == (small_koth.num_actions[i], small_koth.num_actions[j])
        assert np.allclose(delta, brute_force_delta(small_koth.payoffs, eq.joint, i, j), atol=1e-12)
        assert np.allclose(delta.sum(axis=1), eq.ratings[i], atol=1e-12)


def test_nash_contributions_use_the_product_of_marginals(small_koth):
    eq = nash(small_koth, target="uniform")
    assert eq.joint is None
    joint = product(eq.marginals)
    for i, j in itertools.permutations(range(3), 2):
        delta = contributions(small_koth, eq, i, j)
        assert np.allclose(delta, brute_force_delta(small_koth.payoffs, joint, i, j), atol=1e-12)
        assert np.allclose(delta.sum(axis=1), eq.ratings[i], atol=1e-9)


def test_rps_paper_is_held_back_by_scissors():
    """App. D: under the NE of RPS with a cloned Rock, Paper wins against both Rocks, loses to Scissors."""
    game = rps(clone_rock=True)
    eq = nash(game, target="affinity")
    delta = contributions(game, eq, 0, 1)
    paper = 2
    assert np.allclose(delta[paper], [1 / 6, 1 / 6, 0.0, -1 / 3], atol=1e-6)
    assert np.allclose(delta.sum(axis=1), 0.0, atol=1e-6)


def test_chicken_straight_has_high_reward_and_catastrophic_loss():
    """App. E: at the mixed NE (swerve 11/12) the contributions have closed forms."""
    game = chicken()
    eq = nash(game, target="affinity")
    delta = contributions(game, eq, 0, 1)
    expected = np.array([[-11 / 144, 11 / 144], [121 / 144, -121 / 144]])
    assert np.allclose(delta, expected, atol=1e-6)


def test_three_player_dense_game():
    rng = np.random.default_rng(3)
    game = NormalFormGame(rng.normal(size=(3, 2, 3, 4)))
    marginals = [rng.dirichlet(np.ones(n)) for n in game.num_actions]
    ratings = [np.asarray(r) for r in deviation_gains(game, marginals)]
    eq = Equilibrium(marginals=marginals, joint=None, ratings=ratings, exploitability=0.0)
    for i, j in itertools.permutations(range(3), 2):
        delta = contributions(game, eq, i, j)
        assert np.allclose(delta, brute_force_delta(game.payoffs, product(marginals), i, j), atol=1e-12)
        assert np.allclose(delta.sum(axis=1), ratings[i], atol=1e-12)


def test_bad_players_raise():
    game = rps()
    eq = cce(game, target="uniform")
    with pytest.raises(ValueError, match="co_player"):
        contributions(game, eq, 0, 0)
    with pytest.raises(IndexError, match="co_player=2"):
        contributions(game, eq, 0, 2)
