"""NE (limiting logit equilibrium) ratings: toy games (App. D, E), clone invariance, structure, properties."""

from __future__ import annotations

import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eqarena.solvers import Equilibrium, NormalFormGame, deviation_gains, koth_game, synthetic_king_tensor
from eqarena.solvers.games.entropy import affinity_targets
from eqarena.solvers.nash._continuation import BranchLimit
from eqarena.solvers.nash._polish import polish
from eqarena.solvers.nash.limiting_logit import nash
from eqarena.solvers.nash.logit import KothLogitSystem

RPS = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])
CHICKEN = np.array([[0.0, -1.0], [1.0, -12.0]])  # row player's payoff: Swerve, Straight


def _symmetric(a: np.ndarray) -> NormalFormGame:
    return NormalFormGame(np.stack([a, a.T]))


def _zero_sum(a: np.ndarray) -> NormalFormGame:
    return NormalFormGame(np.stack([a, -a]))


def _clone(a: np.ndarray, action: int) -> np.ndarray:
    idx = list(range(len(a)))
    idx.insert(action + 1, action)
    return a[np.ix_(idx, idx)]


def _random_king(rng, p, m, grid=False):
    if grid:
        u = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(p, m, m))
    else:
        u = rng.uniform(-1.0, 1.0, size=(p, m, m))
    u = np.triu(u, 1)
    return u - np.swapaxes(u, 1, 2)


def _assert_exact_ne(eq: Equilibrium, tol: float = 1e-9):
    assert eq.joint is None
    assert eq.exploitability <= tol
    for x in eq.marginals:
        assert np.all(x >= 0) and x.sum() == pytest.approx(1.0, abs=1e-12)


# ---- App. D: rock-paper-scissors ---------------------------------------------------------------


@pytest.mark.parametrize("target", ["affinity", "uniform"])
@pytest.mark.parametrize("clone_rock", [False, True])
def test_rps_ratings_are_all_zero(target, clone_rock):
    a = _clone(RPS, 0) if clone_rock else RPS
    eq = nash(_zero_sum(a), target)
    _assert_exact_ne(eq)
    for r in eq.ratings:
        np.testing.assert_allclose(r, 0.0, atol=1e-9)
    for x in eq.marginals:
        groups = [x[0] + x[1], x[2], x[3]] if clone_rock else x
        np.testing.assert_allclose(groups, 1 / 3, atol=1e-9)


# ---- App. E: chicken ---------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["affinity", "uniform"])
def test_chicken_selects_the_mixed_equilibrium(target):
    eq = nash(_symmetric(CHICKEN), target)
    _assert_exact_ne(eq)
    for x, r in zip(eq.marginals, eq.ratings):
        np.testing.assert_allclose(x, [11 / 12, 1 / 12], atol=1e-9)
        np.testing.assert_allclose(r, 0.0, atol=1e-9)
    values = deviation_gains(_symmetric(CHICKEN), eq.marginals)
    np.testing.assert_allclose(np.asarray(values[0]), 0.0, atol=1e-9)


def test_chicken_with_a_duplicated_straight_still_selects_the_mixed_equilibrium():
    game = _symmetric(_clone(CHICKEN, 1))  # Swerve, Straight, Straight
    eq = nash(game, "affinity")
    _assert_exact_ne(eq)
    for x, r in zip(eq.marginals, eq.ratings):
        assert x[0] == pytest.approx(11 / 12, abs=1e-9)
        assert x[1] + x[2] == pytest.approx(1 / 12, abs=1e-9)
        assert x[1] == pytest.approx(x[2], abs=1e-9)
        np.testing.assert_allclose(r, 0.0, atol=1e-9)
    # The affinity target itself already treats the two Straights as one action.
    for t in affinity_targets(game):
        np.testing.assert_allclose(t, [0.5, 0.25, 0.25], atol=1e-12)


def test_a_pure_equilibrium_game_ends_on_its_risk_dominant_pure_profile():
    # Stag hunt: (Hare, Hare) risk-dominates; the logit branch from uniform ends there.
    a = np.array([[4.0, 0.0], [3.0, 3.0]])
    eq = nash(_symmetric(a), "uniform")
    _assert_exact_ne(eq)
    for x in eq.marginals:
        np.testing.assert_allclose(x, [0.0, 1.0], atol=1e-9)


