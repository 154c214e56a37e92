"""Methods that select the same equilibrium on a game are solved once (eqarena/tasks/rate.py `solved_twin`):
"ne-shannon" is "ne" and "cce-shannon" is "cce" where the affinity target is uniform (no clones), and not
where clones make it otherwise. The affinity targets are memoised by the game's content."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena import solvers
from eqarena.methods import get_method
from eqarena.solvers.games.entropy import affinity_targets
from eqarena.tasks.rate import _solve_equilibrium, solved_twin
from eqarena.warehouse.tensor import PayoffTensor

pytestmark = pytest.mark.unit


def _tensor(u: np.ndarray) -> PayoffTensor:
    p, m, _ = u.shape
    return PayoffTensor(
        "toy",
        ("judge",),
        tuple(f"p{k}" for k in range(p)),
        tuple(f"m{k}" for k in range(m)),
        u,
        np.ones(u.shape, bool),
        np.ones(u.shape, np.int64),
        "fingerprint",
    )


def _solve_all(tensor: PayoffTensor, names) -> list:
    solved = []
    for name in names:
        solved.append(solved_twin(tensor, name, solved) or _solve_equilibrium(tensor, get_method(name)))
    return solved


def test_without_clones_the_shannon_methods_restate_the_affinity_ones():
    tensor = _tensor(solvers.synthetic_king_tensor(14, 5, seed=8))
    assert all(np.all(t == t[0]) for t in affinity_targets(solvers.koth_game(tensor.u_king)))
    ne, cce, ne_shannon, cce_shannon = _solve_all(tensor, ["ne", "cce", "ne-shannon", "cce-shannon"])
    for twin, first in ((ne_shannon, ne), (cce_shannon, cce)):
        assert twin.equilibrium.diagnostics["same_as"] == first.method
        assert "affinity target is uniform" in twin.equilibrium.diagnostics["same_because"]
        assert twin.equilibrium.method == twin.method and all(r.method == twin.method for r in twin.ratings)
        assert twin.equilibrium.target == "uniform"
        # ... and it is what solving the method itself gives
        direct = _solve_equilibrium(tensor, get_method(twin.method))
        assert "same_as" not in direct.equilibrium.diagnostics
        for a, b in zip(twin.ratings, direct.ratings):
            assert a.player == b.player
            np.testing.assert_allclose(a.rating, b.rating, atol=1e-9)
            np.testing.assert_allclose(a.mass, b.mass, atol=1e-9)
    assert solved_twin(tensor, "bt", [ne, cce]) is None  # not an equilibrium method
    assert solved_twin(tensor, "ne", [cce]) is None  # another solver


def test_clone_prompts_make_the_targets_differ_and_each_method_is_solved():
    u = solvers.synthetic_king_tensor(14, 5, seed=8)
    # Prompt 5, which the NE plays, four times: the affinity target splits it, the uniform one does not.
    tensor = _tensor(np.concatenate([u, u[[5, 5, 5]]]))
    ne, ne_shannon = _solve_all(tensor, ["ne", "ne-shannon"])
    assert "same_as" not in ne_shannon.equilibrium.diagnostics
    king = [next(r for r in s.ratings if r.player == "king").rating for s in (ne, ne_shannon)]
    assert np.abs(king[0] - king[1]).max() > 1e-4


def test_affinity_targets_are_memoised_by_content_not_by_object():
    u = solvers.synthetic_king_tensor(9, 4, seed=2)
    first = affinity_targets(solvers.koth_game(u))
    first[0][:] = -1.0  # a caller's changes do not reach the memo
    again = affinity_targets(solvers.koth_game(u.copy()))
    assert np.all(again[0] > 0) and np.allclose(again[0].sum(), 1.0)
    changed = u.copy()
    changed[[0, 1]] = u[[1, 1]]  # prompts 0 and 1 now clones: different content, different targets
    assert not np.allclose(affinity_targets(solvers.koth_game(changed))[0], again[0])
