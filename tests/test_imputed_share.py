"""solvers.sparse.imputed_share: closed forms and agreement of the NE (marginals) and CCE (joint) paths."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena.solvers import imputed_shares


def random_simplex(rng, n):
    x = rng.random(n)
    return x / x.sum()


def random_mask(rng, P, M, share):
    upper = np.triu(rng.random((P, M, M)) < share, k=1)
    return upper | np.swapaxes(upper, 1, 2)


def test_nothing_imputed_gives_zero_and_everything_imputed_gives_the_off_diagonal_mass():
    rng = np.random.default_rng(0)
    P, M = 6, 4
    x = (random_simplex(rng, P), random_simplex(rng, M), random_simplex(rng, M))
    for share in imputed_shares(np.zeros((P, M, M), bool), x):
        assert np.all(share == 0.0)
    full = ~np.eye(M, dtype=bool)[None].repeat(P, axis=0)
    prompt, king, rebel = imputed_shares(full, x)
    # Every off-diagonal cell is imputed: a king's share is the rebel mass on other models, and so on.
    np.testing.assert_allclose(king, 1.0 - x[2], atol=1e-15)
    np.testing.assert_allclose(rebel, 1.0 - x[1], atol=1e-15)
    np.testing.assert_allclose(prompt, 1.0 - x[1] @ x[2], atol=1e-15)


def test_product_joint_matches_the_marginal_path_and_brute_force():
    rng = np.random.default_rng(1)
    P, M = 5, 4
    mask = random_mask(rng, P, M, 0.4)
    x = (random_simplex(rng, P), random_simplex(rng, M), random_simplex(rng, M))
    joint = np.einsum("p,i,j->pij", *x)
    by_marginals = imputed_shares(mask, x)
    by_joint = imputed_shares(mask, x, joint)
    for a, b in zip(by_marginals, by_joint):
        np.testing.assert_allclose(a, b, atol=1e-15)
    king = [sum(x[0][p] * x[2][j] for p in range(P) for j in range(M) if mask[p, i, j]) for i in range(M)]
    np.testing.assert_allclose(by_marginals[1], king, atol=1e-15)


def test_correlated_joint_uses_the_other_players_marginal():
    # A joint that puts all mass on (prompt 0, king 0, rebel 1): king 1 deviating faces rebel 1 on prompt 0,
    # a cell on its own diagonal (never imputed); king 2 faces the imputed cell (0, 2, 1).
    P, M = 2, 3
    joint = np.zeros((P, M, M))
    joint[0, 0, 1] = 1.0
    mask = np.zeros((P, M, M), bool)
    mask[0, 2, 1] = mask[0, 1, 2] = True
    prompt, king, rebel = imputed_shares(mask, (joint.sum((1, 2)), joint.sum((0, 2)), joint.sum((0, 1))), joint)
    assert king.tolist() == [0.0, 0.0, 1.0]
    assert rebel.tolist() == [0.0, 0.0, 0.0]  # rebel deviations face king 0, whose cells are judged
    assert prompt.tolist() == [0.0, 0.0]
    assert pytest.approx(imputed_shares(mask, (np.array([1.0, 0]), np.eye(M)[0], np.eye(M)[1]))[1]) == king
