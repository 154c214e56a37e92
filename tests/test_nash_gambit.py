"""The limiting logit equilibrium against Gambit's logit tracer (pygambit.nash.logit_solve)."""

from __future__ import annotations

import numpy as np
import pygambit
import pytest

from eqarena.solvers import koth_game, synthetic_king_tensor
from eqarena.solvers.nash.limiting_logit import nash
from tests.test_nash import ALIKE_ON_SUPPORT


def _random_king(rng, p, m, grid):
    if grid:
        u = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(p, m, m))
    else:
        u = rng.uniform(-1.0, 1.0, size=(p, m, m))
    u = np.triu(u, 1)
    return u - np.swapaxes(u, 1, 2)


def _tied_king(rng, p, m, labels, probs=None):
    """A king tensor with entries drawn from a judgment grid (`labels`, weights `probs`): many ties."""
    u = np.triu(rng.choice(labels, size=(p, m, m), p=probs), 1)
    return u - np.swapaxes(u, 1, 2)


def gambit_lle(payoffs: np.ndarray, maxregret: float = 1e-8) -> list[np.ndarray]:
    """Gambit's logit-branch end point for a dense game (float payoff arrays, one per player).

    Gambit stops at the first point whose regret is below `maxregret` (relative to the payoff range).
    """
    game = pygambit.StrategicGame.from_arrays(*[np.asarray(p, dtype=float) for p in payoffs])
    result = pygambit.nash.logit_solve(game, maxregret=maxregret)
    assert result.success
    profile = result.equilibrium
    return [np.array([float(profile[pl][s]) for s in game.get_strategies(pl)]) for pl in game.players]


CASES = [(10, 4, True, 1), (20, 5, False, 2), (30, 6, True, 3), (40, 6, False, 4), (50, 8, True, 5), (50, 8, False, 6)]


@pytest.mark.parametrize("p,m,grid,seed", CASES)
def test_branch_end_matches_gambit_logit_solve(p, m, grid, seed):
    game = koth_game(_random_king(np.random.default_rng(seed), p, m, grid))
    reference = gambit_lle(game.payoffs)
    eq = nash(game, "uniform")
    error = sum(float(np.abs(x - y).sum()) for x, y in zip(eq.marginals, reference))
    assert eq.exploitability <= 1e-6
    assert error <= 1e-2, f"L1 distance to Gambit {error:.3g}"
    # The paper's annealing (25k Adam steps) lands farther from Gambit's LLE and less exact than the branch.
    annealed = nash(game, "uniform", method="anneal", max_steps=25_000)
    anneal_error = sum(float(np.abs(x - y).sum()) for x, y in zip(annealed.marginals, reference))
    assert error < anneal_error and eq.exploitability < annealed.exploitability


def test_gambit_reference_reads_payoffs_in_player_order():
    # A general-sum matching-pennies variant whose unique equilibrium is mixed:
    # row indifferent when 2y - 1 = 1 - 2y (y = 1/2), column when 1 - 2x = 4x - 2 (x = 1/2).
    a = np.array([[1.0, -1.0], [-1.0, 1.0]])
    b = np.array([[-1.0, 2.0], [1.0, -2.0]])
    ref = gambit_lle(np.stack([a, b]))
    for x in ref:
        np.testing.assert_allclose(x, [0.5, 0.5], atol=1e-6)
    from eqarena.solvers import NormalFormGame

    eq = nash(NormalFormGame(np.stack([a, b])), "uniform")
    for x, y in zip(eq.marginals, ref):
        np.testing.assert_allclose(x, y, atol=1e-6)


def test_branch_is_followed_on_a_game_with_cloned_prompts():
    """Big steps can jump between branches here (a too-greedy step control once did)."""
    rng = np.random.default_rng(31)
    base = np.triu(rng.uniform(-1.0, 1.0, size=(25, 6, 6)), 1)
    base = base - np.swapaxes(base, 1, 2)
    copies = {3: 1, 7: 4, 11: 2}
    extra = np.concatenate([np.repeat(base[[k]], n, axis=0) for k, n in copies.items()])
    game = koth_game(np.concatenate([base, extra]))
    reference = gambit_lle(game.payoffs)
    eq = nash(game, "uniform")
    error = sum(float(np.abs(x - y).sum()) for x, y in zip(eq.marginals, reference))
    assert eq.exploitability <= 1e-6
    assert error <= 1e-2, f"L1 distance to Gambit {error:.3g}"


