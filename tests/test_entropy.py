"""Entropies, strategic dissimilarity and the max-affinity-entropy target (paper Section 3.3, App. B, C)."""

from __future__ import annotations

import itertools

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eqarena.solvers import (
    NormalFormGame,
    affinity_entropy,
    affinity_kernel,
    affinity_target,
    affinity_targets,
    koth_game,
    shannon_entropy,
    strategic_dissimilarity,
    synthetic_king_tensor,
    tsallis_entropy,
)
from eqarena.solvers.games.entropy import _neighbour_pairs, affinity_target_value

RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])


def _zero_sum(a: np.ndarray) -> NormalFormGame:
    return NormalFormGame(np.stack([a, -a.T]))


def _random_koth(rng, p, m):
    u = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(p, m, m))
    u = np.triu(u, 1)
    return u - np.swapaxes(u, 1, 2)


def _simplex_points(rng, n, k):
    return rng.dirichlet(np.ones(n), size=k)


# ---- plain entropies ---------------------------------------------------------------------------


def test_shannon_and_tsallis_closed_forms():
    for n in (1, 2, 5, 17):
        uniform = np.full(n, 1.0 / n)
        assert float(shannon_entropy(uniform)) == pytest.approx(np.log(n), abs=1e-12)
        assert float(tsallis_entropy(uniform, p=1.0)) == pytest.approx(1 - 1 / n, abs=1e-12)
        assert float(tsallis_entropy(uniform, p=0.5)) == pytest.approx((1 - n**-0.5) / 0.5, abs=1e-12)
    pure = np.array([0.0, 1.0, 0.0])
    assert float(shannon_entropy(pure)) == 0.0
    assert float(tsallis_entropy(pure)) == 0.0


def test_tsallis_tends_to_shannon_as_p_vanishes():
    x = np.array([0.5, 0.25, 0.125, 0.125])
    assert float(tsallis_entropy(x, p=1e-6)) == pytest.approx(float(shannon_entropy(x)), rel=1e-5)


def test_entropic_index_is_validated():
    with pytest.raises(ValueError, match="p must lie in"):
        tsallis_entropy(np.ones(2) / 2, p=0.0)
    with pytest.raises(ValueError, match="p must lie in"):
        affinity_entropy(np.ones(2) / 2, np.eye(2), p=1.5)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.floats(0.05, 1.0), st.integers(0, 2**31 - 1))
def test_affinity_entropy_with_identity_kernel_is_tsallis(n, p, seed):
    x = np.random.default_rng(seed).dirichlet(np.ones(n))
    assert float(affinity_entropy(x, np.eye(n), p)) == pytest.approx(float(tsallis_entropy(x, p)), abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 7), st.floats(0.1, 1.0), st.floats(0.0, 1.0), st.integers(0, 2**31 - 1))
def test_affinity_entropy_is_nonnegative_and_concave(n, p, sim, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, sim, size=(n, n))
    k = np.minimum((a + a.T) / 2, 1.0)
    np.fill_diagonal(k, 1.0)
    x, y = rng.dirichlet(np.ones(n), size=2)
    hx, hy = float(affinity_entropy(x, k, p)), float(affinity_entropy(y, k, p))
    assert hx >= -1e-12 and hy >= -1e-12
    assert float(affinity_entropy((x + y) / 2, k, p)) >= (hx + hy) / 2 - 1e-12


# ---- strategic dissimilarity (paper eq. for D, App. C) -----------------------------------------


def test_dissimilarity_is_mean_squared_payoff_difference_over_co_play():
    rng = np.random.default_rng(3)
    payoffs = rng.normal(size=(3, 2, 3, 4))
    game = NormalFormGame(payoffs)
    d = strategic_dissimilarity(game, 1)
    u = payoffs[1]
    for a, b in itertools.product(range(3), repeat=2):
        expected = np.mean((u[:, a, :] - u[:, b, :]) ** 2)
        assert d[a, b] == pytest.approx(expected, abs=1e-12)


def test_mixed_co_play_dissimilarity_matches_the_app_c_sum_over_profile_pairs():
    rng = np.random.default_rng(4)
    payoffs = rng.normal(size=(3, 3, 2, 4))
    game = NormalFormGame(payoffs)
    d = strategic_dissimilarity(game, 0, co_play="mixed")
    u = payoffs[0]
    sizes = (2, 4)
    profiles = list(itertools.product(range(2), range(4)))
    for a, b in itertools.product(range(3), repeat=2):
        delta = u[a] - u[b]
        total = sum(
            delta[s] * delta[t] * 2 ** sum(si == ti for si, ti in zip(s, t)) for s in profiles for t in profiles
        )
        expected = total * np.prod([1.0 / (n * (n + 1.0)) for n in sizes])
        assert d[a, b] == pytest.approx(expected, rel=1e-10, abs=1e-14)


