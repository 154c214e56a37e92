"""Bootstrap confidence of equilibrium ratings (eqarena/solvers/bootstrap/confidence.py): the clone identities it solves
with, interval coverage on games with a known population rating and under judge noise alone, rank
probabilities, determinism, judge-noise replicates, and the tables a rate run writes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from eqarena import solvers, warehouse
from eqarena.methods import RatingMethod, get_method, register, unregister
from eqarena.options import BootstrapOptions, IngestOptions, RateOptions
from eqarena.runtime.worker_pool import process_map
from eqarena.solvers.bootstrap.confidence import (
    CONFIDENCE,
    ReplicateSolver,
    Settling,
    bootstrap_ratings,
    bound_moves,
    judgment_replicate,
    prompt_replicate,
    rank_probabilities,
    solve_king_ratings,
    twin_groups,
    twins_agree,
)
from eqarena.solvers.games.normal_form import KING
from eqarena.solvers.toys.games import simulated_battles
from eqarena.warehouse import ratings as store

# Replicates per interval in the coverage checks: a 95% percentile interval from 50 replicates (bench/coverage.py
# measures with 100).
REPLICATES = 50


def _direct(method: str, u: np.ndarray) -> np.ndarray:
    """King ratings of the game as given (duplicated prompts and all), by the public solvers."""
    target = "affinity" if method in ("ne", "cce") else "uniform"
    game = solvers.koth_game(u)
    eq = solvers.nash(game, target=target) if method.startswith("ne") else solvers.cce(game, target=target)
    return np.asarray(eq.ratings[KING])


@pytest.mark.parametrize("method", ["ne", "cce", "ne-shannon", "cce-shannon"])
def test_replicate_with_copies_is_solved_as_its_distinct_prompts(method):
    u = solvers.synthetic_king_tensor(40, 5, seed=3)
    idx = prompt_replicate(40, seed=1, replicate=0)
    assert len(np.unique(idx)) < 40  # the replicate does hold copies
    ratings, expl = solve_king_ratings(method, u[idx])
    np.testing.assert_allclose(ratings, _direct(method, u[idx]), atol=1e-6)
    assert expl <= 1e-6
    if method in ("ne", "cce"):  # affinity ignores copies: the game of the distinct prompts, once each
        np.testing.assert_allclose(ratings, _direct(method, u[np.unique(idx)]), atol=1e-6)
    else:  # the uniform target counts them: a different game than the distinct prompts once each
        assert np.abs(ratings - _direct(method, u[np.unique(idx)])).max() > 1e-4


@pytest.mark.parametrize("scheme", ["prompts", "judgments"])
def test_cce_replicates_started_from_the_full_data_are_the_cold_solves(scheme):
    """Each CCE replicate's solve starts from the full data's dual multipliers (`starts`, else solved once
    for them): the same equilibrium as a solve from 0, replicate by replicate."""
    u, battles = _battles(solvers.synthetic_king_tensor(16, 5, seed=6), 2, np.random.default_rng(6))
    methods = ["cce", "cce-shannon"]
    given = {m: solvers.cce(solvers.koth_game(u), target=get_method(m).target).multipliers for m in methods}
    for starts in (given, None):
        out = bootstrap_ratings(u, methods, replicates=6, seed=3, schemes=(scheme,), battles=battles, starts=starts)
        solver = ReplicateSolver(u, 3, battles)
        for b in out:
            cold = np.stack([solve_king_ratings(b.method, solver.game(scheme, r))[0] for r in range(6)])
            np.testing.assert_allclose(b.ratings, cold, atol=1e-8)
            assert b.diagnostics["max_exploitability"] <= 1e-8
    assert solver.start("ne", scheme, 0) is None  # the NE's trace has no start
    started = ReplicateSolver(u, 3, battles, starts=given).start("cce", scheme, 2)
    expected = given["cce"][0][prompt_replicate(16, 3, 2)] if scheme == "prompts" else given["cce"][0]
    np.testing.assert_array_equal(started[0], expected)


def test_twin_methods_share_a_unit_led_by_the_affinity_method():
    assert twin_groups(["ne-shannon", "bt", "cce", "ne", "cce-shannon"]) == [
        ("ne", "ne-shannon"),
        ("bt",),
        ("cce", "cce-shannon"),
    ]
    assert twin_groups(["ne", "cce-shannon"]) == [("ne",), ("cce-shannon",)]  # different solvers: no twins


def test_twins_agree_only_without_copies_or_clones():
    r = np.random.default_rng(2).uniform(-1, 1, (12, 4, 4))
    u = (r - np.swapaxes(r, 1, 2)) / 2
    assert twins_agree(u)
    assert not twins_agree(u[[0, 0, *range(1, 12)]])  # a prompt drawn twice: the uniform target counts it
    cloned = u.copy()
    cloned[:, :, 3], cloned[:, 3, :] = cloned[:, :, 2], cloned[:, 2, :]  # model 3 a copy of model 2
    cloned[:, 2, 3] = cloned[:, 3, 2] = cloned[:, 3, 3] = 0.0
    assert not twins_agree(cloned)


@pytest.mark.parametrize("scheme", ["prompts", "judgments"])
def test_a_twin_is_solved_only_where_its_target_differs(scheme):
    """A unit of twins solves the uniform twin only on replicates whose prompts repeat (or hold clones):
    elsewhere it takes the affinity method's solve, and every replicate equals the twin solved alone."""
    u, battles = _battles(solvers.synthetic_king_tensor(16, 5, seed=6), 2, np.random.default_rng(6))
    calls = []

    def counted(game, target, **options):
        calls.append(target)
        return solvers.nash(game, target=target, **options)

    methods = ["twin-a", "twin-u"]
    for name, target in zip(methods, ("affinity", "uniform")):
        register(RatingMethod(name, name, "#000000", "a counted NE", "nash", target, solve=counted, default=False))
    try:
        solver = ReplicateSolver(u, 3, battles)
        _, _, _, solved = solver((tuple(methods), scheme, 0, 6))
        own = [b for b in range(6) if not twins_agree(solver.game(scheme, b))]
        assert len(calls) == 6 + len(own)
        assert (len(own) == 6) if scheme == "prompts" else (own == [])  # every prompt replicate repeats a prompt
        alone = ReplicateSolver(u, 3, battles)((("twin-u",), scheme, 0, 6))[3][0]
        np.testing.assert_allclose(solved[1][0], alone[0], atol=1e-9)
        np.testing.assert_allclose(solved[0][0], ReplicateSolver(u, 3, battles)((("twin-a",), scheme, 0, 6))[3][0][0])
    finally:
        for name in methods:
            unregister(name)


