"""Solving bootstrap replicates on worker processes, one per core.

`process_map(workers)` is a `map_units` for `solvers.bootstrap.bootstrap_ratings`: it hands the
replicate solver (the full data) to each worker once, at its start, and maps the units of replicates
over the workers. Each worker runs single-threaded (XLA's and BLAS's own thread pools would only
contend with the other workers); it is set up here, in the worker's entry point, never on import.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from collections.abc import Iterator, Sequence

from eqarena.solvers.bootstrap import ReplicateSolver, Unit, UnitMap, UnitResult, serial_map

_WORKER_SOLVER: list[ReplicateSolver] = []  # the solver of this worker process (set by _start_worker)


def _start_worker(solver: ReplicateSolver) -> None:
    """Entry point of a worker process: one thread for XLA and BLAS, then keep the solver."""
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    import threadpoolctl

    threadpoolctl.threadpool_limits(1)
    _WORKER_SOLVER[:] = [solver]


def _solve_in_worker(unit: Unit) -> UnitResult:
    return _WORKER_SOLVER[0](unit)


def process_map(workers: int) -> UnitMap:
    """A `map_units` over `workers` spawned processes (serial in this process when `workers` is 1)."""
    if workers <= 1:
        return serial_map

    def run(solver: ReplicateSolver, units: Sequence[Unit]) -> Iterator[UnitResult]:
        context = multiprocessing.get_context("spawn")  # JAX is multithreaded: never fork it
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                                    initargs=(solver,)) as pool:
            yield from pool.map(_solve_in_worker, units)

    return run