# ---- structure: the king-of-the-hill reduced system agrees with the dense game -----------------


def test_king_of_the_hill_path_matches_the_dense_path_on_the_same_game():
    rng = np.random.default_rng(21)
    for p, m in [(6, 3), (12, 4), (20, 5)]:
        game = koth_game(_random_king(rng, p, m))
        dense = NormalFormGame(game.payoffs)
        for target in ("uniform", "affinity"):
            a, b = nash(game, target), nash(dense, target)
            _assert_exact_ne(a)
            _assert_exact_ne(b)
            for x, y in zip(a.marginals, b.marginals):
                np.testing.assert_allclose(x, y, atol=1e-7)
            for x, y in zip(a.ratings, b.ratings):
                np.testing.assert_allclose(x, y, atol=1e-7)


def test_numpy_and_jax_backends_evaluate_the_same_system():
    rng = np.random.default_rng(22)
    game = koth_game(_random_king(rng, 15, 4))
    log_t = [np.log(rng.dirichlet(np.ones(n))) for n in game.num_actions]
    with jax.enable_x64(True):  # the internal system runs inside `nash`, which holds float64
        systems = [KothLogitSystem(game, log_t, backend) for backend in ("numpy", "jax")]
        r = systems[0].start() + rng.normal(scale=0.2, size=systems[0].dim)
        r[-1] = 3.7
        row = rng.normal(size=systems[0].dim)
        a, b = (s.factor(r, row) for s in systems)
        for x, y in [(a.residual, b.residual), (a.correction, b.correction), (a.tangent, b.tangent)]:
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=1e-12)
        ca, cb = systems[0].chord(r, a.factors), systems[1].chord(r, b.factors)
        np.testing.assert_allclose(ca.correction, cb.correction, atol=1e-12)
    eq_np, eq_jax = nash(game, "uniform"), nash(game, "uniform", backend="jax")
    for x, y in zip(eq_np.marginals, eq_jax.marginals):
        np.testing.assert_allclose(x, y, atol=1e-9)


def test_skipping_prompts_without_mass_changes_nothing():
    rng = np.random.default_rng(24)
    game = koth_game(_random_king(rng, 300, 5))
    log_t = [np.log(np.full(n, 1.0 / n)) for n in game.num_actions]
    pruned, full = KothLogitSystem(game, log_t, prune=True), KothLogitSystem(game, log_t, prune=False)
    r = pruned.start()
    r[-1] = 400.0  # far enough along the branch that most prompts carry no mass
    row = np.eye(pruned.dim)[-1]
    a, b = pruned.factor(r, row), full.factor(r, row)
    assert a.factors[1] is not None and len(a.factors[1][0]) < 240  # the subset is in use
    np.testing.assert_allclose(a.correction, b.correction, atol=1e-10)
    np.testing.assert_allclose(a.tangent, b.tangent, atol=1e-10)
    moved = r + 0.01 * a.tangent / np.linalg.norm(a.tangent)
    ca, cb = pruned.chord(moved, a.factors), full.chord(moved, b.factors)
    np.testing.assert_allclose(ca.residual, cb.residual, atol=1e-12)
    np.testing.assert_allclose(ca.correction, cb.correction, atol=1e-10)
    np.testing.assert_allclose(ca.marginals[0], cb.marginals[0], atol=1e-15)


def test_reduced_jacobian_matches_finite_differences():
    rng = np.random.default_rng(23)
    game = koth_game(_random_king(rng, 9, 4))
    log_t = [np.log(rng.dirichlet(np.ones(n))) for n in game.num_actions]
    system = KothLogitSystem(game, log_t)
    r = system.start() + rng.normal(scale=0.3, size=system.dim)
    r[-1] = 2.5
    ev = system.factor(r, np.eye(system.dim)[0])
    jac = ev.factors[0][:-1]
    eps = 1e-6
    for k in range(system.dim):
        dr = np.zeros(system.dim)
        dr[k] = eps
        plus = system.chord(r + dr, ev.factors).residual
        minus = system.chord(r - dr, ev.factors).residual
        np.testing.assert_allclose(jac[:, k], (plus - minus) / (2 * eps), atol=1e-6)


# ---- clone invariance (Section 4.2) ------------------------------------------------------------