def test_mixed_co_play_dissimilarity_agrees_with_monte_carlo_over_dirichlet_strategies():
    rng = np.random.default_rng(5)
    payoffs = rng.normal(size=(2, 3, 3))
    game = NormalFormGame(payoffs)
    d = strategic_dissimilarity(game, 0, co_play="mixed")
    xs = rng.dirichlet(np.ones(3), size=400_000)
    values = xs @ payoffs[0].T  # (samples, A_0): u_0(a, x_1)
    mc = np.mean((values[:, 0] - values[:, 1]) ** 2)
    assert d[0, 1] == pytest.approx(mc, rel=2e-2)


def test_dissimilarity_vanishes_exactly_on_clones():
    idx = [0, 0, 1, 2]
    game = _zero_sum(RPS[np.ix_(idx, idx)])
    for co_play in ("actions", "mixed"):
        d = strategic_dissimilarity(game, 0, co_play=co_play)
        assert d[0, 1] == 0.0
        off = d[~np.eye(4, dtype=bool)]
        assert np.count_nonzero(off == 0.0) == 2  # only (0, 1) and (1, 0)


def test_kernel_reads_kernel_variance_as_sigma_squared():
    game = _zero_sum(np.array([[0.0, 1e-3], [0.0, 0.0]]))
    d = strategic_dissimilarity(game, 0)[0, 1]
    assert d == pytest.approx(0.5 * 1e-6)
    k = affinity_kernel(game, 0, kernel_variance=1e-6)
    assert k[0, 1] == pytest.approx(np.exp(-d / (4 * 1e-6)))
    assert np.allclose(np.diag(k), 1.0)


# ---- the max affinity entropy target (App. B properties) ---------------------------------------


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_rps_with_cloned_rock_target_puts_one_third_per_clone_group(p):
    idx = [0, 0, 1, 2]  # Rock-1, Rock-2, Paper, Scissors (App. D)
    game = _zero_sum(RPS[np.ix_(idx, idx)])
    for player in (0, 1):
        t = affinity_target(game, player, p=p)
        np.testing.assert_allclose(t, [1 / 6, 1 / 6, 1 / 3, 1 / 3], atol=1e-12)
        k = affinity_kernel(game, player)
        uniform_over_groups = float(tsallis_entropy(np.full(3, 1 / 3), p))
        assert float(affinity_entropy(t, k, p)) == pytest.approx(uniform_over_groups, abs=1e-12)
        assert affinity_target_value(game, player, p=p) == pytest.approx(uniform_over_groups, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=6),
    st.sampled_from([1.0, 0.7, 0.3]),
    st.integers(0, 2**31 - 1),
)
def test_exact_clone_groups_get_equal_mass_and_decloned_tsallis_value(group_sizes, p, seed):
    rng = np.random.default_rng(seed)
    c = len(group_sizes)
    base = rng.normal(size=(c, 3))
    rows = np.repeat(np.arange(c), group_sizes)
    rng.shuffle(rows)
    payoffs = np.stack([base[rows], rng.normal(size=(len(rows), 3))])
    game = NormalFormGame(payoffs)
    t = affinity_target(game, 0, p=p)
    group_mass = np.bincount(rows, weights=t, minlength=c)
    np.testing.assert_allclose(group_mass, 1.0 / c, atol=1e-12)
    for g, size in enumerate(group_sizes):
        np.testing.assert_allclose(t[rows == g], 1.0 / (c * size), atol=1e-12)
    k = affinity_kernel(game, 0)
    expected = float(tsallis_entropy(np.full(c, 1.0 / c), p))
    assert float(affinity_entropy(t, k, p)) == pytest.approx(expected, abs=1e-10)
    # No point of the simplex does better.
    others = _simplex_points(rng, len(rows), 200)
    assert np.all(np.asarray(affinity_entropy(others, k, p)) <= expected + 1e-12)


