"""Prefect's console output kept off the terminal while a command runs flows: the command prints its
own summary or one-line error. Warnings of other libraries (JAX, DuckDB, ...) still reach the terminal,
and flow-run logs still reach the Prefect API (its handler is not the console's), so the UI shows them."""

from __future__ import annotations

import atexit
import logging
from contextlib import contextmanager
from typing import Iterator


class _NotPrefect(logging.Filter):
    """Lets every record through but Prefect's own (run states, tracebacks of failed tasks)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith("prefect")


_NOT_PREFECT = _NotPrefect()


@contextmanager
def prefect_console_quiet() -> Iterator[None]:
    """Silence Prefect's own records on its console handlers for the block (module docstring)."""
    from prefect.logging.handlers import PrefectConsoleHandler

    consoles = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    before = [h.level for h in consoles]
    for handler in consoles:
        handler.addFilter(_NOT_PREFECT)
        handler.setLevel(max(handler.level, logging.WARNING))
    try:
        yield
    finally:
        for handler, old_level in zip(consoles, before):
            handler.removeFilter(_NOT_PREFECT)
            handler.setLevel(old_level)
            # Prefect reports from its exit handlers too (a temporary server stopping); atexit runs
            # handlers last-in first-out, so this one silences them first.
            atexit.register(handler.addFilter, _NOT_PREFECT)
