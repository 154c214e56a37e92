"""Bootstrap replicates on a Dask cluster (eqarena/runtime/dask_pool.py): the same replicates as in
this process, for the per-prompt game and the prompt-group game, and an early stop that cancels the rest."""

from __future__ import annotations

import numpy as np
import pytest
from test_group_game import planted_log

from eqarena import solvers
from eqarena.runtime.dask_pool import dask_map
from eqarena.solvers.bootstrap.confidence import Settling, bootstrap_ratings
from eqarena.solvers.sparse.group_game import GroupCells, GroupReplicates
from eqarena.solvers.toys.games import simulated_battles

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster_address():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def test_replicates_on_a_dask_cluster_are_the_local_ones(cluster_address):
    u = solvers.synthetic_king_tensor(24, 5, seed=3)
    u, battles = simulated_battles(u, 2, np.random.default_rng(1))
    kwargs = dict(replicates=16, seed=4, battles=battles, batched=False)
    local = bootstrap_ratings(u, ["ne", "cce", "cce-shannon"], **kwargs)
    remote = bootstrap_ratings(u, ["ne", "cce", "cce-shannon"], map_units=dask_map(cluster_address), **kwargs)
    assert [(b.method, b.scheme) for b in remote] == [(b.method, b.scheme) for b in local]
    for mine, theirs in zip(local, remote):
        np.testing.assert_allclose(theirs.ratings, mine.ratings, atol=1e-12)
        np.testing.assert_array_equal(theirs.lo, mine.lo)


def test_group_game_replicates_refit_on_the_workers(cluster_address):
    log = planted_log(np.random.default_rng(6).normal(0.0, 1.0, (3, 4)), 800, seed=2)
    game = GroupCells(log).fit()
    source = GroupReplicates(log, game.strengths)
    kwargs = dict(replicates=8, seed=1, schemes=("prompts",), source=source, batched=False)
    local = bootstrap_ratings(game.u_king, ["ne"], **kwargs)[0]
    remote = bootstrap_ratings(game.u_king, ["ne"], map_units=dask_map(cluster_address), **kwargs)[0]
    np.testing.assert_allclose(remote.ratings, local.ratings, atol=1e-12)


def test_a_settled_bootstrap_cancels_the_units_left(cluster_address):
    u = solvers.synthetic_king_tensor(20, 4, seed=5)
    settle = Settling(tol=1e9, min_replicates=16, every=8)  # settles at the first check it may
    out = bootstrap_ratings(
        u,
        ["cce"],
        replicates=400,
        seed=0,
        schemes=("prompts",),
        settling=settle,
        map_units=dask_map(cluster_address),
        batched=False,
    )[0]
    assert out.diagnostics["stopped"].startswith("settled") and len(out.ratings) == 16
    from distributed import Client

    with Client(cluster_address, set_as_default=False) as client:  # nothing of the map is left running
        assert not any(client.processing().values())