def test_affinity_ne_is_invariant_to_cloned_prompts():
    rng = np.random.default_rng(31)
    p, m = 25, 6
    base = _random_king(rng, p, m)
    copies = {3: 1, 7: 4, 11: 2}  # prompt -> number of extra exact copies
    extra = np.concatenate([np.repeat(base[[k]], n, axis=0) for k, n in copies.items()])
    cloned = np.concatenate([base, extra])
    owner = np.concatenate([np.arange(p), np.repeat(list(copies), list(copies.values()))])
    g0, g1 = koth_game(base), koth_game(cloned)
    a0, a1 = nash(g0, "affinity"), nash(g1, "affinity")
    _assert_exact_ne(a0, 1e-6)
    _assert_exact_ne(a1, 1e-6)
    for player in (1, 2):
        np.testing.assert_allclose(a1.ratings[player], a0.ratings[player], atol=1e-3)
        np.testing.assert_allclose(a1.marginals[player], a0.marginals[player], atol=1e-3)
    np.testing.assert_allclose(a1.ratings[0][:p], a0.ratings[0], atol=1e-3)
    group_mass = np.bincount(owner, weights=a1.marginals[0], minlength=p)
    np.testing.assert_allclose(group_mass, a0.marginals[0], atol=1e-3)
    for k in copies:
        np.testing.assert_allclose(a1.ratings[0][owner == k], a0.ratings[0][k], atol=1e-3)


def test_uniform_target_ne_moves_under_prompt_clones_where_affinity_does_not():
    """The contrast of Section 4.2 on a game with several equilibria: six copies each of two prompts
    of the uniform-target LLE's support move its model ratings; the affinity-selected NE keeps them."""
    base = _random_king(np.random.default_rng(16), 12, 4, grid=True)
    cloned = np.concatenate([base, np.repeat(base[[4, 9]], 6, axis=0)])
    g0, g1 = koth_game(base), koth_game(cloned)

    def change(target: str) -> float:
        e0, e1 = nash(g0, target), nash(g1, target)
        _assert_exact_ne(e0, 1e-6)
        _assert_exact_ne(e1, 1e-6)
        return max(float(np.abs(x - y).max()) for x, y in zip(e1.ratings[1:], e0.ratings[1:]))

    assert change("uniform") > 0.1
    assert change("affinity") < 1e-6


def test_affinity_ne_is_invariant_to_a_cloned_model_in_a_dense_game():
    rng = np.random.default_rng(32)
    a = rng.normal(size=(4, 4))
    b = rng.normal(size=(4, 4))
    idx = [0, 1, 2, 2, 3]  # duplicate the row player's action 2
    g0 = NormalFormGame(np.stack([a, b]))
    g1 = NormalFormGame(np.stack([a[idx], b[idx]]))
    e0, e1 = nash(g0, "affinity"), nash(g1, "affinity")
    _assert_exact_ne(e0)
    _assert_exact_ne(e1)
    x = e1.marginals[0]
    np.testing.assert_allclose([x[0], x[1], x[2] + x[3], x[4]], e0.marginals[0], atol=1e-6)
    np.testing.assert_allclose(e1.marginals[1], e0.marginals[1], atol=1e-6)
    np.testing.assert_allclose(e1.ratings[0][idx.index(2)], e0.ratings[0][2], atol=1e-6)


# ---- the paper's annealed-loss solver (App. F) -------------------------------------------------


def test_anneal_follows_the_paper_schedule_on_chicken():
    eq = nash(_symmetric(CHICKEN), "uniform", method="anneal", max_steps=60_000)
    assert eq.method == "anneal"
    # Chicken's payoffs span 13: the QRE at the floor temperature 1e-2 is not yet a 1e-3-NE, so the
    # schedule runs to its step budget with tau at the floor, close to the mixed equilibrium.
    assert eq.final_temperature == pytest.approx(1e-2)
    assert eq.steps == 60_000
    assert eq.exploitability <= 1e-2
    np.testing.assert_allclose(eq.marginals[0], [11 / 12, 1 / 12], atol=1e-2)


def test_anneal_stops_early_at_an_epsilon_ne():
    eq = nash(_zero_sum(RPS), "uniform", method="anneal", max_steps=60_000)
    assert eq.diagnostics["stop_reason"] == "epsilon_ne"
    assert eq.steps == 250 and eq.exploitability <= 1e-3


