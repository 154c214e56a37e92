"""Pure NEs, many distinct NEs and their risk dominance (paper App. F.4) against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from eqarena.solvers import (
    NormalFormGame,
    chicken,
    deviation_gains,
    expected_payoffs,
    exploitability,
    koth_game,
    synthetic_king_tensor,
)
from eqarena.solvers.analyses.risk import (
    distinct_equilibria,
    diverse_nash,
    prior_payoffs,
    pure_nash_equilibria,
    risk_dominance,
    risk_rank,
)
from eqarena.solvers.nash.limiting_logit import nash

GRID = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])


def _antisymmetric(upper: np.ndarray) -> np.ndarray:
    upper = np.triu(upper, 1)
    return upper - np.swapaxes(upper, 1, 2)


def _random_king(rng, p, m, grid=False):
    values = rng.choice(GRID, size=(p, m, m)) if grid else rng.uniform(-1.0, 1.0, size=(p, m, m))
    return _antisymmetric(values)


def _with_dominant_kings(rng, p, m, pairs):
    """Grid tensor where king i beats every rebel by 1 on prompt p for each (p, i) in `pairs`."""
    u = _random_king(rng, p, m, grid=True)
    for prompt, king in pairs:
        u[prompt, king, :] = 1.0
        u[prompt, :, king] = -1.0
        u[prompt, king, king] = 0.0
    return u


def brute_force_pure_ne(payoffs: np.ndarray, atol: float = 1e-12) -> np.ndarray:
    """Check every cell of the dense (3, P, M, M) payoffs against every unilateral deviation."""
    found = []
    for cell in itertools.product(*(range(n) for n in payoffs.shape[1:])):
        stable = True
        for player in range(3):
            for dev in range(payoffs.shape[1 + player]):
                other = list(cell)
                other[player] = dev
                if payoffs[player][tuple(other)] > payoffs[player][cell] + atol:
                    stable = False
        if stable:
            found.append(cell)
    return np.array(found, dtype=np.int64).reshape(-1, 3)


# ---- pure-strategy NEs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seed, p, m, kind",
    [
        (0, 4, 3, "uniform"),
        (1, 6, 4, "uniform"),
        (2, 3, 2, "grid"),
        (3, 5, 3, "grid"),
        (4, 8, 4, "grid"),
        (5, 2, 2, "grid"),
        (6, 6, 4, "dominant"),
        (7, 5, 5, "dominant"),
    ],
)
def test_pure_nash_equilibria_match_brute_force(seed, p, m, kind):
    rng = np.random.default_rng(seed)
    if kind == "dominant":
        u = _with_dominant_kings(rng, p, m, [(0, 1), (2, 0), (p - 1, m - 1)])
    else:
        u = _random_king(rng, p, m, grid=(kind == "grid"))
    found = pure_nash_equilibria(u)
    expected = brute_force_pure_ne(koth_game(u).payoffs)
    assert found.dtype == np.int64 and found.shape[1] == 3
    np.testing.assert_array_equal(found, expected)
    np.testing.assert_array_equal(found, np.array(sorted(map(tuple, found))).reshape(-1, 3))


def test_dominant_king_gives_a_pure_ne_against_every_rebel():
    # App. F.4 / Table: a (prompt, king) pair where the king beats every model defines pure NEs with
    # every rebel the king does not play (and, as the rebel is then indifferent, with its own model).
    rng = np.random.default_rng(11)
    u = _with_dominant_kings(rng, 7, 5, [(3, 2)])
    found = {tuple(row) for row in pure_nash_equilibria(koth_game(u))}
    assert {(3, 2, j) for j in range(5)} <= found
    assert all(exploitability(koth_game(u), _pure_profile(u.shape, cell)) <= 1e-12 for cell in found)


def test_pure_nash_equilibria_none_on_synthetic_data():
    u = synthetic_king_tensor(60, 6, seed=1)
    found = pure_nash_equilibria(u)
    np.testing.assert_array_equal(found, brute_force_pure_ne(koth_game(u).payoffs))


def _pure_profile(shape, cell):
    p, m, _ = shape
    return [np.eye(n)[a] for n, a in zip((p, m, m), cell)]


# ---- many distinct NEs ---------------------------------------------------------------------------

SMALL = dict(num=24, steps=600)


@pytest.fixture(scope="module")
def small_game():
    return synthetic_king_tensor(30, 5, seed=3)


@pytest.fixture(scope="module")
def small_result(small_game):
    return diverse_nash(small_game, seed=0, **SMALL)


def test_diverse_nash_reports_true_exploitability_and_ratings(small_game, small_result):
    game = koth_game(small_game)
    res = small_result
    assert [x.shape for x in res.marginals] == [(24, 30), (24, 5), (24, 5)]
    assert [r.shape for r in res.ratings] == [(24, 30), (24, 5), (24, 5)]
    for k in range(24):
        xs = [x[k] for x in res.marginals]
        for x in xs:
            assert np.all(x >= 0) and x.sum() == pytest.approx(1.0, abs=1e-12)
        assert res.exploitability[k] == pytest.approx(exploitability(game, xs), abs=1e-12)
        for r, g in zip(res.ratings, deviation_gains(game, xs)):
            np.testing.assert_allclose(r[k], np.asarray(g), atol=1e-12)
    np.testing.assert_array_equal(res.king_ratings, res.ratings[1])


def test_distinct_equilibria_are_exact_and_distinct(small_game, small_result):
    game = koth_game(small_game)
    res = small_result
    keep = np.flatnonzero(res.distinct)
    np.testing.assert_array_equal(res.distinct, distinct_equilibria(res))
    assert len(keep) >= 8
    for k in keep:
        assert exploitability(game, [x[k] for x in res.marginals]) <= 1e-2
    kings = res.king_ratings[keep]
    gaps = np.max(np.abs(kings[:, None, :] - kings[None, :, :]), axis=-1)
    assert np.all(gaps[~np.eye(len(keep), dtype=bool)] > 1e-3)
    # Stricter tolerances keep a subset; a huge rating tolerance keeps one profile.
    strict = distinct_equilibria(res, tol=1e-4, rating_tol=1e-2)
    assert np.all(res.distinct[strict] | (res.exploitability[strict] <= 1e-4))
    assert np.all(res.exploitability[strict] <= 1e-4)
    assert distinct_equilibria(res, rating_tol=10.0).sum() == 1


def test_later_rounds_redraw_the_profiles_that_are_not_kept(small_game, small_result):
    first = diverse_nash(small_game, seed=0, rounds=1, **SMALL)
    assert first.rounds == 1 and first.steps == SMALL["steps"]
    assert small_result.steps == small_result.rounds * SMALL["steps"] and small_result.rounds > 1
    assert small_result.distinct.sum() > first.distinct.sum()
    # Profiles kept after the first round stay as they were.
    for a, b in zip(first.marginals, small_result.marginals):
        np.testing.assert_array_equal(a[first.distinct], b[first.distinct])


def test_diverse_nash_is_deterministic(small_game, small_result):
    again = diverse_nash(small_game, seed=0, **SMALL)
    for a, b in zip(small_result.marginals, again.marginals):
        np.testing.assert_array_equal(a, b)
    other = diverse_nash(small_game, seed=1, **SMALL)
    assert not np.allclose(small_result.marginals[1], other.marginals[1])


def test_diverse_nash_keeps_fixed_profiles_first(small_game):
    lle = nash(koth_game(small_game))
    res = diverse_nash(small_game, seed=0, num=12, steps=300, rounds=1, fixed=[lle, lle.marginals])
    assert res.num_fixed == 2 and res.marginals[0].shape == (12, 30)
    for i, x in enumerate(lle.marginals):
        np.testing.assert_array_equal(res.marginals[i][0], x)
        np.testing.assert_array_equal(res.marginals[i][1], x)
    assert res.exploitability[0] == pytest.approx(lle.exploitability, abs=1e-12)
    assert res.distinct[0] and not res.distinct[1]  # the copy duplicates the LLE's ratings


def test_diverse_nash_rejects_bad_arguments(small_game):
    with pytest.raises(ValueError):
        diverse_nash(small_game, num=1, fixed=[[np.ones(30) / 30, np.ones(5) / 5, np.ones(5) / 5]] * 2)
    with pytest.raises(ValueError):
        diverse_nash(small_game, num=4, fixed=[[np.ones(3), np.ones(5), np.ones(5)]])


def test_diverse_nash_finds_many_distinct_equilibria_of_a_moderate_game():
    """32 searches on a 100-prompt game: at least half end at distinct approximate NEs (their speed is
    measured in bench/analyses.py, not here)."""
    u = synthetic_king_tensor(100, 8, seed=0)
    res = diverse_nash(u, num=32, seed=0, steps=1500)
    keep = np.flatnonzero(res.distinct)
    assert len(keep) >= 16
    game = koth_game(u)
    assert max(exploitability(game, [x[k] for x in res.marginals]) for k in keep) <= 1e-2


# ---- risk dominance ------------------------------------------------------------------------------


def _random_profiles(rng, sizes, k):
    return [rng.dirichlet(np.ones(n), size=k) for n in sizes]


def _payoffs(payoffs, xs):
    """u_i(x) of a product profile from dense (N, A_1, ..., A_N) payoffs, one player at a time."""
    out = []
    for u in payoffs:
        for x in reversed(xs):
            u = u @ x
        out.append(float(u))
    return np.array(out)


def _brute_payoffs(game, stacked, priors):
    """sum over co-players' equilibrium indices, weighted by their priors, of u_i(x_i^k, x_-i^e)."""
    n, k = len(stacked), stacked[0].shape[0]
    payoffs = game.payoffs
    out = np.zeros((k, n))
    for i in range(n):
        for mine in range(k):
            for others in itertools.product(range(k), repeat=n - 1):
                e = list(others[:i]) + [mine] + list(others[i:])
                weight = np.prod([priors[j][e[j]] for j in range(n) if j != i])
                xs = [stacked[j][e[j]] for j in range(n)]
                out[mine, i] += weight * _payoffs(payoffs[i : i + 1], xs)[0]
    return out


