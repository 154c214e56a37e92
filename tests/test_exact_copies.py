"""Exact copies of prompts change no NE or CCE rating (docs/game.md, "Exact copies"), also when some
prompts are twins: the same |u_king| (one clone group for the prompt player) with opposite signs for
some pairs (two different prompts for the king and the rebel)."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena.solvers import koth_game
from eqarena.solvers.cce.max_entropy import cce
from eqarena.solvers.games.entropy import affinity_target, copy_classes
from eqarena.solvers.games.normal_form import PROMPT, NormalFormGame
from eqarena.solvers.nash.limiting_logit import nash
from tests.test_clones import _vicuna_gpt4_tensor

pytestmark = pytest.mark.unit

COPIES = 6
MOVE_TOL = 1e-6  # the NE's guarantee (exploitability <= 1e-6); the CCE's is tighter
EXPLOITABILITY_TOL = 1e-6


def _random_king(rng, p: int, m: int, grid: bool) -> np.ndarray:
    u = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(p, m, m)) if grid else rng.uniform(-1.0, 1.0, size=(p, m, m))
    u = np.triu(u, 1)
    return u - np.swapaxes(u, 1, 2)


def _plant_twin(u: np.ndarray) -> np.ndarray:
    """Prompt 1 becomes prompt 0 with the result of models 0 and 1 reversed: a twin of prompt 0."""
    u = u.copy()
    u[1] = u[0]
    u[1, 0, 1], u[1, 1, 0] = -u[0, 0, 1], -u[0, 1, 0]
    if u[1, 0, 1] == 0.0:  # a tie reversed is a tie: make the twin's pair a decided one
        u[1, 0, 1], u[1, 1, 0], u[0, 0, 1], u[0, 1, 0] = 0.5, -0.5, -0.5, 0.5
    return u


def _exploitability(u: np.ndarray, eq) -> float:
    """Sum over players of the largest gain from deviating to a fixed action, from u_king alone (paper
    Section 3.1 payoffs): of the product of the NE's marginals, or of the CCE's joint."""
    m = u.shape[1]
    payoffs = (np.abs(u), u, np.where(np.eye(m, dtype=bool)[None], -1.0, -u))
    joint = np.einsum("p,i,j->pij", *eq.marginals) if eq.joint is None else np.asarray(eq.joint)
    gains = []
    for player, payoff in enumerate(payoffs):
        others = joint.sum(axis=player)  # the co-players' joint distribution
        deviation = np.einsum(
            "akl,kl->a", np.moveaxis(payoff, player, 0), others
        )  # u_i(a, a_-i) averaged over the joint's a_-i
        gains.append(deviation.max() - float(np.sum(payoff * joint)))
    return float(sum(gains))


def _moves(u: np.ndarray, copied: list[int], solve) -> tuple[float, float]:
    """(largest rating move over every player's original actions, the solves' own bound on it)."""
    p = len(u)
    grown = u[list(range(p)) + [c for c in copied for _ in range(COPIES)]]
    a, b = solve(koth_game(u)), solve(koth_game(grown))
    assert _exploitability(u, a) <= EXPLOITABILITY_TOL
    assert _exploitability(grown, b) <= EXPLOITABILITY_TOL
    move = max(
        np.abs(a.ratings[0] - b.ratings[0][:p]).max(),
        np.abs(a.ratings[1] - b.ratings[1]).max(),
        np.abs(a.ratings[2] - b.ratings[2]).max(),
    )
    return float(move), _unreached_limit_bound(a) + _unreached_limit_bound(b)


def _unreached_limit_bound(eq) -> float:
    """A trace that stopped before the branch's limit reports how far its estimate still moved."""
    if eq.diagnostics.get("limit") in ("trace_stopped", "max_lambda"):
        return float(eq.diagnostics.get("limit_change") or np.inf)
    return 0.0


CASES = [(seed, p, m, grid) for seed in (0, 1, 2) for p, m in ((12, 4), (20, 5), (30, 6), (50, 8)) for grid in (0, 1)]