@pytest.mark.parametrize("p", [1.0, 0.5])
def test_near_clones_target_matches_cvxpy(p):
    """With a wide kernel the target is a genuine constrained optimum: check it against cvxpy."""
    rng = np.random.default_rng(11)
    base = rng.normal(size=(4, 5))
    rows = np.concatenate([base, base[:2] + 0.02 * rng.normal(size=(2, 5)), base[:1]])
    game = NormalFormGame(np.stack([rows, rng.normal(size=rows.shape)]))
    variance = 1e-3
    t = affinity_target(game, 0, p=p, kernel_variance=variance)
    k = affinity_kernel(game, 0, kernel_variance=variance)
    assert 0.01 < k[0, 4] < 0.99  # a genuine near clone, not an exact one
    u = k / (np.sum(k ** (p + 1), axis=0) ** (1 / (p + 1)))[None, :]
    x = cp.Variable(len(rows), nonneg=True)
    problem = cp.Problem(cp.Minimize(cp.sum(cp.power(u @ x, p + 1))), [cp.sum(x) == 1])
    problem.solve(solver=cp.CLARABEL)
    best = (1 - problem.value) / p
    value = float(affinity_entropy(t, k, p))
    assert best - 1e-10 <= value <= best + 1e-6  # at least as good as the interior-point optimum
    assert affinity_target_value(game, 0, p=p, kernel_variance=variance) == pytest.approx(value, abs=1e-12)
    np.testing.assert_allclose(t, x.value, atol=1e-3)
    # First-order optimality on the simplex: equal gradient on the support, no better action off it.
    grad = -(p + 1) / p * u.T @ (u @ t) ** p
    support = t > 1e-9
    assert np.ptp(grad[support]) < 1e-8
    assert np.all(grad[~support] <= grad[support].min() + 1e-8)


@pytest.mark.parametrize("seed", [0, 1])
def test_many_noisy_near_clone_prompts_target_matches_cvxpy_and_kkt(seed):
    """Hundreds of noisy copies of a few prompts: one large near-clone component per copied prompt,
    whose optimum leaves many copies at exactly zero mass. Check against an independent cvxpy
    solution of max H_a^1 over the simplex (App. B) and the first-order optimality conditions."""
    rng = np.random.default_rng(seed)
    base = synthetic_king_tensor(60, 5, seed=seed)
    source = np.repeat(rng.choice(60, size=3, replace=False), 100)
    noise = np.triu(rng.uniform(-0.01, 0.01, size=(len(source), 5, 5)), 1)
    copies = np.clip(base[source] + noise - np.swapaxes(noise, 1, 2), -1.0, 1.0)
    game = koth_game(np.concatenate([base, copies]))
    rows = np.abs(game.u_king).reshape(len(game.u_king), -1)
    assert len(np.unique(rows, axis=0)) == len(rows)  # no exact clones: the maximiser is unique
    targets = affinity_targets(game)
    for player, t in enumerate(targets):
        k = affinity_kernel(game, player)
        u = k / np.sqrt(np.sum(k**2, axis=0))[None, :]
        # U = K diag(1/||K_:j||) has full column rank, so -H_a^1 = ||U x||^2 - 1 is strictly convex.
        assert np.linalg.eigvalsh(u.T @ u)[0] > 1e-3
        x = cp.Variable(len(t), nonneg=True)
        problem = cp.Problem(cp.Minimize(cp.sum_squares(u @ x)), [cp.sum(x) == 1])
        problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        assert problem.status == cp.OPTIMAL
        assert t.min() >= 0.0 and t.sum() == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(t, x.value, atol=1e-6)
        value = float(affinity_entropy(t, k))
        assert value == pytest.approx(1.0 - problem.value, abs=1e-10)
        assert affinity_target_value(game, player) == pytest.approx(value, abs=1e-12)
        grad = -2.0 * u.T @ (u @ t)
        support = t > 0.0
        assert np.ptp(grad[support]) < 1e-9
        assert np.all(grad[~support] <= grad[support].min() + 1e-9)
    t_prompt = targets[0]
    near = affinity_kernel(game, 0)[np.ix_(source + 60, source + 60)]
    assert np.any((near > 1e-6) & (near < 0.99))  # genuine near clones, not exact ones
    assert np.count_nonzero(t_prompt[60:] == 0.0) >= 10  # exactly zero mass on crowded-out copies


def test_koth_targets_at_scale_group_clones_without_a_dense_kernel():
    rng = np.random.default_rng(7)
    p_prompts, m = 6000, 4  # above the dense neighbour-search limit
    u = np.triu(rng.uniform(-1, 1, size=(p_prompts, m, m)), 1)
    u = u - np.swapaxes(u, 1, 2)
    u[10:30] = u[5]  # planted clone groups
    u[40] = u[41]
    u[100:110] = -u[99]  # the prompt player's payoff |u_king| makes sign-flipped prompts clones too
    _, labels = np.unique(np.abs(u).reshape(p_prompts, -1), axis=0, return_inverse=True)
    labels = labels.reshape(-1)
    c = labels.max() + 1
    t_prompt, t_king, t_rebel = affinity_targets(koth_game(u))
    np.testing.assert_allclose(np.bincount(labels, weights=t_prompt), 1.0 / c, atol=1e-12)
    # Inside a group, evenly over its copy classes (u[99] and its negatives u[100:110] are two), then
    # evenly over a class's copies.
    _, copies = np.unique(u.reshape(p_prompts, -1), axis=0, return_inverse=True)
    copies = copies.reshape(-1)
    classes_in_group = {g: len(set(copies[labels == g])) for g in set(labels.tolist())}
    per_group = np.array([classes_in_group[g] for g in labels])
    expected = 1.0 / (c * per_group * np.bincount(copies)[copies])
    np.testing.assert_allclose(t_prompt, expected, atol=1e-15)
    assert t_prompt[99] == pytest.approx(10 * t_prompt[100], rel=1e-12)
    np.testing.assert_allclose(t_king, 1.0 / m, atol=1e-12)
    np.testing.assert_allclose(t_rebel, 1.0 / m, atol=1e-12)


