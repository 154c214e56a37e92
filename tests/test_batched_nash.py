"""Batched NE replicates (eqarena/solvers/nash/batched.py, _batched_trace.py): replicate by replicate
the equilibrium `nash` selects, every replicate within the guarantee; padding, lane count and lane
reuse without effect; a game `nash` retraces is retraced on the lanes."""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

from eqarena import solvers
from eqarena.solvers.bootstrap.confidence import ReplicateSolver, bootstrap_ratings
from eqarena.solvers.bootstrap.replicates import replicate_game
from eqarena.solvers.nash import batched as batched_nash_module
from eqarena.solvers.nash._continuation import ContinuationOptions
from eqarena.solvers.nash.batched import KEPT_ROWS, KEPT_ROWS_FROM, batched_nash, guard_compiles
from eqarena.solvers.nash.limiting_logit import selection_targets
from eqarena.solvers.toys.games import simulated_battles

pytestmark = pytest.mark.xdist_group("jax-batched")  # one process compiles the batched solvers


def _games(method: str, scheme: str, count: int, prompts: int = 30, models: int = 5, seed: int = 4):
    u = solvers.synthetic_king_tensor(prompts, models, seed=seed)
    u, battles = simulated_battles(u, 2, np.random.default_rng(2))
    solver = ReplicateSolver(u, 1, battles, None)
    games, targets = [], []
    for b in range(count):
        ub, target = replicate_game(method, solver.game(scheme, b))
        games.append(solvers.koth_game(ub))
        targets.append(selection_targets(games[-1], target))
    return u, battles, games, targets


def _same_trace_length(lane_steps: int, nash_steps: int) -> bool:
    """The lane's trace runs `nash`'s step control step for step; rounding in XLA and NumPy differs in the
    last bits and can flip one step-size decision, after which the two traces step slightly apart."""
    return abs(lane_steps - nash_steps) <= max(2, 0.05 * nash_steps)


@pytest.mark.parametrize("method", ["ne", "ne-shannon"])
@pytest.mark.parametrize("scheme", ["prompts", "judgments"])
def test_batched_replicates_equal_single_solves(method, scheme):
    u, battles, _, _ = _games(method, scheme, 0)
    kwargs = {"replicates": 6, "seed": 1, "schemes": (scheme,), "battles": battles}
    single = bootstrap_ratings(u, [method], batched=False, **kwargs)[0]
    batch = bootstrap_ratings(u, [method], batched=True, **kwargs)[0]
    assert batch.diagnostics["batched"] and not single.diagnostics["batched"]
    assert batch.diagnostics["fallback"] == 0
    np.testing.assert_allclose(batch.ratings, single.ratings, atol=1e-6)
    assert np.all(batch.exploitability <= 1e-6)


def test_each_game_gets_the_equilibrium_nash_selects():
    """All three players' ratings and marginals, and the same kind of branch end, game by game."""
    _, _, games, targets = _games("ne", "judgments", 5)
    ends = batched_nash(games, targets)
    for game, target, end in zip(games, targets, ends):
        reference = solvers.nash(game, target)
        assert end is not None and end.exploitability <= 1e-6
        for mine, theirs in zip(end.marginals + end.ratings, reference.marginals + reference.ratings):
            np.testing.assert_allclose(mine, theirs, atol=1e-6)
        assert end.diagnostics["limit"] == reference.diagnostics["limit"]
        assert _same_trace_length(end.diagnostics["steps"], reference.steps)


def test_padding_lanes_and_lane_reuse_do_not_change_a_game():
    """Games of different prompt counts in one batch, padded further, on 2 lanes reused by 5 games
    or on 8 lanes: the same ends."""
    _, _, games, targets = _games("ne", "prompts", 5, prompts=24, models=4, seed=3)
    assert len({g.num_actions[0] for g in games}) > 1
    wide = batched_nash(games, targets, lanes=8)
    reused = batched_nash(games, targets, lanes=2, record=8, prompts=40)
    for a, b in zip(wide, reused):
        for x, y in zip(a.ratings, b.ratings):
            np.testing.assert_allclose(x, y, atol=1e-9)


def test_timings_split_the_solve_without_changing_it():
    """With a timings dict the same ends come back, and the dict holds the seconds of the compiled trace, the
    monitor and the finish, which together take no longer than the whole call."""
    _, _, games, targets = _games("ne", "prompts", 3, prompts=24, models=4, seed=3)
    plain = batched_nash(games, targets, lanes=1)
    timings = {"trace": 1.0}  # added to, not replaced
    start = time.perf_counter()
    timed = batched_nash(games, targets, lanes=1, timings=timings)
    seconds = time.perf_counter() - start
    for a, b in zip(plain, timed):
        for x, y in zip(a.ratings, b.ratings):
            np.testing.assert_array_equal(x, y)
    assert set(timings) == {"trace", "monitor", "finish"}
    assert timings["trace"] > 1.0 and timings["monitor"] > 0.0 and timings["finish"] > 0.0
    assert timings["trace"] - 1.0 + timings["monitor"] + timings["finish"] <= seconds


