"""Solving bootstrap replicates on worker processes, one per core.

`process_map(workers)` is a `map_units` for `solvers.bootstrap.confidence.bootstrap_ratings`: it hands the
replicate solver (the full data) to each worker once and maps the units of replicates over the
workers. `prewarm_workers` starts the processes ahead of the bootstrap, while the command still
assembles and solves the full data. Each worker runs single-threaded (XLA's and BLAS's own thread
pools would only contend with the other workers); it is set up here, in the worker's entry point,
never on import. The workers share a lock per compiled program (`solvers.nash.batched.guard_compiles`):
with JAX's compilation cache on, one compiles a program both need and the other reads it back. A map the
caller stops early (the intervals settled) skips the units no worker has begun; inside `kept_workers` its
pool then stays up for other work (the main job's report figures), whose modules it imports meanwhile.

Workers never outlive the command: on Linux each asks the kernel for SIGKILL when its parent dies
(`prctl(PR_SET_PDEATHSIG)`), so a SIGTERM or kill -9 of the command takes them along, and an
interrupt (Ctrl-C, or any exception while mapping) terminates them before it propagates.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import importlib
import os
import pickle
import signal
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eqarena.runtime.lifeline import expect_workers, holding_interrupts
from eqarena.runtime.spawning import spawn_context

if TYPE_CHECKING:  # imported by the worker only after it has tied its life to the parent's
    from eqarena.solvers.bootstrap.confidence import ReplicateSolver, Unit, UnitMap, UnitResult

_WORKER_SOLVER: list = []  # the solver of this worker process (set by _install_solver)
_WORKER_BARRIER: list = []  # the pool's barrier: each worker takes exactly one solver (set by _start_worker)
_WORKER_STOPPED: list = []  # the pool's flag (shared memory, no lock), 1 once its map stopped early
_INSTALL_TIMEOUT_S = 600.0  # a worker waits this long for the others to take theirs
# Locks the workers share, one per compiled program (by a hash of its name): a worker that would compile a
# program another is compiling waits and reads it back from the compilation cache (`_start_worker`).
_COMPILE_LOCKS = 8
# Thread counts OpenBLAS, MKL and OpenMP take when they load: a worker sets them before its imports
# (a limit set at run time, such as threadpoolctl's, holds only for the libraries already loaded).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def _start_worker(parent: int, barrier, stopped, compiling) -> None:
    """Entry point of a worker process: die with the parent (first, before any heavy import), one
    thread for XLA and BLAS, then import the solvers (while the command still prepares its data, when
    the pool was started ahead of it). `compiling`: the pool's `_COMPILE_LOCKS` locks."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)
    _keep_freed_memory()
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    ).strip()
    for variable in BLAS_THREAD_VARIABLES:  # read by each BLAS library as it loads
        os.environ[variable] = "1"
    _WORKER_BARRIER[:] = [barrier]
    _WORKER_STOPPED[:] = [stopped]
    import threadpoolctl

    import eqarena.solvers.bootstrap.confidence  # noqa: F401  (the imports every unit needs)

    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):  # one worker compiles a program, the others read it back
        from eqarena.solvers.nash.batched import guard_compiles

        guard_compiles(lambda program: compiling[zlib.crc32(repr(program).encode()) % len(compiling)])

    threadpoolctl.threadpool_limits(1)  # and the ones loaded before (NumPy's, by the command's own module)


# glibc's malloc (mallopt parameters): blocks below this many bytes come from the heap ...
_M_MMAP_THRESHOLD, _HEAP_BLOCKS_BELOW = -3, 64 << 20
# ... and freed memory at its top goes back to the kernel only beyond this many bytes.
_M_TRIM_THRESHOLD, _HEAP_KEPT = -1, 256 << 20


def _keep_freed_memory() -> None:
    """Let this worker's heap keep the memory it frees (glibc; elsewhere nothing is done).

    A replicate's solve allocates and frees arrays the size of its joint (hundreds of kB) thousands
    of times. glibc's adaptive thresholds may hand that memory back to the kernel after each call,
    and every new array then faults its pages in again: measured on 500 x 17 prompt replicates,
    3,900 page faults and 37.6 ms per CCE replicate, against 1 fault and 25.4 ms with these limits.
    """
    if not sys.platform.startswith("linux"):
        return
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _HEAP_BLOCKS_BELOW)
        mallopt(_M_TRIM_THRESHOLD, _HEAP_KEPT)


def _install_solver(solver: bytes) -> None:
    """Keep `solver` in this worker, then wait for the other workers to take theirs: a worker that holds
    one takes no second install, so each worker gets exactly one."""
    _WORKER_SOLVER[:] = [pickle.loads(solver)]
    _WORKER_BARRIER[0].wait(timeout=_INSTALL_TIMEOUT_S)


def _solve_in_worker(unit: Unit) -> UnitResult | None:
    if _WORKER_STOPPED[0].value:  # queued before the map stopped: nobody reads it
        return None
    return _WORKER_SOLVER[0](unit)


