"""Batched CCE replicates (eqarena/solvers/cce/batched.py, batched_bootstrap.py): replicate by replicate
the single solve's ratings, every replicate within the guarantee, padding and batch composition
without effect."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena import solvers
from eqarena.solvers.bootstrap.confidence import bootstrap_ratings, prompt_replicate, solve_king_ratings
from eqarena.solvers.cce.batched import batched_cce
from eqarena.solvers.games.normal_form import KING
from eqarena.solvers.toys.games import simulated_battles

pytestmark = pytest.mark.xdist_group("jax-batched")  # one process compiles the batched solver


def _log(t):
    with np.errstate(divide="ignore"):
        return np.log(t)


@pytest.mark.parametrize("method", ["cce", "cce-shannon"])
@pytest.mark.parametrize("scheme", ["prompts", "judgments"])
def test_batched_replicates_equal_single_solves(method, scheme):
    u = solvers.synthetic_king_tensor(30, 5, seed=4)
    u, battles = simulated_battles(u, 2, np.random.default_rng(2))
    kwargs = {"replicates": 6, "seed": 1, "schemes": (scheme,), "battles": battles}
    single = bootstrap_ratings(u, [method], batched=False, **kwargs)[0]
    batch = bootstrap_ratings(u, [method], batched=True, **kwargs)[0]
    assert batch.diagnostics["batched"] and not single.diagnostics["batched"]
    np.testing.assert_allclose(batch.ratings, single.ratings, atol=1e-6)
    assert np.all(batch.exploitability <= 1e-6)
    assert batch.diagnostics["fallback"] <= len(batch.ratings)


@pytest.mark.slow
def test_batched_medium_game_matches_cce_replicate_by_replicate():
    u = solvers.synthetic_king_tensor(120, 9, seed=7)
    batch = bootstrap_ratings(u, ["cce"], replicates=5, seed=2, schemes=("prompts",), batched=True)[0]
    for b in range(5):
        ratings, expl = solve_king_ratings("cce", u[prompt_replicate(120, 2, b)])
        np.testing.assert_allclose(batch.ratings[b], ratings, atol=1e-6)
    assert np.all(batch.exploitability <= 1e-6)


def test_padding_and_batch_composition_do_not_change_a_replicate():
    """A replicate as its distinct prompts alone, as the full tensor with absent prompts at target
    mass 0, alone or in a batch with others, with or without a warm start: one CCE."""
    u = solvers.synthetic_king_tensor(40, 6, seed=9)
    idx = np.unique(prompt_replicate(40, 0, 0))
    game = solvers.koth_game(u[idx])
    targets = solvers.affinity_targets(game)
    reference = solvers.cce(game, targets)
    alone = batched_cce(u[idx], [_log(t)[None] for t in targets])
    padded_tp = np.full(40, -np.inf)
    padded_tp[idx] = _log(targets[0])
    other = np.log(np.full(40, 1 / 40))
    logs = [np.stack([padded_tp, other, padded_tp]), np.stack([_log(targets[1])] * 3), np.stack([_log(targets[2])] * 3)]
    together = batched_cce(u, logs)
    warm = batched_cce(u, logs, warm=(together.alpha_prompt[1], together.alpha_king[1], together.alpha_rebel[1]))
    for out, k in ((alone, 0), (together, 0), (together, 2), (warm, 0)):
        assert out.ok[k]
        np.testing.assert_allclose(out.ratings[k], reference.ratings[KING], atol=1e-7)
        assert out.exploitability[k] <= 1e-6
    # the full-tensor replicate (uniform prompt target) is the plain full game
    full = solvers.cce(solvers.koth_game(u), [np.full(40, 1 / 40), targets[1], targets[2]])
    np.testing.assert_allclose(together.ratings[1], full.ratings[KING], atol=1e-7)


def test_a_replicate_the_batch_cannot_take_falls_back(monkeypatch):
    """A replicate flagged not ok (here: all of them) is solved by the single solver and counted."""
    import eqarena.solvers.bootstrap.batched as bb

    real = bb.batched_cce

    def refuse(*args, **kwargs):
        out = real(*args, **kwargs)
        return type(out)(**{**out.__dict__, "ok": np.zeros_like(out.ok)})

    monkeypatch.setattr(bb, "batched_cce", refuse)
    u = solvers.synthetic_king_tensor(20, 4, seed=1)
    b = bootstrap_ratings(u, ["cce"], replicates=3, schemes=("prompts",), batched=True)[0]
    assert b.diagnostics["fallback"] == 3
    single = bootstrap_ratings(u, ["cce"], replicates=3, schemes=("prompts",), batched=False)[0]
    np.testing.assert_array_equal(b.ratings, single.ratings)
