"""Adversarial clone robustness (paper Section 4.2, App. F.5): sampling, clones, ranks, and invariance."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from eqarena.datasets.bundled import SEEDS_DIR
from eqarena.solvers import koth_game, synthetic_king_tensor
from eqarena.solvers.analyses.clones import (
    CloneOutcome,
    adversarial_weights,
    clone_experiment,
    clone_prompt_ids,
    clone_tensors,
    clone_verdicts,
    dense_ranks,
    sample_clone_sources,
    with_clones,
)
from eqarena.solvers.cce.max_entropy import cce
from eqarena.solvers.nash.limiting_logit import nash
from eqarena.solvers.pairwise.bradley_terry import fit_bradley_terry, tensor_battles

KING = 1
VICUNA_JUDGMENTS = SEEDS_DIR / "vicuna80" / "judgments.jsonl.gz"


def _random_king(seed: int, p: int, m: int) -> np.ndarray:
    u = np.triu(np.random.default_rng(seed).uniform(-1.0, 1.0, size=(p, m, m)), 1)
    return u - np.swapaxes(u, 1, 2)


def _changed(outcomes, variant, method) -> bool:
    rows = sorted((o for o in outcomes if o.variant == variant and o.method == method), key=lambda o: o.n_clones)
    return any(not np.array_equal(o.ranks, rows[0].ranks) for o in rows[1:])


# --- adversarial weights and sources -------------------------------------------------------------


def test_adversarial_weights_closed_form():
    a = np.array([1.0, 0.0, -1.0])  # model 0's payoff vs model 1 on each prompt
    u = np.zeros((3, 2, 2))
    u[:, 0, 1], u[:, 1, 0] = a, -a
    w = adversarial_weights(u, target=0, lam=10.0)
    ubar = a / 2.0  # mean over rebels {0 (u = 0), 1}
    expected = np.exp(-10.0 * ubar) / np.exp(-10.0 * ubar).sum()
    np.testing.assert_allclose(w, expected, rtol=1e-12)
    assert w.sum() == pytest.approx(1.0) and np.all(w > 0)
    assert np.argmax(w) == 2  # the prompt where model 0 loses
    np.testing.assert_allclose(adversarial_weights(u, target=1, lam=10.0), expected[::-1], rtol=1e-12)
    np.testing.assert_allclose(adversarial_weights(u, 0, lam=0.0), np.full(3, 1 / 3))
    with pytest.raises(ValueError):
        adversarial_weights(u, target=2)


def test_sources_reproducible_and_prefix_monotone():
    u = synthetic_king_tensor(50, 6, seed=1)
    big = sample_clone_sources(u, 2, 500, 10.0, 3)
    assert big.shape == (500,) and big.dtype.kind == "i" and big.min() >= 0 and big.max() < 50
    np.testing.assert_array_equal(big, sample_clone_sources(u, 2, 500, 10.0, 3))
    np.testing.assert_array_equal(big[:250], sample_clone_sources(u, 2, 250, 10.0, 3))
    assert not np.array_equal(big, sample_clone_sources(u, 2, 500, 10.0, 4))
    # With a large lambda nearly every clone copies the prompt where the target does worst.
    worst = int(np.argmin(u[:, 2, :].mean(axis=1)))
    assert np.mean(sample_clone_sources(u, 2, 200, 1e3, 0) == worst) > 0.95
    assert sample_clone_sources(u, 2, 0).shape == (0,)


def test_experiment_games_are_prefixes():
    u = synthetic_king_tensor(30, 5, seed=2)
    games = {(v, n): g for v, n, g in clone_tensors(u, 0, ns_exact=(0, 10, 20), ns_noisy=(0, 10, 20), seed=5)}
    for variant in ("exact", "noisy"):
        np.testing.assert_array_equal(games[variant, 0], u)
        np.testing.assert_array_equal(games[variant, 10], games[variant, 20][:40])
    sources = sample_clone_sources(u, 0, 20, 10.0, 5)
    np.testing.assert_array_equal(games["exact", 20], with_clones(u, sources))
    assert np.max(np.abs(games["noisy", 20][30:] - u[sources])) <= 0.01


# --- clones ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", [0.0, 0.01, 0.5])
def test_with_clones_keeps_the_game_valid(noise):
    u = synthetic_king_tensor(40, 6, seed=0)  # grid values, including +-1
    sources = np.array([3, 3, 7, 0, 39])
    out = with_clones(u, sources, noise=noise, rng=1)
    assert out.shape == (45, 6, 6)
    np.testing.assert_array_equal(out[:40], u)
    np.testing.assert_array_equal(out, -np.swapaxes(out, 1, 2))
    assert np.all(np.diagonal(out, axis1=1, axis2=2) == 0.0)
    assert np.max(np.abs(out)) <= 1.0
    koth_game(out)  # passes the game's own checks
    diff = np.abs(out[40:] - u[sources])
    if noise == 0.0:
        assert np.all(diff == 0.0)
    else:
        assert np.max(diff) <= noise and np.max(diff) > 0.0
        assert not np.array_equal(out[40], out[41])  # two copies of prompt 3 get independent noise
        np.testing.assert_array_equal(out, with_clones(u, sources, noise=noise, rng=1))


def test_clone_prompt_ids():
    ids = clone_prompt_ids(["a", "b", "c"], [1, 1, 0, 1])
    assert ids == ["clone:b:1", "clone:b:2", "clone:a:1", "clone:b:3"]
    many = clone_prompt_ids([str(k) for k in range(5)], np.random.default_rng(0).integers(0, 5, 100))
    assert len(set(many)) == 100
    with pytest.raises(ValueError):
        clone_prompt_ids(["x", "clone:x:1"], [0])


# --- ranks -----------------------------------------------------------------------------------------


def test_dense_ranks():
    np.testing.assert_array_equal(dense_ranks([0.3, 0.1, 0.3, 0.2]), [1, 3, 1, 2])
    # Chained ties: each gap is within 1e-4 although the ends are 1.8e-4 apart.
    np.testing.assert_array_equal(dense_ranks([0.0, -0.6e-4, -1.2e-4, -1.8e-4, -1.0]), [1, 1, 1, 1, 2])
    np.testing.assert_array_equal(dense_ranks([0.0, -1e-4]), [1, 1])  # "at most 1e-4"
    np.testing.assert_array_equal(dense_ranks([0.0, -1.001e-4]), [1, 2])
    np.testing.assert_array_equal(dense_ranks([0.5, 0.4999]), [1, 1])  # gap 1e-4 up to rounding
    np.testing.assert_array_equal(dense_ranks([1000.0, 1000.5, 990.0]), [2, 1, 3])
    np.testing.assert_array_equal(dense_ranks([1.0, 0.9, 0.8], tie_tol=0.15), [1, 1, 1])
    with pytest.raises(ValueError):
        dense_ranks([0.0, np.nan])


# --- invariance ------------------------------------------------------------------------------------


def test_tensor_battles():
    u = synthetic_king_tensor(4, 3, seed=0)
    battles = tensor_battles(u)
    a, b, s = battles["model_a"], battles["model_b"], battles["score"]
    assert a.shape == b.shape == s.shape == battles["prompt"].shape == (4 * 3,)
    assert np.all(a < b)
    np.testing.assert_allclose(s, u[battles["prompt"], a, b])


def test_exact_clones_move_bt_but_not_affinity_equilibria():
    u = _random_king(0, 30, 5)
    target = int(np.argmax(nash(koth_game(u), "affinity").ratings[KING]))
    cloned = with_clones(u, sample_clone_sources(u, target, 60, 10.0, 0))

    elo = fit_bradley_terry(u, None).ratings
    elo_cloned = fit_bradley_terry(cloned, None).ratings
    assert np.max(np.abs(elo - elo_cloned)) > 1.0  # Elo points: BT counts the clones' battles

    ne, ne_cloned = nash(koth_game(u), "affinity"), nash(koth_game(cloned), "affinity")
    assert ne.exploitability <= 1e-6 and ne_cloned.exploitability <= 1e-6
    assert np.count_nonzero(ne.marginals[KING] > 1e-6) > 1  # a mixed equilibrium, not a trivial one
    np.testing.assert_allclose(ne_cloned.ratings[KING], ne.ratings[KING], atol=1e-6)

    cc, cc_cloned = cce(koth_game(u), "affinity"), cce(koth_game(cloned), "affinity")
    np.testing.assert_allclose(cc_cloned.ratings[KING], cc.ratings[KING], atol=1e-6)


@pytest.fixture(scope="module")
def synthetic_experiment():
    u = synthetic_king_tensor(500, 17, seed=0)
    target = int(np.argmax(nash(koth_game(u), "affinity").ratings[KING]))
    return target, clone_experiment(u, target)


def test_synthetic_experiment_exact_clones(synthetic_experiment):
    """The acceptance check: NE and CCE (affinity) ranks never move with exact clones; BT's do."""
    target, outcomes = synthetic_experiment
    assert len(outcomes) == (3 + 5) * 5
    for o in outcomes:
        assert o.ratings.shape == o.ranks.shape == (17,)
        assert (o.exploitability is None) == (o.method == "bt")
        if o.exploitability is not None:
            assert o.exploitability <= 1e-6
    base = {o.method: o for o in outcomes if o.n_clones == 0 and o.variant == "exact"}
    assert base["ne"].ranks[target] == 1
    for o in outcomes:
        if o.n_clones == 0:  # the original game: solved once, reported under both variants
            assert o.ratings is base[o.method].ratings
    assert [o.n_clones for o in outcomes if o.variant == "exact" and o.method == "ne"] == [0, 250, 500]
    assert not _changed(outcomes, "exact", "ne")
    assert not _changed(outcomes, "exact", "cce")
    assert _changed(outcomes, "exact", "bt")
    bt_target = [o.ranks[target] for o in outcomes if o.variant == "exact" and o.method == "bt"]
    assert bt_target[0] == 1 and max(bt_target) > 1

    names = [f"m{k}" for k in range(17)]
    verdicts = clone_verdicts(outcomes, target, names)
    assert set(verdicts) == {"bt", "ne", "cce", "ne-shannon", "cce-shannon"}
    assert verdicts["ne"].startswith("NE: exact: ranks unchanged up to 500 clones | noisy: ")
    assert verdicts["cce"].startswith("CCE: exact: ranks unchanged up to 500 clones")
    assert verdicts["bt"].startswith(f"BT: exact: m{target} fell from 1 to ")


