"""Worker processes that never run the caller's script.

Python's "spawn" start method (eqarena's only one: JAX is multithreaded, so fork is unsafe) starts each
child by importing the parent's main module again, as `__mp_main__`: a script that calls `eqarena.rate`
at its top level, without an `if __name__ == "__main__":` guard, would run again in every worker and
fail there (multiprocessing's "bootstrapping phase" error, a BrokenProcessPool in the parent). eqarena's
workers run only eqarena's own functions, so they need nothing of the main module: `spawn_context`
starts them as if the parent had none (a notebook's, an interactive session's). A consequence: a rating
method registered by the caller's script itself is unknown to the workers; register it in a module they
can import instead.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _SpawnProcess(multiprocessing.context.SpawnProcess):
    """A spawned process whose start does not tell the child to import the parent's main module."""

    @staticmethod
    def _Popen(process_obj):
        with _main_module_hidden():
            return multiprocessing.context.SpawnProcess._Popen(process_obj)


class _SpawnContext(multiprocessing.context.SpawnContext):
    Process = _SpawnProcess


_CONTEXT = _SpawnContext()


def spawn_context() -> multiprocessing.context.SpawnContext:
    """The "spawn" context, its children started without the parent's main module (module docstring);
    for `ProcessPoolExecutor(mp_context=...)`."""
    return _CONTEXT


@contextmanager
def _main_module_hidden() -> Iterator[None]:
    """While the child's start is prepared (`multiprocessing.spawn.get_preparation_data`, which reads
    `__main__.__spec__` and `__main__.__file__`), the main module shows neither."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    hidden = {name: main.__dict__.pop(name) for name in ("__file__",) if name in main.__dict__}
    spec = getattr(main, "__spec__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__spec__ = spec
        main.__dict__.update(hidden)
