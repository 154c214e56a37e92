"""Maximum relative entropy CCE (paper App. A) against cvxpy, clone invariance, toy games, joints."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from eqarena.solvers import (
    KothGame,
    NormalFormGame,
    cce,
    chicken,
    deviation_gains,
    joint_deviation_gains,
    joint_exploitability,
    koth_game,
    rps,
    synthetic_king_tensor,
)


def reference_constraints(payoffs: np.ndarray) -> np.ndarray:
    """Rows: one CCE constraint per (player, deviation), sum_a x(a)[u_i(a', a_-i) - u_i(a)] <= 0."""
    n = payoffs.shape[0]
    rows = []
    for i in range(n):
        u = payoffs[i]
        for dev in range(u.shape[i]):
            deviated = np.take(u, [dev], axis=i)  # u_i(a', a_-i), broadcast along axis i
            rows.append((np.broadcast_to(deviated, u.shape) - u).ravel())
    return np.array(rows)


def cvxpy_max_entropy_cce(payoffs: np.ndarray) -> np.ndarray:
    constraints_matrix = reference_constraints(payoffs)
    x = cp.Variable(constraints_matrix.shape[1], nonneg=True)
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(x))), [constraints_matrix @ x <= 0, cp.sum(x) == 1])
    problem.solve(solver=cp.CLARABEL)
    assert problem.status == cp.OPTIMAL
    return np.clip(x.value, 0, None) / np.clip(x.value, 0, None).sum()


def entropy(x: np.ndarray) -> float:
    x = x[x > 0]
    return float(-(x * np.log(x)).sum())


@pytest.mark.parametrize("shape,seed", [((12, 4), 0), ((30, 6), 1), ((50, 8), 2)])
def test_uniform_cce_matches_cvxpy_maximum_entropy(shape, seed):
    num_prompts, num_models = shape
    u = synthetic_king_tensor(num_prompts, num_models, seed=seed)
    game = koth_game(u)
    eq = cce(game, target="uniform")
    reference = cvxpy_max_entropy_cce(game.payoffs)

    constraint_values = reference_constraints(game.payoffs) @ eq.joint.ravel()
    assert constraint_values.max() <= 1e-4
    assert reference_constraints(game.payoffs).dot(reference).max() <= 1e-4
    assert abs(entropy(eq.joint.ravel()) - entropy(reference)) <= 1e-4
    assert np.abs(eq.joint.ravel() - reference).sum() <= 1e-2
    # The structured solver is exact far beyond the test tolerance.
    assert eq.exploitability <= 1e-8
    assert eq.diagnostics["converged"]


def test_dense_and_structured_solvers_and_backends_agree():
    """The structured king-of-the-hill dual, the dense one, in NumPy and in jit-compiled JAX."""
    u = synthetic_king_tensor(20, 5, seed=3)
    u = np.concatenate([u, u[[2, 2, 7]]])  # with duplicated prompts
    game = koth_game(u)
    reference = cce(NormalFormGame(game.payoffs), target="affinity", backend="numpy")
    for solved in (
        cce(game, target="affinity", backend="numpy"),
        cce(game, target="affinity", backend="jax"),
        cce(NormalFormGame(game.payoffs), target="affinity", backend="jax"),
    ):
        assert solved.exploitability <= 1e-8
        assert np.abs(solved.joint - reference.joint).max() <= 1e-7
        for a, b in zip(solved.ratings, reference.ratings):
            assert np.abs(a - b).max() <= 1e-7