def _vicuna_gpt4_tensor():
    """u_king (80, 5, 5) of the bundled vicuna80 judgments by the GPT-4 judge, position-averaged."""
    with gzip.open(VICUNA_JUDGMENTS, "rt") as f:
        rows = [r for r in map(json.loads, f) if r["judge"] == "prd:gpt4"]
    models = sorted({r["model_a"] for r in rows} | {r["model_b"] for r in rows})
    prompts = sorted({r["prompt_id"] for r in rows})
    mi, pi = {m: k for k, m in enumerate(models)}, {p: k for k, p in enumerate(prompts)}
    total = np.zeros((len(prompts), len(models), len(models)))
    count = np.zeros_like(total)
    for r in rows:
        p, a, b = pi[r["prompt_id"]], mi[r["model_a"]], mi[r["model_b"]]
        total[p, a, b] += r["score"]
        total[p, b, a] -= r["score"]
        count[p, a, b] += 1
        count[p, b, a] += 1
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0), models


@pytest.mark.skipif(not VICUNA_JUDGMENTS.exists(), reason="bundled vicuna80 seed not present")
def test_real_game_exact_clones():
    u, models = _vicuna_gpt4_tensor()
    assert u.shape == (80, 5, 5)
    target = int(np.argmax(nash(koth_game(u), "affinity").ratings[KING]))
    outcomes = clone_experiment(u, target, ns_exact=(0, 40, 80), ns_noisy=(), methods=("bt", "ne", "cce"))
    assert not _changed(outcomes, "exact", "ne")
    assert not _changed(outcomes, "exact", "cce")
    bt = [o.ratings for o in outcomes if o.method == "bt"]
    assert np.max(np.abs(bt[-1] - bt[0])) > 1.0
    verdicts = clone_verdicts(outcomes, target, models)
    assert verdicts["ne"] == "NE: exact: ranks unchanged up to 80 clones"