def test_anneal_runs_on_king_of_the_hill_games():
    game = koth_game(_random_king(np.random.default_rng(41), 8, 3))
    eq = nash(game, "affinity", method="anneal", max_steps=2_000)
    assert eq.steps <= 2_000
    assert np.isfinite(eq.exploitability)
    for x in eq.marginals:
        assert x.sum() == pytest.approx(1.0)


# ---- robustness at scale -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def grid_game_1000():
    """1000x32x32 on the 5-point judgment grid: a coarse step control jumps branches here."""
    return koth_game(_random_king(np.random.default_rng(0), 1000, 32, grid=True))


def test_a_trace_that_jumps_off_the_branch_is_detected_and_retraced(grid_game_1000):
    # Corrections up to 1, contractions up to 0.9 and steps doubling: the trace leaves the branch (with the
    # Euler predictor, max_distance=0.4 alone did; the bent predictor stays on the branch there).
    coarse = nash(grid_game_1000, "uniform", max_distance=1.0, max_contraction=0.9, max_accel=2.0)
    first = coarse.diagnostics["traces"][0]
    assert first["stop_reason"] == "left_branch" and first["exploitability"] > 1e-2
    assert coarse.diagnostics["retraces"] >= 1
    assert coarse.diagnostics["stop_reason"] == "converged"
    assert coarse.exploitability <= 1e-6
    assert coarse.steps == sum(t["steps"] for t in coarse.diagnostics["traces"])

    default = nash(grid_game_1000, "uniform")
    assert default.diagnostics["retraces"] == 0 and default.exploitability <= 1e-6
    for x, y in zip(coarse.marginals, default.marginals):  # both traces end where the branch ends
        np.testing.assert_allclose(x, y, atol=1e-6)


def test_a_predictor_step_onto_a_singular_jacobian_is_shortened():
    """An 80x5x5 game (a noisy replicate met in adaptive judging) whose trace once put a predictor point
    exactly where the bordered Jacobian is singular; numpy's solve raised there and the solve failed."""
    game = koth_game(np.load(Path(__file__).parent / "data" / "singular_predictor_game.npy"))
    eq = nash(game, "affinity")
    _assert_exact_ne(eq)
    assert eq.diagnostics["stop_reason"] == "converged" and eq.diagnostics["retraces"] == 0


def test_branch_limit_extrapolates_power_and_log_tails():
    """A branch creeping along a continuum of equilibria: its limit is extrapolated, not its last point."""
    limit = np.array([0.2, 0.8])
    limiter = BranchLimit()
    for lam in np.geomspace(10.0, 1e6, 80):
        limiter.add(lam, limit + np.array([3.0 * lam**-0.5, -(2.0 + np.log(lam)) / lam]))
    np.testing.assert_allclose(limiter.estimate(), limit, atol=1e-10)
    assert limiter.change < 1e-9
    assert np.abs(limiter.points[-1] - limit).sum() > 1e-3


# ---- API and properties ------------------------------------------------------------------------


def test_result_fields_and_custom_targets():
    game = koth_game(_random_king(np.random.default_rng(51), 10, 4))
    eq = nash(game, "uniform")
    assert eq.method == "branch" and eq.target == "uniform"
    assert eq.steps > 0 and eq.seconds > 0 and eq.final_temperature > 0
    assert eq.diagnostics["stop_reason"] == "converged"
    assert [len(x) for x in eq.marginals] == [10, 4, 4]
    uniform = [np.full(n, 1.0 / n) for n in game.num_actions]
    custom = nash(game, uniform)
    assert custom.target == "custom"
    for x, y in zip(custom.marginals, eq.marginals):
        np.testing.assert_allclose(x, y, atol=1e-9)


def test_bad_arguments_are_named():
    game = _zero_sum(RPS)
    with pytest.raises(ValueError, match="target"):
        nash(game, "shannon")
    with pytest.raises(ValueError, match="retraces"):
        nash(game, "uniform", retraces=-1)
    with pytest.raises(ValueError, match=r"target\[1\]"):
        nash(game, [np.ones(3) / 3, np.array([1.0, 0.0, 0.0])])
    with pytest.raises(ValueError, match="method"):
        nash(game, method="lemke")
    with pytest.raises(TypeError, match="unknown option"):
        nash(game, max_stepz=3)
    with pytest.raises(TypeError, match="NormalFormGame or KothGame"):
        nash(RPS)