def test_rank_probabilities_share_ties_and_sum_to_one():
    exact = rank_probabilities(np.array([[0.0, 0.0, -1.0], [0.0, -0.5, -0.2]]))
    np.testing.assert_allclose(exact, [[0.75, 0.25, 0.0], [0.25, 0.25, 0.5], [0.0, 0.5, 0.5]])
    rng = np.random.default_rng(0)
    ratings = np.round(rng.normal(size=(300, 6)), 1)  # many ties
    p = rank_probabilities(ratings)
    np.testing.assert_allclose(p.sum(axis=0), 1.0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    b = bootstrap_ratings(solvers.synthetic_king_tensor(30, 5, seed=2), ["cce"], replicates=20, schemes=("prompts",))[0]
    np.testing.assert_allclose(b.rank_probabilities.sum(axis=0), 1.0)
    np.testing.assert_allclose(b.rank_probabilities.sum(axis=1), 1.0)
    np.testing.assert_allclose(b.top_k[1], b.rank_probabilities[:, 0])
    np.testing.assert_allclose(b.top_k[3].sum(), 3.0)
    assert np.all(b.lo <= b.hi)


def _battles(u: np.ndarray, per_order: int, rng: np.random.Generator):
    """+-1 / 0 verdicts per ordered cell and the position-balanced u_king they give."""
    P, M, _ = u.shape
    p, a, b = np.nonzero(~np.eye(M, dtype=bool)[None].repeat(P, axis=0))
    p, a, b = (np.repeat(x, per_order) for x in (p, a, b))
    score = rng.choice([-1.0, 0.0, 1.0], size=len(p))
    means = np.zeros((P, M, M))
    np.add.at(means, (p, a, b), score / per_order)
    return 0.5 * (means - np.swapaxes(means, 1, 2)), {"prompt": p, "model_a": a, "model_b": b, "score": score}


def test_judgment_replicates_draw_each_orders_posterior_around_the_cell():
    rng = np.random.default_rng(4)
    u, battles = _battles(np.zeros((6, 4, 4)), 4, rng)
    constant = (battles["prompt"] == 2) & np.isin(battles["model_a"], [0, 1]) & np.isin(battles["model_b"], [0, 1])
    battles["score"][constant] = 0.5  # cell (2, 0, 1): every sample of both orders equal
    u = u.copy()
    u[2, 0, 1] = u[2, 1, 0] = 0.0
    imputed = np.zeros(u.shape, dtype=bool)
    imputed[4, 1, 3] = imputed[4, 3, 1] = True
    u[4, 1, 3], u[4, 3, 1] = 0.3, -0.3  # an imputed cell keeps its value whatever its samples say
    reps = np.stack([judgment_replicate(u, battles, seed=9, replicate=b, imputed=imputed) for b in range(2000)])
    assert np.all(reps[:, 4, 1, 3] == 0.3) and np.all(reps[:, :, [0, 1, 2, 3], [0, 1, 2, 3]] == 0)
    np.testing.assert_allclose(reps, -np.swapaxes(reps, 2, 3))
    assert np.all(np.abs(reps) <= 1.0)
    judged = ~imputed & ~np.eye(4, dtype=bool)[None]
    assert np.all(np.std(reps, axis=0)[judged] > 0.05)  # every judged cell moves, the unanimous one too
    # Each order moves by a posterior draw minus the posterior mean: a cell never clipped at +-1 is centred on u.
    unclipped = judged & (np.abs(reps) < 1).all(axis=0)
    assert unclipped.sum() > 0.9 * judged.sum()
    se = np.std(reps, axis=0) / np.sqrt(len(reps))
    assert np.all((np.abs(reps.mean(axis=0) - u) <= 4.5 * se)[unclipped])
    # Closed form: an order's mean under Dirichlet(1 per judgment, 1/2 per prior atom +1 and -1) has
    # variance sigma^2 / (k + 2), sigma^2 the atoms' score variance; the cell is half the difference of
    # its two orders. For the unanimous cell (k = 4 scores of 0.5): sigma^2 = 0.4 - 0.4^2 = 0.24.
    scores = battles["score"].reshape(6, 12, 4)  # (prompt, ordered pair, sample): _battles' order
    k = scores.shape[-1]
    mean = scores.sum(-1) / (k + 1)
    sigma2 = ((scores**2).sum(-1) + 1.0) / (k + 1) - mean**2
    order_var = np.zeros((6, 4, 4))
    a, b = np.nonzero(~np.eye(4, dtype=bool))
    order_var[:, a, b] = sigma2 / (k + 2)
    expected = (order_var + np.swapaxes(order_var, 1, 2)) / 4
    assert expected[2, 0, 1] == pytest.approx(2 * 0.24 / 6 / 4)
    ratio = reps.var(axis=0)[unclipped] / expected[unclipped]
    assert np.all((0.85 < ratio) & (ratio < 1.15)), ratio


def test_one_judgment_per_order_still_moves_every_cell():
    """With a single verdict per order resampling would have nothing to draw from; the posterior still
    has the prior's spread (an order with one +-1 verdict: sigma^2 = 0.75, variance 0.75 / 3, so a cell
    has sd 0.35 before clipping at +-1)."""
    u = solvers.synthetic_king_tensor(5, 3, seed=1)
    judged, battles = simulated_battles(u, 1, np.random.default_rng(0))
    reps = np.stack([judgment_replicate(judged, battles, seed=2, replicate=b) for b in range(400)])
    off_diagonal = ~np.eye(3, dtype=bool)[None].repeat(5, axis=0)
    assert np.all(np.std(reps, axis=0)[off_diagonal] > 0.1)


@pytest.mark.integration  # worker processes
def test_same_seed_same_replicates_whatever_the_workers():
    u = solvers.synthetic_king_tensor(30, 4, seed=1)
    u, battles = _battles(u, 2, np.random.default_rng(1))
    kwargs = {"replicates": 12, "battles": battles}
    a = bootstrap_ratings(u, ["ne", "cce"], seed=5, **kwargs)
    b = bootstrap_ratings(u, ["ne", "cce"], seed=5, map_units=process_map(2), **kwargs)
    c = bootstrap_ratings(u, ["ne", "cce"], seed=6, **kwargs)
    assert [(r.method, r.scheme) for r in a] == [
        ("ne", "prompts"),
        ("ne", "judgments"),
        ("cce", "prompts"),
        ("cce", "judgments"),
    ]
    for x, y, z in zip(a, b, c):
        # Equal to rounding: the batched NE solver's XLA reductions follow the process's thread count.
        np.testing.assert_allclose(x.ratings, y.ratings, rtol=0, atol=1e-12)
        assert np.abs(x.ratings - z.ratings).max() > 1e-3


@pytest.mark.integration  # worker processes
def test_workers_started_ahead_take_the_solver_and_give_the_same_replicates():
    """`prewarm_workers` starts the pool before the data is known; the next map hands each worker the
    solver and solves on it; a pool no map took is stopped by `release_prewarmed`."""
    import psutil
    import threadpoolctl

    from eqarena.runtime.worker_pool import prewarm_workers, release_prewarmed

    u = solvers.synthetic_king_tensor(30, 4, seed=1)
    kwargs = {"replicates": 12, "schemes": ("prompts",), "seed": 5}
    others = {p.pid for p in psutil.Process().children()}  # a Prefect test server, a resource tracker

    def workers():  # the processes prewarm_workers started (not multiprocessing's resource tracker)
        return [
            p
            for p in psutil.Process().children()
            if p.pid not in others and "resource_tracker" not in " ".join(p.cmdline())
        ]

    def running(processes):
        return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    prewarm_workers(2)
    ahead = workers()
    assert len(ahead) == 2  # started before any data was handed over
    b = bootstrap_ratings(u, ["ne", "cce"], map_units=process_map(2), **kwargs)
    assert not running(ahead), "the map shuts down the pool it took"
    a = bootstrap_ratings(u, ["ne", "cce"], map_units=process_map(2), **kwargs)  # a pool started for the map
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.ratings, y.ratings)

    prewarm_workers(2)
    unused = workers()
    assert len(unused) == 2
    from eqarena.runtime.worker_pool import _PREWARMED

    blas = [
        lib
        for lib in _PREWARMED[0].pool.submit(threadpoolctl.threadpool_info).result(timeout=120)
        if lib["user_api"] == "blas"
    ]
    assert blas and all(lib["num_threads"] == 1 for lib in blas), blas  # NumPy's and SciPy's OpenBLAS alike
    release_prewarmed()
    psutil.wait_procs(unused, timeout=10)
    assert not running(unused)


