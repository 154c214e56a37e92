"""Toy games of App. D (rock-paper-scissors) and App. E (chicken): payoffs, NE and CCE ratings."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena.solvers import cce, chicken, koth_game, rps, synthetic_king_tensor
from eqarena.solvers.nash.limiting_logit import nash

pytestmark = pytest.mark.unit


def test_rps_payoffs_are_the_papers_tables():
    game = rps()
    assert game.payoffs.shape == (2, 3, 3)
    assert np.array_equal(game.payoffs[0], [[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    assert np.array_equal(game.payoffs[1], -game.payoffs[0])
    cloned = rps(clone_rock=True)
    assert cloned.num_actions == (4, 4)
    assert np.array_equal(cloned.payoffs[0], [[0, 0, -1, 1], [0, 0, -1, 1], [1, 1, 0, -1], [-1, -1, 1, 0]])
    assert np.array_equal(cloned.payoffs[1], -cloned.payoffs[0])


def test_chicken_payoffs_are_the_papers_tables():
    game = chicken()
    # (row, column) payoffs: (Swerve, Swerve) 0,0; (Swerve, Straight) -1,+1; (Straight, Straight) -12,-12.
    assert np.array_equal(game.payoffs[0], [[0, -1], [1, -12]])
    assert np.array_equal(game.payoffs[1], [[0, 1], [-1, -12]])
    cloned = chicken(clone_straight=True)
    assert np.array_equal(cloned.payoffs[0], [[0, -1, -1], [1, -12, -12], [1, -12, -12]])
    assert np.array_equal(cloned.payoffs[1], cloned.payoffs[0].T)


@pytest.mark.parametrize("clone_rock", [False, True])
@pytest.mark.parametrize("target", ["affinity", "uniform"])
def test_rps_equilibria_rate_every_action_zero(clone_rock, target):
    game = rps(clone_rock=clone_rock)
    for eq in (nash(game, target=target), cce(game, target=target)):
        for ratings in eq.ratings:
            assert np.abs(ratings).max() <= 1e-6
        assert eq.exploitability <= 1e-6


@pytest.mark.parametrize("clone_straight", [False, True])
def test_affinity_nash_selects_the_mixed_chicken_equilibrium(clone_straight):
    eq = nash(chicken(clone_straight=clone_straight), target="affinity")
    for marginal, ratings in zip(eq.marginals, eq.ratings):
        assert marginal[0] == pytest.approx(11 / 12, abs=1e-6)
        assert marginal[1:].sum() == pytest.approx(1 / 12, abs=1e-6)
        assert np.abs(ratings).max() <= 1e-6
    if clone_straight:  # the two Straights share the 1/12 evenly
        assert eq.marginals[0][1] == pytest.approx(eq.marginals[0][2], abs=1e-6)


def test_uniform_nash_of_cloned_chicken_is_reported():
    """App. E: with a duplicated Straight the Shannon-selected equilibrium may move; report it."""
    eq = nash(chicken(clone_straight=True), target="uniform")
    print(f"\nuniform-target NE of chicken with a cloned Straight: marginals {[np.round(m, 4) for m in eq.marginals]}")
    assert eq.exploitability <= 1e-6


def test_synthetic_king_tensor_is_a_valid_judged_tensor():
    u = synthetic_king_tensor(30, 5, seed=9, judgments=8)
    game = koth_game(u)  # validates antisymmetry and range
    assert game.num_actions == (30, 5, 5)
    assert np.all(np.diagonal(u, axis1=1, axis2=2) == 0)
    assert np.allclose(u * 8, np.round(u * 8))  # means of 8 verdicts of +-1
    assert not np.array_equal(u, synthetic_king_tensor(30, 5, seed=10))
    assert np.array_equal(u, synthetic_king_tensor(30, 5, seed=9))