class _Workers:
    """A spawned pool of `workers` processes, started now (the first ones starting with it) and solver-less."""

    def __init__(self, workers: int):
        context = spawn_context()  # JAX is multithreaded: never fork it; never re-run the caller's script
        expect_workers()  # they tie their life to this process before their first import (eqarena/runtime/lifeline.py)
        self.workers = workers
        # Set when the map stops early (`process_map`). A lock-free shared byte: a semaphore left to the
        # resource tracker at a quick exit would have it print a "leaked semaphore" warning.
        self.stopped = context.RawValue("b", 0)
        self.pool = concurrent.futures.ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_start_worker,
            initargs=(
                os.getpid(),
                context.Barrier(workers),
                self.stopped,
                [context.Lock() for _ in range(_COMPILE_LOCKS)],
            ),
        )
        with holding_interrupts():  # a Ctrl-C before a worker's first import must not kill it with a traceback
            for _ in range(workers):  # a spawning executor starts a process per submit while none is idle:
                self.pool.submit(int)  # back to back, before any has started, these start all of them

    def install(self, solver: ReplicateSolver) -> None:
        """Hand `solver` to every worker (pickled once)."""
        blob = pickle.dumps(solver)
        for done in [self.pool.submit(_install_solver, blob) for _ in range(self.workers)]:
            done.result()


_PREWARMED: list[_Workers] = []


def prewarm_workers(workers: int) -> None:
    """Start `workers` worker processes now, for the next `process_map(workers)` of this process: their
    start (about 1 s of imports each) then overlaps the command's own work. No-op below 2 workers, or
    when a pool is waiting already. `release_prewarmed` stops one that ends up unused."""
    if workers >= 2 and not _PREWARMED:
        _PREWARMED.append(_Workers(workers))


@contextmanager
def workers_ahead(workers: int) -> Iterator[None]:
    """`prewarm_workers(workers)` now, for a bootstrap later in the block (a command calls it before it
    imports its pipeline, so the workers import while it does); a pool no map took is stopped when the
    block ends, however it ends."""
    prewarm_workers(workers)
    try:
        yield
    finally:
        release_prewarmed()


def release_prewarmed() -> None:
    """Stop a pool `prewarm_workers` started that no map took (at once: its workers may still be
    importing, and an interrupted command must not wait for them)."""
    while _PREWARMED:
        terminate_pool(_PREWARMED.pop().pool)


def _workers_for(workers: int) -> _Workers:
    if _PREWARMED and _PREWARMED[0].workers == workers:
        return _PREWARMED.pop()
    release_prewarmed()
    return _Workers(workers)


def process_map(workers: int) -> UnitMap:
    """A `map_units` over `workers` spawned processes (serial in this process when `workers` is 1), the
    ones `prewarm_workers` started if there are."""
    if workers <= 1:
        from eqarena.solvers.bootstrap.confidence import serial_map

        return serial_map

    def run(solver: ReplicateSolver, units: Sequence[Unit]) -> Iterator[UnitResult]:
        started = _workers_for(workers)
        pool = started.pool
        try:
            started.install(solver)
            yield from pool.map(_solve_in_worker, units)
        except GeneratorExit:  # the caller stopped early (the intervals settled): units not begun are skipped
            started.stopped.value = 1
            if not _keep(started):
                terminate_pool(pool)
            raise
        except BaseException:
            terminate_pool(pool)
            raise
        if not _keep(started):  # every unit is back and the workers idle: stop them now (an orderly
            terminate_pool(pool)  # exit of theirs, tearing down XLA, costs ~0.25 s and saves nothing)

    return run


@dataclass(eq=False)
class _Kept:
    """The pools a `kept_workers` block keeps, and the modules their workers import once kept."""

    imports: tuple[str, ...]
    pools: list[concurrent.futures.ProcessPoolExecutor] = field(default_factory=list)


_KEEPING: list[_Kept] = []  # the open `kept_workers` blocks, innermost last


def _keep(started: _Workers) -> bool:
    """Keep `started`'s pool for the enclosing `kept_workers` block, if there is one, and have its workers
    import the block's modules now."""
    if not _KEEPING:
        return False
    block = _KEEPING[-1]
    block.pools.append(started.pool)
    for module in block.imports:
        for _ in range(started.workers):  # one each, unless a worker takes two: the other then imports it on use
            started.pool.submit(_import, module)
    return True


def _import(module: str) -> None:
    importlib.import_module(module)


@contextmanager
def kept_workers(imports: Sequence[str] = ()) -> Iterator[Callable[[], concurrent.futures.Executor | None]]:
    """Within the block, the worker processes of a `process_map` outlive its map (a unit still running
    when the map stopped early finishes first, the rest are skipped); yields a function that gives
    the last such pool, or None, for other work (the main job draws its report's figures on them).
    `imports`: modules the kept workers import as soon as their map is done (those of the other work,
    so that it does not wait for them). Every pool kept is stopped when the block ends, however it ends."""
    block = _Kept(tuple(imports))
    _KEEPING.append(block)
    try:
        yield lambda: block.pools[-1] if block.pools else None
    finally:
        _KEEPING.remove(block)
        for pool in block.pools:
            terminate_pool(pool)


def terminate_pool(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Stop the pool's workers now, running units and all (an interrupt must not wait for them), and the
    executor's thread, which ends once they have. That thread is not a daemon: while it lives, a command
    stopped here cannot leave at once (`runtime.quick_exit.nothing_pending`) and exits through the
    interpreter's shutdown (up to 0.5 s measured on an idle machine, more on a loaded one)."""
    processes = list((pool._processes or {}).values())  # the executor has no public handle on them ...
    manager = getattr(pool, "_executor_manager_thread", None)  # ... nor on its thread
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=2)
    if manager is not None:
        manager.join(timeout=2)
