"""One BLAS thread for the solvers' memory-bound matrix-vector passes (it is as fast, and avoids
OpenBLAS's thread spinning when the machine is busy). The libraries are looked up once per process:
`threadpool_limits` would search them on every call (milliseconds, more than a small solve)."""

from __future__ import annotations

import functools

from threadpoolctl import ThreadpoolController


@functools.cache
def _controller() -> ThreadpoolController:
    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS before the libraries are looked up)

    return ThreadpoolController()


def one_blas_thread():
    """A context manager that limits BLAS to one thread."""
    return _controller().limit(limits=1, user_api="blas")