@pytest.mark.integration  # worker processes
def test_kept_workers_outlive_their_map_skip_units_not_begun_and_stop_with_the_block():
    """Inside `kept_workers` a map's pool stays up after it (for the main job's report figures): after a
    map that ran to its end, and after one its caller stopped early, whose units no worker had begun
    are then skipped. Every pool kept is stopped when the block ends."""
    import psutil

    from eqarena.runtime.worker_pool import _solve_in_worker, kept_workers

    u = solvers.synthetic_king_tensor(30, 4, seed=1)
    solver = ReplicateSolver(u, 5)
    units = [(("cce",), "prompts", b, b + 2) for b in range(0, 12, 2)]
    with kept_workers() as idle:
        assert idle() is None
        whole = list(process_map(2)(solver, units))
        first = idle()
        assert first is not None and first.submit(int, "7").result(timeout=60) == 7
        stopped = process_map(2)(solver, units)
        np.testing.assert_array_equal(next(stopped)[3][0][0], whole[0][3][0][0])
        stopped.close()  # as bootstrap_ratings does once the intervals settle
        second = idle()
        assert second is not None and second is not first
        assert second.submit(_solve_in_worker, units[-1]).result(timeout=60) is None  # skipped
        again = first.submit(_solve_in_worker, units[-1]).result(timeout=120)  # its map ended normally
        np.testing.assert_array_equal(again[3][0][0], whole[-1][3][0][0])
        processes = [psutil.Process(p) for pool in (first, second) for p in pool._processes]
    assert len(processes) == 4
    psutil.wait_procs(processes, timeout=10)
    assert not [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.integration  # a worker process
def test_kept_workers_import_the_modules_of_the_work_they_are_kept_for():
    """A pool kept by `kept_workers(imports=...)` imports those modules as soon as it is kept (the main job's
    workers: the report's figure modules, before the figures come)."""
    from eqarena.runtime.worker_pool import _keep, _Workers, kept_workers

    loaded = "'wave' in __import__('sys').modules"
    with kept_workers(imports=("wave",)) as idle:
        started = _Workers(1)
        assert started.pool.submit(eval, loaded).result(timeout=120) is False
        assert _keep(started) and idle() is started.pool
        assert started.pool.submit(eval, loaded).result(timeout=60) is True


@pytest.mark.integration  # worker processes
def test_an_interrupt_between_units_stops_the_workers_before_it_propagates():
    """A KeyboardInterrupt raised while the bootstrap handles a finished unit (here: in its progress
    callback), outside the map itself, still stops the map's workers before it reaches the caller."""
    import psutil

    others = {p.pid for p in psutil.Process().children()}

    def workers():
        return [
            p
            for p in psutil.Process().children()
            if p.pid not in others
            and "resource_tracker" not in " ".join(p.cmdline())
            and p.status() != psutil.STATUS_ZOMBIE
        ]

    seen = []

    def interrupt(done: int) -> None:
        seen.extend(workers())
        raise KeyboardInterrupt

    u = solvers.synthetic_king_tensor(30, 4, seed=1)
    with pytest.raises(KeyboardInterrupt) as raised:
        bootstrap_ratings(
            u, ["ne", "cce"], replicates=400, seed=5, schemes=("prompts",), map_units=process_map(2), progress=interrupt
        )
    assert len(seen) == 2  # the workers were at work when the interrupt came
    assert workers() == [], "the workers outlived the interrupt"
    assert raised.value is not None  # its traceback, which holds the bootstrap's frames, is still alive


WORKER_AFTER_NUMPY = """
import multiprocessing, os, threading
import numpy  # loaded before the worker starts, as the eqarena command's module loads it
import threadpoolctl
from eqarena.runtime.worker_pool import _start_worker
_start_worker(os.getppid(), threading.Barrier(1), multiprocessing.RawValue("b", 0), [threading.Lock()])
import scipy.linalg  # loaded after
print(sorted({lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"}))
"""


@pytest.mark.integration  # a subprocess
def test_a_worker_runs_blas_on_one_thread_whenever_its_library_loaded():
    done = subprocess.run([sys.executable, "-c", WORKER_AFTER_NUMPY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1]"


def _settles(ratings: np.ndarray) -> bool:
    """Whether the default settling rule stops at 48 replicates of `ratings` (B >= 48, M) of one
    (method, scheme), checked at 24 and 48 as the bootstrap checks them."""
    from eqarena.solvers.bootstrap.confidence import _SettleWatch

    watch = _SettleWatch(Settling(), CONFIDENCE)
    collected = {("ne", "prompts"): [(0, ratings, np.zeros(len(ratings)), 0.0)]}
    assert not watch.settled(24, collected)
    return watch.settled(48, collected)


def _moves(rng, models: int) -> tuple[float, float]:
    """(root mean square, largest) move of the percentile bounds from 24 to 48 replicates drawn from one
    distribution per model, in median interval widths."""
    steady = rng.normal(size=(48, models)) * rng.uniform(0.5, 2.0, size=models)
    early, late = np.percentile(steady[:24], [2.5, 97.5], axis=0), np.percentile(steady, [2.5, 97.5], axis=0)
    return bound_moves(late, early), np.abs(late - early).max() / np.median(late[1] - late[0])


def test_the_settling_rule_does_not_grow_stricter_with_the_number_of_models():
    rng = np.random.default_rng(0)
    few = np.mean([_moves(rng, 5) for _ in range(60)], axis=0)
    many = np.mean([_moves(rng, 200) for _ in range(60)], axis=0)
    assert 0.8 < many[0] / few[0] < 1.25  # the rule's statistic: the same Monte Carlo noise at 5 and 200 models
    assert many[1] / few[1] > 1.5 and many[1] > 2 * Settling().tol  # the largest move grows with the models
    # Replicates from one distribution move the bounds by ~0.1 widths at 48 (the tolerance): settled there
    # about half the time. Later replicates that repeat the earlier ones' spread settle it:
    steady = rng.normal(size=(48, 200))
    assert _settles(np.concatenate([steady[:24], steady[:24][::-1]]))
    drifting = steady.copy()
    drifting[24:] += 0.5 * np.median(np.diff(np.percentile(steady, [2.5, 97.5], axis=0), axis=0))
    assert not _settles(drifting)  # the later replicates sit half an interval higher


def test_settling_stops_at_a_prefix_of_the_same_replicates_and_says_why():
    u = solvers.synthetic_king_tensor(12, 3, seed=2)
    seen, seen_batched = [], []
    bootstrap_ratings(
        u, ["ne", "cce"], replicates=40, seed=3, schemes=("prompts",), batched=False, progress=seen.append
    )
    assert seen == [8, 16, 24, 32, 40]  # units of 8 replicates solved one by one
    full = bootstrap_ratings(
        u, ["ne", "cce"], replicates=40, seed=3, schemes=("prompts",), progress=seen_batched.append
    )
    assert seen_batched == [24, 40]  # units of 24 (a small game: NE replicates in batches)
    assert all(r.diagnostics["stopped"] == "all replicates" for r in full)
    # Any movement counts as settled: it stops at the first check from min_replicates on.
    loose = bootstrap_ratings(
        u,
        ["ne", "cce"],
        replicates=40,
        seed=3,
        schemes=("prompts",),
        settling=Settling(tol=1e9, min_replicates=16, every=8),
    )
    assert all(len(r.ratings) == 16 and r.diagnostics["stopped"].startswith("settled") for r in loose)
    for short, long in zip(loose, full):
        np.testing.assert_array_equal(short.ratings, long.ratings[:16])
    # Nothing moves by less than 0: with tol 0 every replicate is solved.
    strict = bootstrap_ratings(
        u, ["ne"], replicates=40, seed=3, schemes=("prompts",), settling=Settling(tol=0.0, min_replicates=16, every=8)
    )
    assert strict[0].diagnostics["stopped"] == "all replicates"
    np.testing.assert_array_equal(strict[0].ratings, full[0].ratings)


@pytest.mark.slow
def test_intervals_cover_the_population_rating():
    """Prompts are i.i.d. draws from a population of 400 prompts; the population game's cce-shannon
    ratings are the truth (the uniform target weights prompts by frequency, so the sample's ratings
    estimate them). The 95% interval must hold it in >= 90% of (seed, model) cases."""
    population = solvers.synthetic_king_tensor(400, 4, seed=11, judgments=4, prompt_noise=1.5)
    truth = _direct("cce-shannon", population)
    hits, widths = [], []
    for seed in range(12):
        sample = population[np.random.default_rng(100 + seed).integers(0, 400, size=60)]
        b = bootstrap_ratings(sample, ["cce-shannon"], replicates=REPLICATES, seed=seed, schemes=("prompts",))[0]
        hits.extend((b.lo - 1e-6 <= truth) & (truth <= b.hi + 1e-6))
        widths.append(np.mean(b.hi - b.lo))
    coverage = np.mean(hits)
    assert coverage >= 0.9, f"coverage {coverage:.2f}"
    assert np.mean(widths) > 0.01  # not trivially wide-open nor degenerate: informative intervals
    assert np.mean(widths) < 0.5


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, seeds",
    [("ne", range(0, 12)), ("ne", range(12, 24)), ("cce", range(24))],
    ids=["ne-seeds-0-11", "ne-seeds-12-23", "cce"],
)
def test_judgment_intervals_cover_the_ratings_of_the_expected_game(method, seeds):
    """Judge noise only: the prompts are fixed, the truth is the affinity ratings of the expected payoffs
    u, and the judged tensor holds 8 noisy verdicts per order. The "judgments" scheme's 95% interval must
    hold the truth in >= 90% of (seed, model) cases (bench/coverage.py runs 48 seeds and smooth payoffs).
    NE's 24 seeds are two cases, each held to the bound, so that two test processes share them."""
    hits, widths = [], []
    for seed in seeds:
        u = solvers.synthetic_king_tensor(30, 4, seed=200 + seed, judgments=16)
        truth = _direct(method, u)
        judged, battles = simulated_battles(u, 8, np.random.default_rng(seed))
        b = bootstrap_ratings(
            judged, [method], replicates=REPLICATES, seed=seed, schemes=("judgments",), battles=battles
        )[0]
        hits.extend((b.lo - 1e-6 <= truth) & (truth <= b.hi + 1e-6))
        widths.append(np.mean(b.hi - b.lo))
    coverage = np.mean(hits)
    assert coverage >= 0.9, f"coverage {coverage:.2f}"
    assert 0.01 < np.mean(widths) < 1.0


def test_rate_run_writes_and_reads_back_the_tables(prefect_harness, tmp_path):
    from eqarena.flows import ingest_flow, rate_flow

    db = str(tmp_path / "w.duckdb")
    ingest_flow(IngestOptions(source="vicuna80"), db)
    result = rate_flow(
        RateOptions(
            dataset="vicuna80",
            judges=["prd:gpt4"],
            methods=["ne", "cce-shannon"],
            bootstrap=BootstrapOptions(replicates=8, seed=3),
        ),
        db,
    )
    con = warehouse.connect(db, read_only=True)
    try:
        intervals = store.read_rating_intervals(con, result.run_id)
        probs = store.read_rank_probabilities(con, result.run_id)
        full = {(r.method, r.action): r.rating for r in store.read_ratings(con, result.run_id) if r.player == "king"}
    finally:
        con.close()
    keys = {(r.method, r.scheme) for r in intervals}
    assert keys == {(m, s) for m in ("ne", "cce-shannon") for s in ("prompts", "judgments")}
    assert len(intervals) == 4 * 5 and len(probs) == 4 * 5 * 5
    for r in intervals:
        assert r.rating == pytest.approx(full[(r.method, r.model_id)])
        assert r.lo <= r.median <= r.hi and r.replicates == 8 and r.confidence == 0.95
        assert 0.0 <= r.p_top1 <= r.p_top3 <= 1.0 and r.max_exploitability <= 1e-6
    for key in keys:
        rows = [p for p in probs if (p.method, p.scheme) == key]
        for model in {p.model_id for p in rows}:
            assert sum(p.probability for p in rows if p.model_id == model) == pytest.approx(1.0)
        for rank in range(1, 6):
            assert sum(p.probability for p in rows if p.rank == rank) == pytest.approx(1.0)


@pytest.mark.integration  # a worker process
def test_a_terminated_pool_leaves_no_thread_behind():
    """`terminate_pool` returns once its workers and the executor's own thread have ended: that thread is
    not a daemon, and while it lives an interrupted command cannot leave at once
    (`runtime.quick_exit.nothing_pending`)."""
    import concurrent.futures
    import multiprocessing
    import time

    from eqarena.runtime.worker_pool import terminate_pool

    pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    busy = pool.submit(time.sleep, 60)
    deadline = time.monotonic() + 60
    while not busy.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    processes, manager = list(pool._processes.values()), pool._executor_manager_thread
    terminate_pool(pool)
    assert not [p for p in processes if p.is_alive()]
    assert not manager.is_alive()
