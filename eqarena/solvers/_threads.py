"""BLAS threads for the solvers' matrix-vector passes over the payoffs, by the size of the game.

Below about a million payoff entries a pass takes well under a millisecond: one thread is as fast,
and avoids OpenBLAS's thread spinning when the machine is busy. Above it the passes are memory-bound
streams that a second thread speeds up (measured on 2 cores, one pass of u @ x and x @ u: 1.9x at
100 x 200 x 200, 1.4x at 805 x 200 x 200; 1.0x at 100 x 65 x 65). Worker processes are limited to one
thread on their own (`runtime/worker_pool.py`). The libraries are looked up once per process:
`threadpool_limits` would search them on every call (milliseconds, more than a small solve)."""

from __future__ import annotations

import contextlib
import functools

from threadpoolctl import ThreadpoolController

MANY_ENTRIES = 1 << 20  # payoff entries from which the passes keep the process's BLAS threads


@functools.cache
def _controller() -> ThreadpoolController:
    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS before the libraries are looked up)

    return ThreadpoolController()


def one_blas_thread():
    """A context manager that limits BLAS to one thread."""
    return _controller().limit(limits=1, user_api="blas")


def blas_threads(entries: int):
    """A context manager for a solve over `entries` payoff entries: one BLAS thread for small games,
    the process's own (usually one per core) for large ones (module docstring)."""
    return one_blas_thread() if entries < MANY_ENTRIES else contextlib.nullcontext()