FIVE = (-1.0, -0.5, 0.0, 0.5, 1.0)  # the five-label verdict grid
THREE = (-1.0, 0.0, 1.0)  # three-class judges
GRIDS = {  # name: (labels, their probabilities)
    "five": (FIVE, None),
    "five-mostly-ties": (FIVE, (0.05, 0.05, 0.8, 0.05, 0.05)),
    "five-decisive": (FIVE, (0.4, 0.05, 0.1, 0.05, 0.4)),
    "three": (THREE, None),
}

# Grid-payoff games with a continuum of equilibria, where the branch creeps along the face it reaches:
# its first exact point (and a Newton polish from there) lies on that face but not at the branch's
# limit (L1 1e-3 to 1e-1 from it).
DEGENERATE = [
    (10, 4, "five", 4),
    (10, 4, "five-mostly-ties", 3),
    (10, 4, "five-decisive", 2),
    (10, 4, "five-decisive", 13),
    (20, 5, "five-decisive", 25),
    (10, 4, "three", 7),
    (10, 4, "three", 12),
    (10, 4, "three", 14),
    (10, 4, "three", 25),
    (10, 4, "three", 26),
    (10, 4, "three", 37),
    (20, 5, "three", 34),
    (20, 5, "three", 39),
    (30, 6, "three", 27),
    (50, 8, "three", 4),
]


@pytest.mark.parametrize("p,m,grid,seed", DEGENERATE, ids=[f"{p}x{m}-{g}-{s}" for p, m, g, s in DEGENERATE])
def test_branch_limit_matches_gambit_on_degenerate_games(p, m, grid, seed):
    game = koth_game(_tied_king(np.random.default_rng(seed), p, m, *GRIDS[grid]))
    eq = nash(game, "uniform")
    assert eq.diagnostics["limit"] != "isolated"
    # Gambit's own end creeps too: with a tight regret target it is close enough to the limit.
    reference = gambit_lle(game.payoffs, maxregret=1e-10)
    error = sum(float(np.abs(x - y).sum()) for x, y in zip(eq.marginals, reference))
    assert eq.exploitability <= 1e-6
    assert error <= 1e-3, f"L1 distance to Gambit {error:.3g} ({eq.diagnostics['limit']})"


def test_an_indifferent_player_ends_at_its_target_share_not_at_the_first_exact_point():
    """Prompt 8 and king 2 are pure in the limit and the rebel is indifferent: the logit branch
    gives the rebel its target (uniform) in the limit, while every rebel mix is exact."""
    game = koth_game(_random_king(np.random.default_rng(4), 10, 4, True))
    eq = nash(game, "uniform")
    np.testing.assert_allclose(eq.marginals[0], np.eye(10)[8], atol=1e-9)
    np.testing.assert_allclose(eq.marginals[1], np.eye(4)[2], atol=1e-9)
    np.testing.assert_allclose(eq.marginals[2], np.full(4, 0.25), atol=1e-7)
    assert eq.exploitability <= 1e-12
    assert eq.diagnostics["degenerate"]


def test_actions_alike_only_on_the_support_split_their_mass_as_the_branch_limit_does():
    """A support polish merges the alike prompts and keeps the split of the branch point it starts from:
    an exact equilibrium, but not the branch's limit, whose split still moves with the mass off the
    support (taken for the end, it lay 0.02 in L1 from Gambit's)."""
    game = koth_game(synthetic_king_tensor(40, 6, seed=2)[ALIKE_ON_SUPPORT])
    reference = gambit_lle(game.payoffs, maxregret=1e-8)
    for target in ("uniform", "affinity"):  # no two actions are alike in the whole game: the same target
        eq = nash(game, target)
        assert eq.diagnostics["limit"] != "isolated"
        error = sum(float(np.abs(x - y).sum()) for x, y in zip(eq.marginals, reference))
        assert eq.exploitability <= 1e-6
        assert error <= 1e-4, f"L1 distance to Gambit {error:.3g} ({eq.diagnostics['limit']})"