def test_uniform_and_prior_payoffs_match_brute_force():
    rng = np.random.default_rng(0)
    u = _random_king(rng, 3, 3, grid=True)
    game = koth_game(u)
    stacked = _random_profiles(rng, (3, 3, 3), 4)
    uniform = np.full((3, 4), 0.25)
    res = risk_dominance(u, stacked, steps=1)
    np.testing.assert_allclose(res.payoffs_uniform, _brute_payoffs(game, stacked, uniform), atol=1e-12)
    np.testing.assert_allclose(res.total_uniform, res.payoffs_uniform.sum(axis=1))
    priors = rng.dirichlet(np.ones(4), size=3)
    np.testing.assert_allclose(prior_payoffs(game, stacked, priors), _brute_payoffs(game, stacked, priors), atol=1e-12)


def test_prior_update_matches_the_recursion():
    rng = np.random.default_rng(1)
    u = _random_king(rng, 4, 3)
    game = koth_game(u)
    stacked = _random_profiles(rng, (4, 3, 3), 3)
    eta, steps = 0.5, 40
    priors = np.full((3, 3), 1.0 / 3)
    for _ in range(steps):
        logits = np.log(priors) + eta * _brute_payoffs(game, stacked, priors).T
        priors = np.exp(logits - logits.max(axis=1, keepdims=True))
        priors /= priors.sum(axis=1, keepdims=True)
    res = risk_dominance(game, stacked, eta=eta, steps=steps, reference=2)
    np.testing.assert_allclose(res.priors, priors, atol=1e-12)
    np.testing.assert_allclose(res.payoffs_updated, _brute_payoffs(game, stacked, priors), atol=1e-12)
    assert res.rank_updated == risk_rank(res.total_updated, 2)