def test_one_lane_runs_its_late_attempts_on_the_prompts_that_carry_mass_and_ends_as_nash():
    """Games of more than twice the smallest tier of KEPT_ROWS distinct prompts, and of KEPT_ROWS_FROM cells, on
    one lane: once all but a few prompts carry no mass, attempts run on the kept rows only, and every game
    still ends where `nash` ends it. On vmapped lanes no attempt does, and the ends are the same."""
    u = solvers.synthetic_king_tensor(400, 12, seed=6)  # replicates whose ends are isolated
    solver = ReplicateSolver(u, 1)
    games, targets = [], []
    for b in range(3):
        ub, target = replicate_game("ne", solver.game("prompts", b))
        games.append(solvers.koth_game(ub))
        targets.append(selection_targets(games[-1], target))
    assert min(g.num_actions[0] for g in games) > 2 * KEPT_ROWS[0]
    assert min(g.num_actions[0] for g in games) * 12 * 12 >= KEPT_ROWS_FROM
    one = batched_nash(games, targets, lanes=1)
    vmapped = batched_nash(games, targets, lanes=2)
    for game, target, end, other in zip(games, targets, one, vmapped):
        reference = solvers.nash(game, target)
        assert end.diagnostics["kept_row_attempts"] > 0 and other.diagnostics["kept_row_attempts"] == 0
        assert end.exploitability <= 1e-6
        for mine, vm, theirs in zip(
            end.marginals + end.ratings, other.marginals + other.ratings, reference.marginals + reference.ratings
        ):
            np.testing.assert_allclose(mine, theirs, atol=1e-9)
            np.testing.assert_allclose(mine, vm, atol=1e-9)
        assert end.diagnostics["limit"] == reference.diagnostics["limit"]
        assert _same_trace_length(end.diagnostics["steps"], reference.steps)


def test_a_lane_program_is_compiled_once_per_process_under_the_guard(monkeypatch):
    """The guard (a worker pool's shared lock) is held while a program is compiled (or read back from the
    compilation cache), once per process; later batches of games of the same sizes reuse the program. A
    program of another size is compiled under the guard too. The ends are unchanged."""
    monkeypatch.setattr(batched_nash_module, "_COMPILED", {})
    monkeypatch.setattr(batched_nash_module, "_COMPILE_GUARD", list(batched_nash_module._COMPILE_GUARD))
    held, entered = [False], []

    @contextlib.contextmanager
    def guard(program):
        entered.append(program)
        held[0] = True
        yield
        held[0] = False

    guard_compiles(guard)
    _, _, games, targets = _games("ne", "judgments", 3)
    plain = batched_nash(games, targets, lanes=1, record=8)  # several calls of 8 points each
    again = batched_nash(games[::-1], targets[::-1], lanes=1, record=8)
    other = batched_nash(games[:1], targets[:1], lanes=1, record=8, prompts=40)
    p, m = games[0].num_actions[0], games[0].num_actions[1]
    assert entered == [(1, p, m, 8, True, None), (1, 40, m, 8, True, None)] and not held[0]
    assert set(batched_nash_module._COMPILED) == set(entered)
    for a, b in zip(plain, again[::-1]):
        np.testing.assert_array_equal(a.ratings[1], b.ratings[1])
    np.testing.assert_allclose(other[0].ratings[1], plain[0].ratings[1], atol=1e-9)
    reference = solvers.nash(games[0], targets[0])
    np.testing.assert_allclose(plain[0].ratings[1], reference.ratings[1], atol=1e-6)


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_game_nash_retraces_is_retraced_on_the_lanes_as_nash_does(lanes):
    """Traces cut at 25 steps: a game whose trace ends above the tolerance is traced again with `nash`'s
    tighter step control, twice, as `nash` retraces it, and ends at its least exploitable trace. Games whose
    first trace ends within the tolerance are traced once and end where `nash` ends them. A cut trace's
    last point is not an equilibrium, so rounding (XLA against NumPy) that flips one step-size decision
    moves it by more than any fixed tolerance: for the retraced games the test compares what the method
    decides (how often, with which step control, which trace is kept), not the cut points' digits."""
    _, _, games, targets = _games("ne", "judgments", 3)
    cut = ContinuationOptions(max_steps=25)
    ends = batched_nash(games, targets, lanes=lanes, options=cut)
    retraced = 0
    for game, target, end in zip(games, targets, ends):
        reference = solvers.nash(game, target, max_steps=25)
        mine, theirs = end.diagnostics["traces"], reference.diagnostics["traces"]
        assert end.diagnostics["retraces"] == reference.diagnostics["retraces"] == len(mine) - 1
        assert [t["max_distance"] for t in mine] == [t["max_distance"] for t in theirs]
        assert end.exploitability == pytest.approx(min(t["exploitability"] for t in mine), abs=1e-12)
        assert (len(mine) > 1) == (mine[0]["exploitability"] > 1e-6)
        retraced += len(mine) > 1
        if len(mine) == 1:  # an equilibrium within the tolerance: the same one as `nash`'s
            for x, y in zip(end.ratings, reference.ratings):
                np.testing.assert_allclose(x, y, atol=1e-6)
    assert retraced >= 1


def test_a_single_lane_on_a_big_game_pads_to_a_bucket_of_its_games_prompts():
    """`lane_prompts`: one lane on games of at least `KEPT_ROWS_FROM` cells pads to the largest game's prompts
    rounded up to a multiple of 32 (never beyond the full data's); several lanes, or smaller games, pad to
    the full data's prompts."""
    from eqarena.solvers.bootstrap.batched import lane_prompts

    models = 17
    big = [solvers.koth_game(solvers.synthetic_king_tensor(p, models, seed=p)) for p in (300, 316)]
    assert 500 * models * models >= KEPT_ROWS_FROM
    assert lane_prompts(big, 500, 1) == 320
    assert lane_prompts(big, 318, 1) == 318
    assert lane_prompts(big, 500, 16) == 500
    small = [solvers.koth_game(solvers.synthetic_king_tensor(p, 5, seed=p)) for p in (50, 60)]
    assert 80 * 5 * 5 < KEPT_ROWS_FROM
    assert lane_prompts(small, 80, 1) == 80
