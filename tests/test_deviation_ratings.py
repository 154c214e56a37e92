"""Deviation ratings (eqarena/solvers/cce/deviation.py): against an independent cvxpy formulation, on games
rated by hand, under exact clones, and through `eqarena rate --methods deviation`."""

from __future__ import annotations

import re

import cvxpy as cp
import numpy as np
import pytest
from conftest import query
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.solvers import NormalFormGame, chicken, koth_game, rps, synthetic_king_tensor
from eqarena.solvers.cce.deviation import deviation
from eqarena.solvers.cce.max_entropy import joint_deviation_gains


def reference_ratings(payoffs: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """The lexicographic min-max of the gains written independently (dense gain rows, cvxpy) with a
    different pinning rule: after each level t, an action is pinned iff it cannot go below t while the
    others stay at or below their bounds (one LP per candidate), not by its dual multiplier."""
    n = payoffs.shape[0]
    shape = payoffs.shape[1:]
    rows = []  # each action's gain as a linear function of the flattened joint
    for i in range(n):
        u = payoffs[i]
        for a in range(shape[i]):
            dev = np.take(u, [a], axis=i)  # u_i(a, s_-i), broadcast over s_i
            rows.append((np.broadcast_to(dev, shape) - u).reshape(-1))
    g = np.array(rows)
    k = len(g)
    x = cp.Variable(g.shape[1], nonneg=True)
    bound = np.full(k, np.inf)
    while np.isinf(bound).any():
        free = np.isinf(bound)
        t = cp.Variable()
        fixed = [g[~free] @ x <= bound[~free] + SLACK] if (~free).any() else []
        base = [cp.sum(x) == 1, *fixed]
        level = cp.Problem(cp.Minimize(t), [*base, g[free] @ x <= t]).solve(**SOLVER)
        pinned = []
        for a in np.flatnonzero(free):
            others = free.copy()
            others[a] = False
            cons = [*base, g[others] @ x <= level] if others.any() else base
            problem = cp.Problem(cp.Minimize(g[a] @ x), cons)
            lowest = problem.solve(**SOLVER)
            assert problem.status == cp.OPTIMAL, problem.status
            if lowest > level - tol:
                pinned.append(a)
        assert pinned, "some action must be pinned at every level"
        bound[pinned] = level
    return bound


SLACK = 1e-9  # rated actions' bounds are relaxed by this much (a level is exact to the solver's tolerance)
# HiGHS's simplex through cvxpy: vertex solutions, exact to ~1e-9 along the whole sequence (an interior-point
# solver, e.g. Clarabel, drifts by ~1e-5 over a few levels and misjudges pinning).
SOLVER = {"solver": cp.HIGHS}


def flat(ratings) -> np.ndarray:
    return np.concatenate([np.asarray(r) for r in ratings])


@pytest.mark.parametrize("seed", range(4))
def test_two_player_random_games_match_the_cvxpy_reference(seed):
    rng = np.random.default_rng(seed)
    payoffs = rng.integers(-3, 4, size=(2, 3, 4)).astype(float)  # ties: several actions share a level
    ours = deviation(NormalFormGame(payoffs))
    np.testing.assert_allclose(flat(ours.ratings), reference_ratings(payoffs), atol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_three_player_random_games_match_the_cvxpy_reference(seed):
    rng = np.random.default_rng(100 + seed)
    payoffs = rng.normal(size=(3, 3, 2, 3))
    ours = deviation(NormalFormGame(payoffs))
    np.testing.assert_allclose(flat(ours.ratings), reference_ratings(payoffs), atol=1e-6)


def test_king_of_the_hill_lp_matches_the_dense_game_and_the_reference():
    u = synthetic_king_tensor(5, 3, seed=7)
    game = koth_game(u)
    koth = deviation(game, merge_clones=False)
    dense = deviation(NormalFormGame(game.payoffs))
    np.testing.assert_allclose(flat(koth.ratings), flat(dense.ratings), atol=1e-7)
    np.testing.assert_allclose(flat(koth.ratings), reference_ratings(game.payoffs), atol=1e-6)


def test_ratings_are_the_gains_of_the_returned_cce():
    game = koth_game(synthetic_king_tensor(12, 4, seed=2))
    eq = deviation(game)
    np.testing.assert_allclose(flat(eq.ratings), flat(joint_deviation_gains(game, eq.joint)), atol=1e-12)
    assert eq.exploitability == 0.0 and max(np.max(r) for r in eq.ratings) <= 1e-9  # a CCE: every gain <= 0
    assert eq.diagnostics["max_rating_drift"] < 1e-7  # the joint's gains are the LP levels
    for marginal, axis in zip(eq.marginals, range(3)):
        np.testing.assert_allclose(marginal, eq.joint.sum(axis=tuple(j for j in range(3) if j != axis)))


def test_backends_agree():
    game = koth_game(synthetic_king_tensor(15, 4, seed=4))
    np.testing.assert_allclose(flat(deviation(game).ratings), flat(deviation(game, backend="scipy").ratings), atol=1e-7)


# -------------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("clone", [False, True])
def test_rock_paper_scissors_rates_every_action_zero(clone):
    """Zero-sum: the largest gains of the two players sum to >= 0, so t_1 = 0, and the only CCEs with
    every gain <= 0 have the uniform (minimax) marginals, at which every gain is 0."""
    ratings = deviation(rps(clone_rock=clone)).ratings
    np.testing.assert_allclose(flat(ratings), 0.0, atol=1e-9)


def test_rock_paper_scissors_with_a_dominated_action():
    """A fourth action D losing 1 to every other and drawing itself: R, P, S stay at 0 and D is pinned at
    u(D, uniform RPS) - 0 = -1 (the second LP keeps every other gain <= 0, i.e. minimax marginals)."""
    row = np.zeros((4, 4))
    row[:3, :3] = rps().payoffs[0]
    row[3, :3], row[:3, 3] = -1.0, 1.0
    ratings = deviation(NormalFormGame(np.stack([row, -row]))).ratings
    np.testing.assert_allclose(ratings[0], [0, 0, 0, -1], atol=1e-9)
    np.testing.assert_allclose(ratings[1], [0, 0, 0, -1], atol=1e-9)


@pytest.mark.parametrize("clone", [False, True])
def test_chicken_by_hand(clone):
    """Joint (a, b, c, d) on (SS, ST, TS, TT): gains Swerve 11d - c / 11d - b, Straight a - 11b / a - 11c.
    The strictest CCE mixes the two pure NE: t_1 = -1/2 (both Swerves, certificate: weight 1/2 on each),
    then b = c = 1/2 is forced and Straight is rated a - 11/2 = -11/2. The clone of Straight too."""
    expected = [-0.5, -5.5, -5.5] if clone else [-0.5, -5.5]
    eq = deviation(chicken(clone_straight=clone))
    for r in eq.ratings:
        np.testing.assert_allclose(r, expected, atol=1e-9)
    assert eq.diagnostics["levels"] == 2


# -------------------------------------------------------------------------------- clone invariance


def test_king_of_the_hill_duplicated_prompts():
    u = synthetic_king_tensor(10, 4, seed=11)
    copies = [0, 3, 3, 7]
    cloned = np.concatenate([u, u[copies]])
    base = deviation(koth_game(u), merge_clones=False).ratings
    for merge in (False, True):
        eq = deviation(koth_game(cloned), merge_clones=merge)
        np.testing.assert_allclose(eq.ratings[0][:10], base[0], atol=1e-7)
        np.testing.assert_allclose(eq.ratings[0][10:], base[0][copies], atol=1e-7)
        for player in (1, 2):
            np.testing.assert_allclose(eq.ratings[player], base[player], atol=1e-7)
        assert eq.diagnostics["merged_prompts"] == (4 if merge else 0)


def test_a_cloned_action_in_a_random_three_player_game():
    """Player 1's action 0 copied (every player's payoffs repeat along its axis): the originals keep their
    ratings for every player and the copy gets its original's."""
    payoffs = np.random.default_rng(21).normal(size=(3, 3, 2, 3))
    order = [0, 1, 0]
    cloned = payoffs[:, :, order]
    base = deviation(NormalFormGame(payoffs)).ratings
    eq = deviation(NormalFormGame(cloned))
    for player in (0, 2):
        np.testing.assert_allclose(eq.ratings[player], base[player], atol=1e-7)
    np.testing.assert_allclose(eq.ratings[1], base[1][order], atol=1e-7)


# -------------------------------------------------------------------------------- end to end


def test_rate_methods_deviation_through_the_cli(prefect_harness, tmp_path):
    db = str(tmp_path / "w.duckdb")
    cli = CliRunner()
    assert cli.invoke(app, ["ingest", "--db", db]).exit_code == 0
    rated = cli.invoke(
        app, ["rate", "--methods", "deviation,cce", "--judge", "prd:gpt4", "--bootstrap", "2", "--db", db]
    )
    assert rated.exit_code == 0, rated.output
    run_id = re.search(r"run (rate-\S+) written", rated.stdout).group(1)
    counts = dict(
        (
            (p, n)
            for p, n in query(
                db,
                "SELECT player, count(*) FROM ratings WHERE run_id = ? AND method = 'deviation' GROUP BY ALL",
                [run_id],
            )
        )
    )
    assert counts == {"prompt": 80, "king": 5, "rebel": 5}
    assert query(
        db,
        "SELECT solution_concept, target, solver FROM equilibria WHERE run_id = ? AND method = 'deviation'",
        [run_id],
    ) == [("cce", "strictest", "lexicographic_lp")]
    ((exploitability,),) = query(
        db, "SELECT exploitability FROM equilibria WHERE run_id = ? AND method = 'deviation'", [run_id]
    )
    assert exploitability == 0.0
    king = dict(
        query(
            db,
            "SELECT action, rating FROM ratings WHERE run_id = ? AND method = 'deviation' AND player = 'king'",
            [run_id],
        )
    )
    assert max(king.values()) <= 1e-9  # ratings at a CCE
    assert query(
        db, "SELECT count(DISTINCT scheme) FROM rating_intervals WHERE run_id = ? AND method = 'deviation'", [run_id]
    ) == [(2,)]
    # Exact copies of PRD prompts leave every original rating unchanged; the clone analysis and the report
    # take the method like any other.
    prompts = sorted(
        {p for (p,) in query(db, "SELECT DISTINCT prompt_id FROM payoffs WHERE run_id = ?", [run_id])}, key=int
    )
    models = sorted(king)
    u = np.zeros((len(prompts), len(models), len(models)))
    for p, i, j, v in query(db, "SELECT prompt_id, king, rebel, u_king FROM payoffs WHERE run_id = ?", [run_id]):
        u[prompts.index(p), models.index(i), models.index(j)] = v
    copies = [0, 5, 5, 17, 42, 42, 42]
    base = deviation(koth_game(u), merge_clones=False).ratings
    cloned = deviation(koth_game(np.concatenate([u, u[copies]])), merge_clones=False).ratings
    np.testing.assert_allclose(cloned[0][: len(prompts)], base[0], atol=1e-6)
    for player in (1, 2):
        np.testing.assert_allclose(cloned[player], base[player], atol=1e-6)
    np.testing.assert_allclose([king[m] for m in models], base[1], atol=1e-6)  # as stored by rate
    analysed = cli.invoke(
        app,
        [
            "analyze",
            "clones",
            "--run",
            run_id,
            "--n",
            "0,20",
            "--n-noisy",
            "0",
            "--db",
            db,
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert analysed.exit_code == 0, analysed.output
    assert "Deviation: exact: ranks unchanged up to 20 clones" in analysed.output
    report = (tmp_path / "out" / f"eqarena-{run_id}.html").read_text()
    assert '<section id="clones">' in report and "Deviation" in report
