"""Running improvement-path trials (Algorithm 1, eqarena/solvers/analyses/improvement_path.py) over methods,
settings and trials, in worker processes; their steps as one polars frame; and the final-entropy
summary (bootstrap over trials, paired elo - ne differences)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import closing
from typing import Callable, Iterable

import polars as pl

from eqarena import warehouse
from eqarena.methods import canonical, get_method
from eqarena.runtime.spawning import spawn_context
from eqarena.runtime.worker_pool import terminate_pool
from eqarena.solvers.analyses.improvement_path import PathSizes, PathStep, improvement_path, rater
from eqarena.solvers.analyses.improvement_summary import (
    EntropyDifference,
    FinalEntropy,
    bootstrap_mean,
    difference_sentence,
    paired_difference,
)
from eqarena.warehouse.runs import RunRecord
from eqarena.warehouse.simulations import write_simulation
from eqarena.warehouse.snapshot import publish_snapshot

Job = tuple[str, str, int]  # (method, setting, trial)


def trial_steps(method: str, setting: str, sizes: PathSizes, seed: int) -> list[PathStep]:
    """One trial (a worker's job): Algorithm 1 under `method` in `setting`, drawn from `seed`."""
    return improvement_path(rater(method), setting, sizes, seed)


def run_trials(
    methods: Iterable[str],
    settings: Iterable[str],
    sizes: PathSizes,
    trials: int,
    seed: int,
    workers: int = 1,
    on_done: Callable[[Job, list[PathStep], int], None] | None = None,
) -> dict[Job, list[PathStep]]:
    """Every (method, setting, trial) path; trial k is drawn with seed + k (the same draw for every
    method and setting). `workers` > 1 runs them in that many processes; on_done(job, steps, finished)
    is called as each ends."""
    jobs = [(m, s, k) for m in methods for s in settings for k in range(trials)]
    results: dict[Job, list[PathStep]] = {}

    def done(job, steps):
        results[job] = steps
        if on_done is not None:
            on_done(job, steps, len(results))

    if workers <= 1:
        for job in jobs:
            done(job, trial_steps(job[0], job[1], sizes, seed + job[2]))
        return results
    # Equilibrium trials are the slow ones: submit them first so the workers finish together.
    order = sorted(jobs, key=lambda j: not get_method(canonical(j[0])).is_equilibrium)
    context = spawn_context()  # JAX's threads make fork unsafe; the caller's script is not re-run
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        futures = {pool.submit(trial_steps, m, s, sizes, seed + k): (m, s, k) for m, s, k in order}
        for future in as_completed(futures):
            done(futures[future], future.result())
    except BaseException:  # an interrupt or a failed trial: stop the running trials, drop the queued ones
        terminate_pool(pool)
        raise
    pool.shutdown()
    return {job: results[job] for job in jobs}


def steps_frame(results: dict[Job, list[PathStep]]) -> pl.DataFrame:
    """One row per (method, setting, trial, iteration): the columns of table simulation_steps."""

    def vector(v):
        return None if v is None else [float(x) for x in v]

    rows = [
        {
            "method": m,
            "setting": s,
            "trial": k,
            "iteration": st.iteration,
            "prompt_entropy": st.prompt_entropy,
            "model_entropy": st.model_entropy,
            "added_model": vector(st.added_model),
            "added_prompt": vector(st.added_prompt),
            "prompt_marginal": vector(st.prompt_marginal),
            "equilibrium_prompt_skills": vector(st.equilibrium_prompt_skills),
            "rounds": st.rounds,
            "top_ranked": st.top_ranked,
        }
        for (m, s, k), steps in results.items()
        for st in steps
    ]
    schema = {
        "method": pl.Utf8,
        "setting": pl.Utf8,
        "trial": pl.Int32,
        "iteration": pl.Int32,
        "prompt_entropy": pl.Float64,
        "model_entropy": pl.Float64,
        "added_model": pl.List(pl.Float64),
        "added_prompt": pl.List(pl.Float64),
        "prompt_marginal": pl.List(pl.Float64),
        "equilibrium_prompt_skills": pl.List(pl.Float64),
        "rounds": pl.Int32,
        "top_ranked": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def final_values(frame: pl.DataFrame, method: str, setting: str, column: str) -> list[float]:
    """The per-trial value of `column` at the last iteration, in trial order."""
    rows = frame.filter((pl.col("method") == method) & (pl.col("setting") == setting))
    last = rows.filter(pl.col("iteration") == pl.col("iteration").max()).sort("trial")
    return last[column].to_list()


def summarise(
    frame: pl.DataFrame,
    methods: list[str],
    settings: list[str],
    seed: int = 0,
) -> tuple[list[FinalEntropy], list[EntropyDifference]]:
    """Final entropies per method and setting; and, for every method after the first (elo when run),
    the paired difference first - method per setting, for models and prompts."""
    finals = [
        FinalEntropy(
            m,
            s,
            bootstrap_mean(final_values(frame, m, s, "prompt_entropy"), seed=seed),
            bootstrap_mean(final_values(frame, m, s, "model_entropy"), seed=seed),
        )
        for m in methods
        for s in settings
    ]
    differences = []
    first = methods[0]
    for other in methods[1:]:
        for s in settings:
            for what in ("model", "prompt"):
                column = f"{what}_entropy"
                d = paired_difference(
                    final_values(frame, first, s, column), final_values(frame, other, s, column), seed=seed
                )
                differences.append(
                    EntropyDifference(
                        first, other, s, what, d, f"{s} prompts: " + difference_sentence(first, other, what, d)
                    )
                )
    return finals, differences


def store_simulation(db: str | None, run: RunRecord, kind: str, frame: pl.DataFrame) -> None:
    """Write a simulation run's steps (simulation_runs, simulation_steps) in one transaction and publish the
    readers' snapshot."""
    with closing(warehouse.connect(db)) as con:
        write_simulation(con, run, kind, frame)
        publish_snapshot(con)