def near_duplicate_king_tensor(num_prompts: int, copies: int, seed: int = 0) -> np.ndarray:
    """synthetic_king_tensor(num_prompts, 5) whose prompt 0 is unanimous (|u| = 1 off the diagonal),
    plus `copies` copies of its three most decisive other prompts with Uniform(-0.01, 0.01) noise
    (clipped to [-1, 1], antisymmetric).

    The unanimous prompt's deviation forces the CCE onto a face of the simplex (x = 0 wherever
    |u| < 1), and the copies put entries with |u| just below 1 next to that face.
    """
    base = synthetic_king_tensor(num_prompts, 5, seed=seed)
    unanimous = np.triu(np.where(base[0] >= 0, 1.0, -1.0), k=1)
    base[0] = unanimous - unanimous.T
    rng = np.random.default_rng(seed)
    decisive = 1 + np.argsort(-np.abs(base[1:]).sum(axis=(1, 2)), kind="stable")[:3]
    picked = base[rng.choice(decisive, size=copies)]
    upper = np.clip(np.triu(picked + rng.uniform(-0.01, 0.01, size=picked.shape), k=1), -1.0, 1.0)
    return np.concatenate([base, upper - np.swapaxes(upper, 1, 2)])


@pytest.mark.parametrize("target", ["uniform", "affinity"])
def test_near_duplicate_prompts_converge_in_few_newton_steps(target):
    """A CCE on a face of the simplex with near-duplicate prompts next to it: the dual minimiser
    is at infinity, which damped Newton steps used to approach in thousands of steps."""
    u = near_duplicate_king_tensor(80, 500)
    eq = cce(koth_game(u), target=target)
    assert eq.diagnostics["converged"]
    assert eq.exploitability <= 1e-8
    assert eq.steps <= 30
    assert eq.diagnostics["forcing_deviations"][0] >= 1
    # Exactly zero where a cell's |u| is below the unanimous prompt's 1: the face.
    assert eq.diagnostics["forced_zeros"] > 0
    off_face = (np.abs(u) < 1) & ~np.eye(5, dtype=bool)[None]
    assert np.all(eq.joint[off_face] == 0)


def test_newton_reaches_a_dual_minimiser_at_infinity_geometrically(monkeypatch):
    """Without the facial reduction the prompt multiplier must diverge; adaptive damping lets the
    Newton steps grow it geometrically and still reach the face's CCE."""
    from eqarena.solvers.cce import dual as _cce_dual

    u = near_duplicate_king_tensor(80, 500)
    reduced = cce(koth_game(u), target="uniform")
    monkeypatch.setattr(_cce_dual, "koth_face", lambda u, s: (s, tuple(np.zeros(n, bool) for n in u.shape)))
    eq = cce(koth_game(u), target="uniform")
    assert eq.diagnostics["converged"] and eq.diagnostics["forced_zeros"] == 0
    assert eq.exploitability <= 1e-8
    assert eq.steps <= 150
    assert np.abs(eq.joint - reduced.joint).max() <= 1e-3


def test_near_duplicate_cce_matches_cvxpy_and_dense_solver():
    u = near_duplicate_king_tensor(6, 6)
    game = koth_game(u)
    eq = cce(game, target="uniform")
    reference = cvxpy_max_entropy_cce(game.payoffs)

    assert eq.exploitability <= 1e-9
    assert eq.diagnostics["forced_zeros"] > 0
    forced = eq.joint.ravel() == 0
    assert reference[forced].sum() <= 1e-4  # cvxpy finds the same face up to its tolerance
    assert abs(entropy(eq.joint.ravel()) - entropy(reference)) <= 2e-4
    assert np.abs(eq.joint.ravel() - reference).sum() <= 1e-3

    dense = cce(NormalFormGame(game.payoffs), target="uniform")
    assert dense.diagnostics["forced_zeros"] == eq.diagnostics["forced_zeros"]
    assert np.abs(dense.joint - eq.joint).max() <= 1e-9


def test_custom_target_minimises_relative_entropy():
    rng = np.random.default_rng(5)
    game = NormalFormGame(rng.uniform(-1, 1, size=(3, 3, 4, 2)))
    targets = [rng.dirichlet(np.ones(n)) for n in game.num_actions]
    eq = cce(game, target=targets)
    log_t = sum(np.log(t).reshape([-1 if j == i else 1 for j in range(3)]) for i, t in enumerate(targets)).ravel()
    a = reference_constraints(game.payoffs)
    x = cp.Variable(a.shape[1], nonneg=True)
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(x)) + log_t @ x), [a @ x <= 0, cp.sum(x) == 1])
    problem.solve(solver=cp.CLARABEL)
    reference = np.clip(x.value, 0, None)
    assert np.abs(eq.joint.ravel() - reference / reference.sum()).sum() <= 1e-3
    assert abs(eq.diagnostics["kl_to_target"] - (-problem.value)) <= 1e-5