@settings(max_examples=12, deadline=None)
@given(st.integers(2, 12), st.integers(2, 5), st.booleans(), st.integers(0, 2**31 - 1))
def test_random_king_of_the_hill_games_give_exact_equilibria(p, m, grid, seed):
    rng = np.random.default_rng(seed)
    u = _random_king(rng, p, m, grid)
    game = koth_game(u)
    np.testing.assert_array_equal(game.u_king, -np.swapaxes(game.u_king, 1, 2))
    eq = nash(game, "affinity")
    assert eq.exploitability >= -1e-12
    assert eq.exploitability <= 1e-6
    for x, r in zip(eq.marginals, eq.ratings):
        assert float(x @ r) == pytest.approx(0.0, abs=1e-12)  # the profile's own gain is zero
        assert r.max() >= -1e-12
        assert np.all(r[x > 1e-3] >= -1e-3)  # actions with real mass are (near) best responses
    recomputed = deviation_gains(game, eq.marginals)
    for r, g in zip(eq.ratings, recomputed):
        np.testing.assert_allclose(r, np.asarray(g), atol=1e-12)


def test_affinity_target_with_zero_mass_actions_still_gives_an_exact_nash():
    """Noisy copies of prompts form near-clone components in which the affinity target gives most
    copies exactly zero mass; the branch starts from a strictly positive target all the same."""
    import warnings

    from eqarena.solvers import synthetic_king_tensor
    from eqarena.solvers.analyses.clones import with_clones
    from eqarena.solvers.games.entropy import affinity_targets

    u = synthetic_king_tensor(40, 5, seed=3)
    u = with_clones(u, np.repeat([0, 1, 2], 60), noise=0.01, rng=np.random.default_rng(0))
    game = koth_game(u)
    assert (affinity_targets(game)[0] == 0).sum() > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no log(0)
        eq = nash(game, "affinity")
    assert eq.exploitability <= 1e-6
    assert all(np.isfinite(x).all() and abs(x.sum() - 1) < 1e-12 for x in eq.marginals)


# Prompts of a synthetic 40 x 6 game (one bootstrap draw): the limit plays five of them, pairwise alike
# (2 + 3) against the king and the two rebels it plays but not against the others.
ALIKE_ON_SUPPORT = [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 14, 15, 17, 19, 20, 24, 25, 29, 31, 32, 33, 34, 37, 38, 39]


def test_a_polish_that_merges_actions_alike_only_on_the_support_is_not_regular():
    """Prompts alike against the support's models but not the others' can share their mass in any split,
    so the polished point is not isolated; made exact copies, the same prompts split as the target."""
    u = synthetic_king_tensor(40, 6, seed=2)[ALIKE_ON_SUPPORT]
    eq = nash(koth_game(u))
    supports = [np.flatnonzero(x > 1e-6) for x in eq.marginals]
    assert [len(s) for s in supports] == [5, 1, 2]
    polished, _, regular = polish(koth_game(u), eq.marginals, supports)
    assert polished is not None and not regular
    alike = np.abs(u[supports[0]][:, supports[1]][:, :, supports[2]]).reshape(5, -1)
    groups = [supports[0][np.all(alike == row, axis=1)] for row in np.unique(alike, axis=0)]
    assert sorted(len(g) for g in groups) == [2, 3]
    copies = u.copy()
    for group in groups:
        copies[group] = u[group[0]]
    polished, _, regular = polish(koth_game(copies), eq.marginals, supports)
    assert polished is not None and regular


def test_a_predictor_that_overflows_is_rejected_without_a_warning():
    """A 120x8x8 game (prompts of a baseline-only preference table, 75% imputed) whose trace reaches
    lambda ~ 1e6, where a predictor point's logits overflow. That step is rejected; it used to print
    numpy's overflow RuntimeWarnings on the user's console from inside the solver."""
    game = koth_game(np.load(Path(__file__).parent / "data" / "overflowing_predictor_game.npy"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eq = nash(game, "uniform")
    # What is asserted is the warning-free trace and a proper profile at its end. Whether this degenerate
    # game's branch ends at an isolated point (1e-16 here) or creeping (issue 45) may depend on rounding.
    assert eq.diagnostics["stop_reason"] == "converged" and np.isfinite(eq.exploitability)
    for x in eq.marginals:
        assert np.all(np.asarray(x) >= 0.0) and abs(float(np.sum(x)) - 1.0) <= 1e-9
