"""Solving bootstrap replicates on worker processes, one per core.

`process_map(workers)` is a `map_units` for `solvers.bootstrap.bootstrap_ratings`: it hands the
replicate solver (the full data) to each worker once, at its start, and maps the units of replicates
over the workers. Each worker runs single-threaded (XLA's and BLAS's own thread pools would only
contend with the other workers); it is set up here, in the worker's entry point, never on import.

Workers never outlive the command: on Linux each asks the kernel for SIGKILL when its parent dies
(`prctl(PR_SET_PDEATHSIG)`), so a SIGTERM or kill -9 of the command takes them along, and an
interrupt (Ctrl-C, or any exception while mapping) terminates them before it propagates.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from eqarena.lifeline import expect_workers

if TYPE_CHECKING:  # imported by the worker only after it has tied its life to the parent's
    from eqarena.solvers.bootstrap import ReplicateSolver, Unit, UnitMap, UnitResult

_WORKER_SOLVER: list = []  # the solver of this worker process (set by _start_worker)


def _start_worker(solver: bytes, parent: int) -> None:
    """Entry point of a worker process: die with the parent (first, before any heavy import), one
    thread for XLA and BLAS, then unpickle and keep the solver."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    import threadpoolctl

    threadpoolctl.threadpool_limits(1)
    _WORKER_SOLVER[:] = [pickle.loads(solver)]


def _solve_in_worker(unit: Unit) -> UnitResult:
    return _WORKER_SOLVER[0](unit)


def process_map(workers: int) -> UnitMap:
    """A `map_units` over `workers` spawned processes (serial in this process when `workers` is 1)."""
    if workers <= 1:
        from eqarena.solvers.bootstrap import serial_map

        return serial_map

    def run(solver: ReplicateSolver, units: Sequence[Unit]) -> Iterator[UnitResult]:
        context = multiprocessing.get_context("spawn")  # JAX is multithreaded: never fork it
        expect_workers()  # they tie their life to this process before their first import (eqarena/lifeline.py)
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                                      initargs=(pickle.dumps(solver), os.getpid()))
        try:
            yield from pool.map(_solve_in_worker, units)
        except BaseException:
            _terminate(pool)
            raise
        pool.shutdown()

    return run


def _terminate(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Stop the pool's workers now, running units and all (an interrupt must not wait for them)."""
    processes = list((pool._processes or {}).values())  # the executor has no public handle on them
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=2)
