"""Property tests (hypothesis): antisymmetry, exploitability >= 0, contributions sum to ratings."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from eqarena.solvers import (
    Equilibrium,
    KothGame,
    NormalFormGame,
    bradley_terry,
    cce,
    contributions,
    deviation_gains,
    exploitability,
    joint_deviation_gains,
    joint_exploitability,
    koth_game,
)
from eqarena.solvers.nash.limiting_logit import nash

PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOLVER = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])

GRID = [k / 8 for k in range(-8, 9)]  # means of 8 judgments


@st.composite
def king_tensors(draw, max_prompts=10, max_models=5):
    p = draw(st.integers(1, max_prompts))
    m = draw(st.integers(2, max_models))
    upper = draw(arrays(np.float64, (p, m, m), elements=st.sampled_from(GRID)))
    upper = np.triu(upper, k=1)
    return upper - np.swapaxes(upper, 1, 2)


@st.composite
def distributions(draw, n):
    w = draw(arrays(np.float64, (n,), elements=st.floats(0.0, 1.0)))
    w = w + 1e-3
    return w / w.sum()


@st.composite
def games_with_profiles(draw):
    u = draw(king_tensors())
    game = koth_game(u)
    marginals = [draw(distributions(n)) for n in game.num_actions]
    size = int(np.prod(game.num_actions))
    joint = draw(distributions(size)).reshape(game.num_actions)
    return game, marginals, joint


@PROPERTY
@given(king_tensors())
def test_king_of_the_hill_payoffs_are_antisymmetric(u):
    game = koth_game(u)
    king, rebel, prompt = game.payoff(1), game.payoff(2), game.payoff(0)
    off = ~np.eye(u.shape[1], dtype=bool)[None]
    assert np.array_equal(king, -np.swapaxes(king, 1, 2))
    assert np.array_equal(np.where(off, rebel, 0.0), np.where(off, -king, 0.0))
    assert np.all(np.diagonal(rebel, axis1=1, axis2=2) == -1.0)
    assert np.array_equal(prompt, np.abs(king))


@SOLVER
@given(arrays(np.float64, (4, 4), elements=st.sampled_from(GRID)))
def test_symmetric_zero_sum_game_has_a_symmetric_cce(a):
    """A = -A^T: swapping the players maps the game to itself, so the max-entropy CCE is symmetric."""
    a = np.triu(a, 1) - np.triu(a, 1).T
    eq = cce(NormalFormGame(np.stack([a, a.T])), target="uniform")
    assert np.allclose(eq.joint, eq.joint.T, atol=1e-7)
    assert np.allclose(eq.ratings[0], eq.ratings[1], atol=1e-7)
    assert eq.exploitability <= 1e-8


@PROPERTY
@given(st.data())
def test_bradley_terry_is_antisymmetric(data):
    m = data.draw(st.integers(2, 5))
    k = data.draw(st.integers(4 * m, 40))
    a = data.draw(arrays(np.int64, (k,), elements=st.integers(0, m - 1)))
    shift = data.draw(arrays(np.int64, (k,), elements=st.integers(1, m - 1)))
    b = (a + shift) % m
    outcome = data.draw(arrays(np.float64, (k,), elements=st.sampled_from([0.0, 0.5, 1.0])))
    fit = bradley_terry(a, b, outcome, regularization=0.05)
    swapped = bradley_terry(b, a, 1.0 - outcome, regularization=0.05)
    mirrored = bradley_terry(a, b, 1.0 - outcome, regularization=0.05)
    assert np.allclose(swapped.ratings, fit.ratings, atol=1e-6)
    assert np.allclose(mirrored.ratings - 1000.0, -(fit.ratings - 1000.0), atol=1e-6)


@PROPERTY
@given(games_with_profiles())
def test_exploitability_is_non_negative(case):
    game, marginals, joint = case
    assert exploitability(game, marginals) >= -1e-12
    assert joint_exploitability(game, joint) >= 0.0
    # A product profile's largest deviation gain is never negative for any player.
    product = np.einsum("p,k,r->pkr", *marginals)
    for g in joint_deviation_gains(game, product):
        assert g.max() >= -1e-12


@PROPERTY
@given(games_with_profiles())
def test_contributions_sum_to_ratings_for_any_profile(case):
    game, marginals, joint = case
    product_eq = Equilibrium(
        marginals=marginals,
        joint=None,
        ratings=[np.asarray(r) for r in deviation_gains(game, marginals)],
        exploitability=exploitability(game, marginals),
    )
    joint_eq = Equilibrium(
        marginals=[joint.sum(axis=(1, 2)), joint.sum(axis=(0, 2)), joint.sum(axis=(0, 1))],
        joint=joint,
        ratings=joint_deviation_gains(game, joint),
        exploitability=joint_exploitability(game, joint),
    )
    for eq in (product_eq, joint_eq):
        for i in range(3):
            for j in range(3):
                if i != j:
                    delta = contributions(game, eq, i, j)
                    assert np.allclose(delta.sum(axis=1), eq.ratings[i], atol=1e-10)


@SOLVER
@given(king_tensors(max_prompts=12, max_models=4), st.sampled_from(["affinity", "uniform"]))
def test_equilibria_contributions_sum_to_ratings(u, target):
    game = KothGame(u)
    ne = nash(game, target=target)
    ce = cce(game, target=target)
    assert ne.exploitability >= -1e-12  # a sum of maxima of float gains that are >= 0 exactly
    assert 0.0 <= ce.exploitability <= 1e-8
    for eq in (ne, ce):
        for i in range(3):
            for j in range(3):
                if i != j:
                    assert np.allclose(contributions(game, eq, i, j).sum(axis=1), eq.ratings[i], atol=1e-9)
