"""One computation in a fresh process held to one core, so that its result does not depend on the machine.

XLA's CPU runtime splits some reductions (a sum over a leading axis, a full sum) into as many parts
as the process may use cores, so their last bits follow the core count. A long chaotic computation,
such as the risk analysis's exploitability descent (3,000 Adam steps on 128 profiles), amplifies
those bits: on the bundled game it found 106 distinct equilibria with 2 cores and 110 with one. Run
on one core in its own process it finds the same ones for a seed on every machine (XLA's and BLAS's
thread counts are set before JAX loads). The process dies with its command (`runtime.lifeline`).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import ctypes
import os
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

from eqarena.runtime.lifeline import holding_interrupts
from eqarena.runtime.spawning import spawn_context
from eqarena.runtime.worker_pool import BLAS_THREAD_VARIABLES, terminate_pool

T = TypeVar("T")


def on_one_core(fn: Callable[..., T], *args, **kwargs) -> T:
    """`fn(*args, **kwargs)` in a fresh process held to one core (the first this process may use);
    `fn` and its arguments must pickle. Exceptions travel back as raised. A command that exits while the
    process still computes (interrupted while a background thread waits here) stops it at its exit."""
    core = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=1,
        mp_context=spawn_context(),
        initializer=_hold_to_one_core,
        initargs=(os.getpid(), core),
    )
    _track(pool)
    try:
        with holding_interrupts():  # the process starts here: a Ctrl-C meanwhile waits (`runtime.lifeline`)
            future = pool.submit(fn, *args, **kwargs)
        return future.result()
    finally:
        _LIVE.discard(pool)
        terminate_pool(pool)


_LIVE: set[concurrent.futures.ProcessPoolExecutor] = set()  # the pools of computations still running


def _track(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Keep `pool` among the live ones; the first time, register their stop at exit. It runs before
    multiprocessing's own exit handler (atexit is last in, first out; multiprocessing registered its
    handler on import), which would otherwise wait for the computation to finish (its processes are
    not daemons)."""
    if not _LIVE and not _STOP_REGISTERED:
        atexit.register(_stop_live)
        _STOP_REGISTERED.append(True)
    _LIVE.add(pool)


_STOP_REGISTERED: list[bool] = []


def _stop_live() -> None:
    """Stop the processes of computations still running: the command is exiting without their result."""
    for pool in list(_LIVE):
        _LIVE.discard(pool)
        terminate_pool(pool)


def _hold_to_one_core(parent: int, core: int | None) -> None:
    """The process's entry: die with the parent, one core, one thread for XLA and BLAS (before JAX
    and NumPy's BLAS load in this process)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)
    if core is not None:
        os.sched_setaffinity(0, {core})
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    ).strip()
    for variable in BLAS_THREAD_VARIABLES:
        os.environ[variable] = "1"
