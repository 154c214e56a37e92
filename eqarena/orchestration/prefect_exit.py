"""Freeing, at exit, what Prefect would otherwise hold until the interpreter tears itself down.

Each of Prefect's background services (the workers sending logs and events to the API, the run
waiters) queues its final drain on Prefect's global event loop, with a copy of the context it was
started in: the flow or task run that first logged or emitted an event, and with it that run's
parameters (a judge runner and its DuckDB connection, arrays), results and exceptions (and their
frames). That loop runs in a daemon thread nobody shuts down, so all of it stays alive until the
modules are torn down, and DuckDB or jaxlib objects among it make their bindings print a page of
"nanobind: leaked instance" warnings after the command's last line. The services send their last logs
and events when threads are shut down, before exit handlers run; `release_prefect_at_exit` then stops
the loop, which drops those contexts, and collects what they held.
"""

from __future__ import annotations

import atexit
import gc
import sys

STOP_S = 5.0
_registered: list[bool] = []


def release_prefect_at_exit() -> None:
    """Stop Prefect's global event loop at exit and collect what it held (module docstring). Exit
    handlers run last-registered first: call it after starting anything the services report to."""
    if not _registered:
        atexit.register(_release)
        _registered.append(True)


def _release() -> None:
    threads = sys.modules.get("prefect._internal.concurrency.threads")
    loop = getattr(threads, "_global_loop", None)  # never started: nothing to stop (and no thread to start now)
    if loop is not None and loop.running:
        loop.shutdown()  # runs the queued drains (already done: no-ops), then drops them
        loop.thread.join(STOP_S)
    gc.collect()