def test_neighbour_search_at_scale_finds_exactly_the_brute_force_pairs():
    rng = np.random.default_rng(8)
    centres = rng.normal(size=(2500, 6))
    y = np.concatenate([centres, centres[:2500] + rng.normal(scale=0.02, size=(2500, 6))])
    radius_sq = 0.05**2
    pairs, dist = _neighbour_pairs(y, radius_sq)  # 5000 rows: the projected k-d tree path
    found = {tuple(sorted(map(int, pr))) for pr in pairs}
    expected = set()
    for start in range(0, len(y), 500):
        block = ((y[start : start + 500, None, :] - y[None, :, :]) ** 2).sum(-1)
        a, b = np.nonzero(block <= radius_sq)
        expected |= {(int(i + start), int(j)) for i, j in zip(a, b) if i + start < j}
    assert len(expected) > 1000
    assert found == expected
    np.testing.assert_allclose(dist, ((y[pairs[:, 0]] - y[pairs[:, 1]]) ** 2).sum(1))


def _brute_force_pairs(y, radius_sq):
    d = ((y[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    a, b = np.nonzero(np.triu(d <= radius_sq, k=1))
    return {(int(i), int(j)) for i, j in zip(a, b)}


@pytest.mark.parametrize("spread", ["separated", "crowded"])
def test_neighbour_search_on_a_replicate_sized_set_finds_exactly_the_brute_force_pairs(spread):
    """300 rows in 400 dimensions. Separated (a few planted near copies): the projected k-d tree's
    candidates are confirmed. Crowded (rows all close, so that an 8-dimensional projection separates
    almost no pair): the dense distances are used. Both find exactly the brute-force pairs."""
    rng = np.random.default_rng(10)
    if spread == "separated":
        y = rng.normal(size=(300, 400))
        y[200:240] = y[:40] + rng.normal(scale=0.002, size=(40, 400))
        radius_sq = 0.05**2
    else:
        y = rng.normal(scale=0.01, size=(300, 400))
        radius_sq = 0.08  # about the median squared distance, 2 * 400 * 0.01^2
    pairs, dist = _neighbour_pairs(y, radius_sq)
    expected = _brute_force_pairs(y, radius_sq)
    assert 40 <= len(expected) < 300 * 299 // 2
    assert {tuple(sorted(map(int, pr))) for pr in pairs} == expected
    np.testing.assert_allclose(dist, ((y[pairs[:, 0]] - y[pairs[:, 1]]) ** 2).sum(1), rtol=1e-9, atol=1e-12)


def test_near_clone_prompts_at_scale_share_mass_like_the_dense_solution():
    """A near-clone pair in a big game gets the same split as in a small game holding only them."""
    rng = np.random.default_rng(9)
    m = 3
    u_small = _random_koth(rng, 3, m)
    u_small[2, 0, 1], u_small[2, 1, 0] = 0.75, -0.75  # not all ties
    u_small[0, 0, 1], u_small[0, 1, 0] = 0.25, -0.25
    u_small[1] = u_small[0]
    u_small[1, 0, 1] += 3e-3  # K between prompts 0 and 1 strictly inside (0, 1)
    u_small[1, 1, 0] -= 3e-3
    small = koth_game(u_small)
    k = affinity_kernel(small, 0)
    assert 1e-6 < k[0, 1] < 0.99
    assert k[0, 2] < 1e-30 and k[1, 2] < 1e-30
    t_small = affinity_target(small, 0)
    filler = np.triu(rng.uniform(-1, 1, size=(5000, m, m)), 1)
    filler = filler - np.swapaxes(filler, 1, 2)  # distinct from the planted rows
    big = koth_game(np.concatenate([small.u_king, filler]))
    t_big = affinity_target(big, 0)
    ratio = t_big[:3] / t_big[:3].sum()
    np.testing.assert_allclose(ratio, t_small, atol=1e-9)
