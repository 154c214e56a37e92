"""Ending a command's process without the interpreter's shutdown.

A finished command has written and closed everything; what the interpreter's shutdown still does is
free the heap object by object: with JAX, polars and matplotlib loaded, about a second of one core
after the command's last line. `quick_exit` runs what a normal exit runs first (the `atexit` handlers:
worker pools' semaphores, a temporary Prefect API, logging's flush), flushes stdout and stderr, and
ends the process. It waits for no thread: a command leaves this way only when no other non-daemon
thread is alive and no profiler waits to write its results (`nothing_pending`), or when a daemon
thread must not be stopped by the shutdown (`runtime/background.py`).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def nothing_pending() -> bool:
    """Whether no thread but daemons and this one is alive (a normal exit would wait for the others),
    and no profiler or tracer (cProfile, coverage, a debugger) waits to write its results after the
    command returns."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return False
    current = threading.current_thread()
    return all(t is current or t.daemon or not t.is_alive() for t in threading.enumerate())


def quick_exit(code: object) -> None:
    """End the process now with exit status `code` (as SystemExit reads it), after the exit handlers
    and a flush of stdout and stderr (module docstring)."""
    atexit._run_exitfuncs()
    if code is not None and not isinstance(code, int):  # sys.exit("message") says it, as a normal exit does
        print(code, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more to show
            pass
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))
