"""What the bootstrap costs, said before it starts (tasks/rate.py `replicate_plan`), fewer replicates
planned within --bootstrap-time, a deadline that stops it with the replicates done, and replicates that
solve only the run's chosen methods (a baseline-only preference table, AlpacaEval's shape)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from eqarena import solvers
from eqarena.options import BootstrapOptions
from eqarena.solvers.bootstrap.confidence import bootstrap_ratings
from eqarena.tasks.rate import Solved, replicate_plan


def _solved(method: str, seconds: float, equilibrium=True) -> Solved:
    return Solved(method, [], object() if equilibrium else None, seconds)


def test_the_plan_states_the_cost_and_fits_the_time_limit():
    solved = [
        _solved("bt", 5.0, equilibrium=False),
        _solved("ne", 2.0),
        _solved("cce", 1.0),
        _solved("ne-shannon", 0.0),
    ]
    plan = replicate_plan(solved, BootstrapOptions(replicates=200, time_limit=0), schemes=2, workers=2)
    assert plan.replicates == 200 and plan.seconds == 3.0 * 2 / 2 * 200  # bt is not bootstrapped here
    assert "up to 200 replicates of 3 equilibrium methods x 2 schemes on 2 workers" in plan.line
    cut = replicate_plan(solved, BootstrapOptions(replicates=200, time_limit=120), schemes=2, workers=2)
    assert cut.replicates == 48  # 40 would fit; the settling rule needs 48 before it can stop
    assert "would take about 10 min" in cut.line and "planning 48 within --bootstrap-time 120 s" in cut.line
    roomy = replicate_plan(solved, BootstrapOptions(replicates=200, time_limit=10_000), schemes=2, workers=2)
    assert roomy.replicates == 200


def test_a_deadline_stops_the_bootstrap_with_the_replicates_done():
    u = solvers.synthetic_king_tensor(30, 5, seed=2)
    full = bootstrap_ratings(u, ["ne"], replicates=40, seed=0, schemes=("prompts",))[0]
    cut = bootstrap_ratings(u, ["ne"], replicates=40, seed=0, schemes=("prompts",), deadline=time.perf_counter())[0]
    assert cut.diagnostics["stopped"].startswith("time limit")
    assert 2 <= len(cut.ratings) < 40
    np.testing.assert_array_equal(cut.ratings, full.ratings[: len(cut.ratings)])  # the same replicates, a prefix


PREFERENCES = "\n".join(
    ["instruction_idx,m1,m2,m3,m4,m5"]
    + [f"{k}," + ",".join(f"{1.0 + ((k * 7 + 3 * j) % 11) / 10:.1f}" for j in range(1, 6)) for k in range(40)]
)


def test_default_rate_on_a_baseline_only_table_solves_only_its_methods(tmp_path):
    table = tmp_path / "prefs.csv"
    table.write_text(PREFERENCES + "\n")
    db = tmp_path / "w.duckdb"
    env = {**os.environ, "EQARENA_PREFECT": "never", "EQARENA_PROGRESS": "0"}
    script = f"""
import sys
from pathlib import Path
from eqarena.options import BootstrapOptions, ImportOptions, RateOptions
from eqarena.pipelines.importing import import_data
from eqarena.pipelines.rate import rate
import_data(ImportOptions(fmt="pairwise", paths=({str(table)!r},), dataset="prefs", layout="preferences",
                          baseline="base"), {str(db)!r})
result = rate(RateOptions(dataset="prefs", missing="impute", bootstrap=BootstrapOptions(replicates=24)), {str(db)!r})
print("methods", sorted(result.exploitability))
print("deviation imported", "eqarena.solvers.cce.deviation" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "methods ['cce', 'cce-shannon', 'ne', 'ne-shannon']" in done.stdout
    assert "deviation imported False" in done.stdout


def test_units_are_batched_only_while_their_tensors_stay_small():
    from eqarena.solvers.bootstrap.batched import batches_pay

    assert batches_pay((500, 17, 17)) and batches_pay((40, 200, 200)) and batches_pay((1, 200, 200))
    assert not batches_pay((805, 200, 200))  # 24 replicates would hold 6 GB of tensors in one worker
    assert not batches_pay((10, 201, 201))


def test_units_of_one_replicate_give_the_same_replicates():
    u = solvers.synthetic_king_tensor(20, 4, seed=8)
    default = bootstrap_ratings(u, ["ne", "cce"], replicates=10, seed=2, schemes=("prompts",), batched=False)
    single = bootstrap_ratings(
        u, ["ne", "cce"], replicates=10, seed=2, schemes=("prompts",), batched=False, unit_size=1
    )
    for a, b in zip(default, single):
        np.testing.assert_allclose(b.ratings, a.ratings, atol=1e-12)