def test_single_equilibrium_earns_its_equilibrium_payoffs():
    u = synthetic_king_tensor(20, 4, seed=2)
    game = koth_game(u)
    eq = nash(game)
    res = risk_dominance(u, [x[None] for x in eq.marginals], steps=100)
    expected = np.asarray(expected_payoffs(game, eq.marginals))
    np.testing.assert_allclose(res.payoffs_uniform[0], expected, atol=1e-12)
    np.testing.assert_allclose(res.payoffs_updated[0], expected, atol=1e-12)
    np.testing.assert_allclose(res.priors, 1.0)
    assert res.rank_uniform == res.rank_updated == 1


def test_stag_hunt_hare_risk_dominates():
    # Stag hunt: (Stag, Stag) pays 4 each, Hare pays 3 whatever the other does, Stag vs Hare pays 0.
    # (Hare, Hare) risk-dominates: against a 50/50 co-player Stag earns 2 and Hare 3, and the
    # iterated priors move onto Hare, so Stag then earns 0.
    row = np.array([[4.0, 0.0], [3.0, 3.0]])
    game = NormalFormGame(np.stack([row, row.T]))
    stag, hare = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    stacked = [np.stack([stag, hare])] * 2
    res = risk_dominance(game, stacked, reference=0)
    np.testing.assert_allclose(res.payoffs_uniform, [[2.0, 2.0], [3.0, 3.0]], atol=1e-12)
    np.testing.assert_allclose(res.payoffs_updated, [[0.0, 0.0], [3.0, 3.0]], atol=1e-9)
    np.testing.assert_allclose(res.priors, [[0.0, 1.0], [0.0, 1.0]], atol=1e-9)
    assert (res.rank_uniform, res.rank_updated) == (2, 2)
    assert risk_rank(res.total_uniform, 1) == 1