@pytest.mark.parametrize("seed, p, m, grid", CASES)
def test_copies_of_planted_twins_move_no_rating(seed, p, m, grid):
    u = _plant_twin(_random_king(np.random.default_rng(seed), p, m, bool(grid)))
    assert np.array_equal(np.abs(u[0]), np.abs(u[1])) and not np.array_equal(u[0], u[1])
    for solve in (nash, cce):
        move, bound = _moves(u, [0], solve)  # one twin copied: the old even split went 1:1 -> 7:1
        assert move <= MOVE_TOL + bound, (solve.__name__, move, bound)
        assert bound <= 1e-3, (solve.__name__, bound)  # a stopped trace says so; these games reach their limit


@pytest.mark.parametrize("seed", [27, 34])
def test_copies_of_the_most_played_prompts_move_no_rating(seed):
    """The games where copying the two prompts the uniform-target NE plays most moved the NE king
    ratings by 0.280 and 0.185 when a clone group's mass was split evenly among its members."""
    u = _random_king(np.random.default_rng(seed), 12, 4, grid=True)
    top = [int(k) for k in np.argsort(-nash(koth_game(u), "uniform").marginals[PROMPT])[:2]]
    for solve in (nash, cce):
        move, bound = _moves(u, top, solve)
        assert bound == 0.0
        assert move <= MOVE_TOL, (solve.__name__, move)


def test_copies_of_the_bundled_twins_move_no_rating():
    u, _ = _vicuna_gpt4_tensor()
    flat = u.reshape(len(u), -1)
    twins = [
        a
        for a in range(len(u))
        if any(np.array_equal(np.abs(flat[a]), np.abs(flat[b])) and a != b for b in range(len(u)))
    ]
    twins = [a for a in twins if not any(np.array_equal(flat[a], flat[b]) for b in range(len(u)) if b != a)]
    assert len(twins) >= 2  # vicuna80's GPT-4 judgments hold prompts that are twins, not copies
    for solve in (nash, cce):
        move, bound = _moves(u, twins[:4], solve)
        assert bound == 0.0
        assert move <= MOVE_TOL, (solve.__name__, move)


def test_a_clone_group_splits_its_mass_evenly_over_copy_classes():
    """Prompts 0 and 1 are twins (one clone group of the prompt player), prompts 2 and 3 copies of
    prompt 0: the group's mass goes half to prompt 1 and half to the class {0, 2, 3}."""
    u = _plant_twin(_random_king(np.random.default_rng(5), 6, 3, grid=False))
    grown = u[[0, 1, 0, 0, 2, 3, 4, 5]]
    classes = copy_classes(koth_game(grown), PROMPT)
    assert classes[0] == classes[2] == classes[3] and len(set(classes.tolist())) == 6
    t, t_grown = affinity_target(koth_game(u), PROMPT), affinity_target(koth_game(grown), PROMPT)
    np.testing.assert_allclose(t_grown[1], t[1], rtol=1e-12)
    np.testing.assert_allclose(t_grown[[0, 2, 3]], t[0] / 3, rtol=1e-12)
    np.testing.assert_allclose(t_grown[4:], t[2:], rtol=1e-12)
    assert t[0] == pytest.approx(t[1], rel=1e-12)


def test_copy_classes_of_a_dense_game_compare_every_players_payoff():
    """Rows 0 and 1 give the row player the same payoffs but the column player different ones: one
    clone group, two copy classes; rows 0 and 2 are copies."""
    row = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    column = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    game = NormalFormGame(np.stack([row, column]))
    assert copy_classes(game, 0).tolist() == [0, 1, 0]
    np.testing.assert_allclose(affinity_target(game, 0), [0.25, 0.5, 0.25], rtol=1e-12)


@pytest.mark.parametrize("seed, p, m, copied", [(13, 12, 4, "most played"), (14, 30, 6, "twins")])
def test_a_trace_that_stops_on_a_continuum_bounds_what_copies_move(seed, p, m, copied):
    """Degenerate grid games whose NE branch creeps along a continuum of equilibria: where a trace stops
    before the limit, its reported limit_change bounds the move (docs/game.md, "What is guaranteed")."""
    rng = np.random.default_rng(seed)
    if copied == "twins":
        u = _plant_twin(_random_king(rng, p, m, grid=True))
        top = [0, 1]
    else:
        u = _random_king(rng, p, m, grid=True)
        top = [int(k) for k in np.argsort(-nash(koth_game(u), "uniform").marginals[PROMPT])[:2]]
    move, bound = _moves(u, top, nash)
    assert move <= MOVE_TOL + bound, (move, bound)
