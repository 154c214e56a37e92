"""The prompt-group game (eqarena/solvers/sparse/group_game.py, tasks/assemble_groups.py): per-group skills
recovered from battles, clones of a group leave the affinity equilibria unchanged, the group game's
bootstrap resamples prompts, and a log too sparse for per-prompt payoffs is rated by groups and said so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import query
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.methods import get_method
from eqarena.solvers.bootstrap.confidence import bootstrap_ratings
from eqarena.solvers.games.equilibrium import solve_equilibrium
from eqarena.solvers.games.normal_form import KING, koth_game
from eqarena.solvers.sparse.group_game import GroupBattles, GroupCells, GroupReplicates, group_game

runner = CliRunner()


def planted_log(skills: np.ndarray, battles_per_group: int, seed: int = 0, prompts_per_group: int = 50):
    """Battles of G groups (each with its own prompts) between M models with group skills (G, M):
    model_a beats model_b with the Bradley-Terry probability of the skill gap, no ties."""
    rng = np.random.default_rng(seed)
    g_count, m = skills.shape
    group = np.repeat(np.arange(g_count), battles_per_group)
    a = rng.integers(0, m, len(group))
    b = (a + rng.integers(1, m, len(group))) % m
    p_win = 1.0 / (1.0 + np.exp(skills[group, b] - skills[group, a]))
    score = np.where(rng.random(len(group)) < p_win, 1.0, -1.0)
    prompt = group * prompts_per_group + rng.integers(0, prompts_per_group, len(group))
    return GroupBattles(a, b, score, prompt, np.arange(len(group)), group, g_count * prompts_per_group, g_count, m)


def test_group_strengths_recover_planted_per_group_skills():
    rng = np.random.default_rng(3)
    skills = rng.normal(0.0, 1.0, (4, 6))
    game = group_game(planted_log(skills, 6_000))
    theta = game.strengths.prompt_strengths
    for g in range(4):
        fitted, planted = theta[g] - theta[g].mean(), skills[g] - skills[g].mean()
        assert np.corrcoef(fitted, planted)[0, 1] > 0.97
        assert np.argmax(fitted) == np.argmax(planted)
    # the payoffs are the fitted model's expected scores: antisymmetric, dense, inside (-1, 1)
    np.testing.assert_allclose(game.u_king, -np.swapaxes(game.u_king, 1, 2), atol=1e-15)
    assert np.all(np.abs(game.u_king) < 1.0) and game.observed.sum() == 4 * 6 * 5


def test_a_group_with_few_battles_is_shrunk_towards_the_global_fit():
    skills = np.tile(np.linspace(-1.0, 1.0, 5), (2, 1))
    skills[1] = skills[1][::-1]  # group 1 reverses the order ...
    log = planted_log(skills, 4_000)
    keep = (log.member_group == 0) | (np.arange(len(log.member_group)) % 400 == 0)  # ... on 10 battles only
    few = GroupBattles(
        log.model_a[keep],
        log.model_b[keep],
        log.score[keep],
        log.prompt[keep],
        np.arange(keep.sum()),
        log.member_group[keep],
        log.num_prompts,
        2,
        5,
    )
    game = group_game(few)
    # the sparse group's strengths lie nearer the global ones than its planted reversal, the rich group's
    # recover its plant
    theta = game.strengths.prompt_strengths
    assert np.corrcoef(theta[1], game.strengths.strengths)[0, 1] > np.corrcoef(theta[1], skills[1])[0, 1]
    assert np.corrcoef(theta[0], skills[0])[0, 1] > 0.97
    assert game.smoothed_share[1] > 0.0 and game.smoothed_share[0] == 0.0


@pytest.mark.parametrize("method", ["ne", "cce"])
def test_clones_of_a_group_leave_the_affinity_equilibrium_unchanged(method):
    skills = np.random.default_rng(5).normal(0.0, 1.0, (3, 5))
    log = planted_log(skills, 3_000, seed=1)
    base = group_game(log, shrinkage=0.5)
    # the battles of group 2 again, as two more groups: the group game gains two exact copies of it
    extra = np.flatnonzero(log.member_group == 2)
    cloned = GroupBattles(
        log.model_a,
        log.model_b,
        log.score,
        log.prompt,
        np.concatenate([log.member_battle, extra, extra]),
        np.concatenate([log.member_group, np.full(len(extra), 3), np.full(len(extra), 4)]),
        log.num_prompts,
        5,
        5,
    )
    game = group_game(cloned, shrinkage=0.5)
    np.testing.assert_allclose(game.u_king[3], game.u_king[2], atol=1e-12)  # the copies are exact clones
    # the shared global fit sees the copied battles again: the other groups' payoffs move, but little
    moved = np.max(np.abs(game.u_king[:3] - base.u_king))
    assert 0.0 < moved < 2e-3
    spec = get_method(method)
    before = solve_equilibrium(spec, koth_game(base.u_king))
    # as actions of the game, exact copies of a group change nothing (the affinity target's clone invariance)
    copies = solve_equilibrium(spec, koth_game(np.concatenate([base.u_king, base.u_king[[2, 2]]])))
    np.testing.assert_allclose(copies.ratings[KING], before.ratings[KING], atol=1e-6)
    # through the log, only by what the shared fit moved
    after = solve_equilibrium(spec, koth_game(game.u_king))
    np.testing.assert_allclose(after.ratings[KING], before.ratings[KING], atol=5 * moved)
    assert max(after.exploitability, copies.exploitability) <= 1e-6


def test_group_replicates_resample_prompts_and_refit_deterministically():
    skills = np.random.default_rng(2).normal(0.0, 1.0, (2, 4))
    log = planted_log(skills, 2_000, seed=4)
    game = GroupCells(log).fit()
    source = GroupReplicates(log, game.strengths)
    one = source.replicate(np.random.default_rng([0, 0, 1]))
    again = GroupReplicates(log, game.strengths).replicate(np.random.default_rng([0, 0, 1]))
    np.testing.assert_array_equal(one, again)
    assert one.shape == game.u_king.shape and not np.allclose(one, game.u_king)
    out = bootstrap_ratings(game.u_king, ["ne", "cce"], replicates=6, seed=0, schemes=("prompts",), source=source)
    for b in out:
        assert b.ratings.shape == (6, 4) and np.all(b.exploitability <= 1e-6)
        assert np.all(b.lo <= b.rating + 1e-12) and np.all(b.rating <= b.hi + 1e-12)


def sparse_log(path: Path, prompts: int = 2_500, models: int = 100, battles: int = 3_000) -> Path:
    """A battle log with more (prompt, pair) cells than a per-prompt game should hold, nearly all empty."""
    rng = np.random.default_rng(0)
    strength = np.linspace(-2.0, 2.0, models)
    rows = []
    for k in range(battles):
        a, b = rng.choice(models, 2, replace=False)
        win = rng.random() < 1.0 / (1.0 + np.exp(strength[b] - strength[a]))
        language = "English" if k % 3 else "German"
        rows.append(
            {
                "question_id": f"q{k % prompts}",
                "model_a": f"m{a:03d}",
                "model_b": f"m{b:03d}",
                "winner": "model_a" if win else "model_b",
                "language": language,
                "category_tag": {"math_v0.1": {"math": k % 4 == 0}, "if_v0.1": {"if": k % 5 == 0, "score": 3}},
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_sparse_log_is_rated_by_prompt_groups_and_says_so(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    log = sparse_log(tmp_path / "arena.jsonl")
    assert runner.invoke(app, ["import", "battles", str(log), "--db", str(db)]).exit_code == 0
    result = runner.invoke(app, ["rate", "--bootstrap", "0", "--db", str(db)])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stderr.splitlines() if "too sparse for per-prompt payoffs" in x)
    assert "3,000 battles judge" in line and "of 2,500 prompts x 100 models" in line
    assert "groups by tag" in line and "--prompt-groups" in line
    run_id = query(db, "SELECT run_id FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0]
    groups = {
        g for (g,) in query(db, "SELECT DISTINCT action FROM ratings WHERE run_id = ? AND player = 'prompt'", [run_id])
    }
    assert groups == {"math_v0.1/math", "if_v0.1/if", "(other)"}
    params = json.loads(query(db, "SELECT parameters FROM runs WHERE run_id = ?", [run_id])[0][0])
    assert params["prompt_groups"] == "tag"
    # a planted strong model (of the top tenth) leads BT and the group game's NE (30 battles a model)
    top = dict(
        query(
            db,
            "SELECT method, action FROM ratings WHERE run_id = ? AND player = 'king' "
            "QUALIFY row_number() OVER (PARTITION BY method ORDER BY rating DESC, action) = 1",
            [run_id],
        )
    )
    assert int(top["bt"][1:]) >= 90 and int(top["ne"][1:]) >= 90
    by_language = runner.invoke(app, ["rate", "--bootstrap", "0", "--prompt-groups", "language", "--db", str(db)])
    assert by_language.exit_code == 0, by_language.output
    assert "prompt groups by language: 2 group(s)" in by_language.output


def test_twenty_groups_lead_with_the_top_model_of_a_per_group_bradley_terry():
    """FastChat rates each category by its own Bradley-Terry fit; the group game's per-group strengths
    (shrunk towards the global fit) put the same model first in every one of 20 groups."""
    from eqarena.solvers.pairwise.bradley_terry import bradley_terry

    rng = np.random.default_rng(11)
    skills = rng.normal(0.0, 0.7, (20, 8))
    skills[np.arange(20), rng.integers(0, 8, 20)] += 2.0  # each group's own leader
    log = planted_log(skills, 3_000, seed=12)
    theta = group_game(log).strengths.prompt_strengths
    planted = 0
    for g in range(20):
        mine = log.member_group == g
        own = bradley_terry(log.model_a[mine], log.model_b[mine], (1.0 + log.score[mine]) / 2.0, num_models=8)
        assert np.argmax(theta[g]) == np.argmax(own.ratings)
        planted += int(np.argmax(theta[g]) == np.argmax(skills[g]))
    assert planted >= 18  # 3,000 battles a group: the planted leader nearly always shows