def with_prompt_copies(u: np.ndarray, copies: dict[int, int]) -> tuple[np.ndarray, list[int]]:
    """Append exact copies of prompts; returns the tensor and each prompt's original index."""
    origin = list(range(len(u))) + [p for p, n in copies.items() for _ in range(n)]
    return u[origin], origin


def test_affinity_cce_is_invariant_to_prompt_clones():
    u = synthetic_king_tensor(40, 6, seed=11)
    cloned, origin = with_prompt_copies(u, {0: 5, 3: 2, 17: 9})
    origin = np.array(origin)
    base = cce(koth_game(u), target="affinity")
    with_clones = cce(koth_game(cloned), target="affinity")

    assert with_clones.exploitability <= 1e-8
    # Ratings of the original prompts and of every model are unchanged; clones share their rating.
    assert np.abs(with_clones.ratings[0][: len(u)] - base.ratings[0]).max() <= 1e-3
    assert np.abs(with_clones.ratings[0] - base.ratings[0][origin]).max() <= 1e-3
    for player in (1, 2):
        assert np.abs(with_clones.ratings[player] - base.ratings[player]).max() <= 1e-3
        assert np.abs(with_clones.marginals[player] - base.marginals[player]).max() <= 1e-6
    # Each clone group carries the original prompt's mass.
    group_mass = np.bincount(origin, weights=with_clones.marginals[0], minlength=len(u))
    assert np.abs(group_mass - base.marginals[0]).max() <= 1e-6

    uniform_base = cce(koth_game(u), target="uniform")
    uniform_clones = cce(koth_game(cloned), target="uniform")
    change = max(
        np.abs(uniform_clones.ratings[p][: len(u) if p == 0 else None] - uniform_base.ratings[p]).max()
        for p in range(3)
    )
    assert change > 1e-2  # the uniform target (maximum Shannon entropy) is not clone-invariant


def test_affinity_cce_chicken_is_invariant_to_a_cloned_straight():
    base = cce(chicken(), target="affinity")
    cloned = cce(chicken(clone_straight=True), target="affinity")
    for player in (0, 1):
        assert np.allclose(cloned.ratings[player], base.ratings[player][[0, 1, 1]], atol=1e-6)
        m = cloned.marginals[player]
        assert np.allclose([m[0], m[1] + m[2]], base.marginals[player], atol=1e-6)
    uniform, uniform_base = cce(chicken(clone_straight=True), target="uniform"), cce(chicken(), target="uniform")
    for player in (0, 1):  # Straight's rating moves when it is cloned (0.8 here); affinity's did not
        assert abs(uniform.ratings[player][1] - uniform_base.ratings[player][1]) > 0.5


@pytest.mark.parametrize("clone_rock", [False, True])
@pytest.mark.parametrize("target", ["affinity", "uniform"])
def test_rps_cce_rates_every_action_zero(clone_rock, target):
    eq = cce(rps(clone_rock=clone_rock), target=target)
    for r in eq.ratings:
        assert np.abs(r).max() <= 1e-8
    assert eq.exploitability <= 1e-8


def test_joint_gains_of_a_product_joint_are_the_product_profile_gains():
    game = koth_game(synthetic_king_tensor(9, 4, seed=4))
    rng = np.random.default_rng(0)
    marginals = [rng.dirichlet(np.ones(n)) for n in game.num_actions]
    joint = np.einsum("p,k,r->pkr", *marginals)
    for structured, dense, product in zip(
        joint_deviation_gains(game, joint),
        joint_deviation_gains(NormalFormGame(game.payoffs), joint),
        deviation_gains(game, marginals),
    ):
        assert np.allclose(structured, product, atol=1e-12)
        assert np.allclose(dense, product, atol=1e-12)
    assert joint_exploitability(game, joint) > 0


