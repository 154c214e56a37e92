"""What every `eqarena` command shares: one-line error exits, quiet Prefect logging, common help texts."""

from __future__ import annotations

import atexit
import gc
import logging
import traceback
from contextlib import contextmanager
from typing import Iterator

import typer

from tasks.datasets import DatasetError
from warehouse.connection import WarehouseInUseError

DB_HELP = "DuckDB warehouse file (default: $EQARENA_DB, else warehouse/eqarena.duckdb)."

# Errors a user can fix (bad input, a busy or missing database): shown as one line on stderr, exit 1.
KNOWN_ERRORS: tuple[type[BaseException], ...] = (WarehouseInUseError, DatasetError, FileNotFoundError)


@contextmanager
def cli_errors(*extra: type[BaseException]) -> Iterator[None]:
    """Turn KNOWN_ERRORS (and `extra`) into `error: <message>` on stderr and exit code 1, without a
    traceback. Use as a decorator under @app.command() or as a `with` block."""
    try:
        yield
    except typer.Exit:  # an inner cli_errors already reported (click's Exit is a RuntimeError)
        raise
    except (*KNOWN_ERRORS, *extra) as exc:
        typer.echo(f"error: {exc}", err=True)
        release_frames(exc)
        raise typer.Exit(1) from None


def release_frames(exc: BaseException) -> None:
    """Free what the failed call's frames hold (DuckDB connections among them). Prefect keeps a failed
    run's exception, and with it every frame of its traceback: a connection still alive at interpreter
    exit makes DuckDB's bindings print a page of "leaked instance" warnings after the error message."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__
    gc.collect()


@contextmanager
def quiet_prefect(level: int = logging.CRITICAL) -> Iterator[None]:
    """Keep Prefect's console output (run states, tracebacks of failed tasks) off the terminal while a
    flow runs from the command line: the command prints its own summary or one-line error. Flow-run
    logs still reach the Prefect API (its handler is not the console's), so the UI shows them. Flows
    report to the configured Prefect API, else to a temporary one that stops with the command
    (flows/prefect_api.py)."""
    from prefect.logging.handlers import PrefectConsoleHandler

    from flows.prefect_api import TemporaryApiError, ensure_prefect_api

    consoles = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    before = [h.level for h in consoles]
    for handler in consoles:
        handler.setLevel(level)
    try:
        with cli_errors(TemporaryApiError):
            ensure_prefect_api()
        yield
    finally:
        for handler, old_level in zip(consoles, before):
            handler.setLevel(old_level)
            # Prefect reports from its exit handlers too (a temporary server stopping); atexit runs
            # handlers last-in first-out, so this one silences them first.
            atexit.register(handler.setLevel, level)