def test_chicken_mixed_equilibrium_is_least_risky_under_uniform_priors():
    # Equilibria (Swerve, Straight), (Straight, Swerve) and the mixed one (swerve w.p. 11/12). The
    # co-player's mean strategy swerves w.p. (0 + 1 + 11/12) / 3 = 23/36, so Swerve earns -13/36,
    # Straight 23/36 - 12 * 13/36 = -133/36 and the mixed strategy -23/36 (paper App. E payoffs).
    swerve, straight, mixed = np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([11 / 12, 1 / 12])
    stacked = [np.stack([swerve, straight, mixed]), np.stack([straight, swerve, mixed])]
    res = risk_dominance(chicken(), stacked, reference=2)
    expected = np.array([[-13, -133], [-133, -13], [-23, -23]]) / 36
    np.testing.assert_allclose(res.payoffs_uniform, expected, atol=1e-12)
    assert res.rank_uniform == 1
    assert risk_rank(res.total_uniform, 0) == risk_rank(res.total_uniform, 1) == 2


def test_risk_dominance_rejects_bad_shapes():
    u = synthetic_king_tensor(5, 3, seed=0)
    with pytest.raises(ValueError):
        risk_dominance(u, [np.ones((2, 5)) / 5, np.ones((2, 3)) / 3])
    with pytest.raises(ValueError):
        risk_dominance(u, [np.ones((2, 5)) / 5, np.ones((2, 3)) / 3, np.ones((3, 3)) / 3])
    with pytest.raises(IndexError):
        risk_dominance(u, [np.ones((2, 5)) / 5, np.ones((2, 3)) / 3, np.ones((2, 3)) / 3], reference=2)


def test_redo_rounds_reuse_one_compiled_descent():
    """Rounds after the first descend only the profiles not kept, with arrays of the same shapes: the
    jitted descent compiles once per game, not once per round."""
    from eqarena.solvers.analyses import risk

    u = synthetic_king_tensor(23, 5, seed=11)  # a shape no other test uses
    before = risk._descend._cache_size()
    result = diverse_nash(u, num=16, seed=0, steps=80, rounds=3)
    assert result.rounds == 3 and int(result.distinct.sum()) < 24  # some profiles were redone
    assert risk._descend._cache_size() == before + 1
