"""Worker processes die with the command that spawned them, from their first moment.

A spawned worker imports the command's entry point (eqarena.cli, about 1 s) before it runs any pool
initializer, so a kill -9 of the command in that second would leave it running until its imports end.
`tie_if_spawned_worker()` runs first thing when the `eqarena` package is imported in a child process
whose parent set WORKER_OF_ENV (`expect_workers()`): on Linux it asks the kernel for SIGKILL when
the parent dies (`prctl(PR_SET_PDEATHSIG)`), and it ignores SIGINT, which a Ctrl-C at the terminal sends
to the workers too: the command stops them itself. Workers start with SIGINT blocked
(`holding_interrupts`), so one that comes before that import waits and is dropped. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

WORKER_OF_ENV = "EQARENA_WORKER_OF"  # the pid whose spawned workers tie their life to it
PR_SET_PDEATHSIG = 1


def expect_workers() -> None:
    """Called by a command before it spawns workers: they inherit the variable and tie themselves to it."""
    os.environ[WORKER_OF_ENV] = str(os.getpid())


@contextmanager
def holding_interrupts() -> Iterator[None]:
    """Start worker processes inside this block: SIGINT is blocked in this thread meanwhile, and a process
    started here inherits the mask. A Ctrl-C that reaches a worker before its first import of `eqarena`
    (the interpreter's own start) then waits instead of killing it with a traceback, and is dropped when
    `tie_if_spawned_worker` ignores SIGINT. This process takes a SIGINT of the block at its end."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # started later, it would unblock SIGINT here (it does so after its own start)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def tie_if_spawned_worker() -> None:
    """In a direct child of the process that called `expect_workers` (its spawned workers; never in
    grandchildren, which inherit the variable too): ask for SIGKILL when that parent dies (Linux). A
    parent that died before this is caught by the pool's initializer (runtime/worker_pool.py), which checks
    the parent pid again. (A spawned child runs with the parent's sys.argv, so argv cannot tell.)"""
    parent = os.environ.get(WORKER_OF_ENV)
    if not parent or str(os.getppid()) != parent:
        return
    # Ctrl-C at a terminal reaches the whole process group: the command stops its workers itself
    # (SIGTERM), so a worker ignores it instead of printing a KeyboardInterrupt traceback of its own.
    # One that came earlier, while the interpreter started, is pending (`holding_interrupts`): dropped now.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
