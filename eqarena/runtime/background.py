"""One computation on a background thread, its result (or error) collected later as a Future.

The thread is a daemon: it never keeps the command alive, and the computation writes nothing, so a
command that fails or is interrupted before collecting the result leaves nothing partial behind. Such
a command leaves by `exit_now_if_busy`: the interpreter's shutdown stops daemon threads where they
stand, and one stopped inside native code (a jitted XLA computation) aborts the process.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable, TypeVar

from eqarena.runtime.quick_exit import quick_exit

T = TypeVar("T")

_THREADS: list[threading.Thread] = []


def in_background(name: str, fn: Callable[..., T], *args) -> Future[T]:
    """Start fn(*args) on a daemon thread named `name`; the Future holds its result or its exception."""
    future: Future[T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to whoever asks for the result
            future.set_exception(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    _THREADS[:] = [t for t in _THREADS if t.is_alive()] + [thread]
    thread.start()
    return future


def exit_now_if_busy(code: object) -> None:
    """With a background computation still running, end the process now with exit status `code` (as
    SystemExit reads it), without the interpreter's shutdown (module docstring; `quick_exit`).
    Otherwise return. Called by the command on its way out, its own cleanup done."""
    if any(t.is_alive() for t in _THREADS):
        quick_exit(code)