def test_joint_exploitability_detects_a_non_cce():
    game = chicken()
    both_straight = np.array([[0.0, 0.0], [0.0, 1.0]])  # each player gains 11 by swerving
    gains = joint_deviation_gains(game, both_straight)
    assert np.allclose(gains[0], [11.0, 0.0])
    assert joint_exploitability(game, both_straight) == pytest.approx(22.0)


def test_bad_inputs_raise_clear_errors():
    game = rps()
    with pytest.raises(ValueError, match="target"):
        cce(game, target="shannon")
    with pytest.raises(ValueError, match=r"target\[1\]"):
        cce(game, target=[np.ones(3), np.ones(2)])
    with pytest.raises(ValueError, match="joint"):
        joint_deviation_gains(game, np.ones((3, 3)))
    with pytest.raises(TypeError):
        cce(np.zeros((2, 2, 2)))
    assert isinstance(koth_game(synthetic_king_tensor(3, 2)), KothGame)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("target", ["affinity", "uniform"])
def test_a_start_from_a_nearby_games_multipliers_gives_the_same_cce_in_fewer_steps(backend, target):
    """A bootstrap replicate started from the full data's dual multipliers: the CCE is unique, so the same
    joint comes back, and Newton starts near the minimiser."""
    u = synthetic_king_tensor(18, 12, seed=4)
    full = cce(koth_game(u), target=target, backend=backend)
    assert [len(a) for a in full.multipliers] == [18, 12, 12] and all(np.all(a >= 0) for a in full.multipliers)
    fewer = 0
    for replicate in range(4):
        rows = np.sort(np.random.default_rng(replicate).choice(18, size=14, replace=False))
        game = koth_game(u[rows])
        cold = cce(game, target=target, backend=backend)
        warm = cce(
            game,
            target=target,
            backend=backend,
            start=[full.multipliers[0][rows], full.multipliers[1], full.multipliers[2]],
        )
        assert warm.diagnostics["start"] == "used" and warm.exploitability <= 1e-8
        assert np.abs(warm.joint - cold.joint).max() <= 1e-8
        for a, b in zip(warm.ratings, cold.ratings):
            assert np.abs(a - b).max() <= 1e-8
        fewer += warm.steps < cold.steps
    assert fewer >= 3


def test_a_start_at_the_solution_needs_no_step_and_the_dense_solver_takes_one_too():
    game = koth_game(synthetic_king_tensor(10, 4, seed=2))
    solved = cce(game)
    again = cce(game, start=solved.multipliers)
    assert again.steps <= 1 and np.abs(again.joint - solved.joint).max() <= 1e-9
    dense = NormalFormGame(game.payoffs)
    reference = cce(dense)
    restarted = cce(dense, start=reference.multipliers)
    assert restarted.steps <= 1 and np.abs(restarted.joint - reference.joint).max() <= 1e-9


def test_a_start_that_stalls_is_abandoned_for_the_solve_from_zero():
    """Multipliers far out in the dual make the start's joint a point mass whose line search stalls in
    rounding: the solve starts again from 0 and still returns the CCE."""
    game = koth_game(synthetic_king_tensor(12, 4, seed=1))
    cold = cce(game)
    far = [np.full(12, 1e6), np.full(4, 1e6), np.zeros(4)]
    warm = cce(game, start=far)
    assert warm.diagnostics["start"] == "abandoned: solved from 0"
    assert warm.exploitability <= 1e-8 and np.abs(warm.joint - cold.joint).max() <= 1e-9


def test_a_bad_start_names_the_player():
    game = koth_game(synthetic_king_tensor(5, 3, seed=0))
    with pytest.raises(ValueError, match=r"start: expected 3"):
        cce(game, start=[np.zeros(5)])
    with pytest.raises(ValueError, match=r"start\[1\]"):
        cce(game, start=[np.zeros(5), np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match=r"start\[2\]"):
        cce(game, start=[np.zeros(5), np.zeros(3), -np.ones(3)])