# --- orchestration hooks and verdicts --------------------------------------------------------------


def test_injected_solver_and_original_solved_once():
    u = synthetic_king_tensor(20, 4, seed=3)
    calls = []

    def solve(method, game_tensor):
        calls.append((method, game_tensor.shape[0]))
        return np.arange(4.0) * (1.0 if method == "a" else -1.0) + game_tensor.shape[0]

    with pytest.raises(ValueError):
        clone_experiment(u, 0, methods=("a",), solve=solve)
    outcomes = clone_experiment(u, 0, ns_exact=(0, 5), ns_noisy=(0, 5, 10), methods=("bt",), solve=solve)
    assert calls == [("bt", 20), ("bt", 25), ("bt", 25), ("bt", 30)]
    assert [(o.variant, o.n_clones) for o in outcomes] == [
        ("exact", 0),
        ("exact", 5),
        ("noisy", 0),
        ("noisy", 5),
        ("noisy", 10),
    ]
    assert all(o.exploitability is None for o in outcomes)
    np.testing.assert_array_equal(outcomes[0].ranks, [1, 2, 3, 4])


def _outcome(variant, n, method, ranks):
    ranks = np.asarray(ranks)
    return CloneOutcome(variant, n, method, -ranks.astype(float), ranks)


def test_clone_verdict_wording():
    outcomes = [
        _outcome("exact", 0, "bt", [1, 2, 3]),
        _outcome("exact", 250, "bt", [2, 1, 3]),
        _outcome("exact", 500, "bt", [3, 1, 2]),
        _outcome("noisy", 0, "bt", [1, 2, 3]),
        _outcome("noisy", 250, "bt", [1, 2, 3]),
        _outcome("noisy", 500, "bt", [1, 3, 2]),
        _outcome("exact", 0, "ne", [2, 1, 3]),
        _outcome("exact", 500, "ne", [1, 2, 3]),
        _outcome("exact", 0, "cce", [1, 1, 2]),
        _outcome("exact", 500, "cce", [1, 1, 2]),
    ]
    verdicts = clone_verdicts(outcomes, 0, ["gemini", "gpt", "llama"])
    assert verdicts["bt"] == (
        "BT: exact: gemini fell from 1 to 3 (at 500 clones); ranks first changed at 250 clones"
        " | noisy: gemini kept rank 1; ranks first changed at 500 clones"
    )
    assert verdicts["ne"] == "NE: exact: gemini rose from 2 to 1 (at 500 clones); ranks first changed at 500 clones"
    assert verdicts["cce"] == "CCE: exact: ranks unchanged up to 500 clones"
