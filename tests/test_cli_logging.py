"""While a command runs a flow, Prefect's own console output is kept off the terminal (the command
prints its summary), but warnings of other libraries still reach it."""

from __future__ import annotations

import logging

from eqarena.cli.support import quiet_prefect


def _record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "message", None, None)


def test_only_prefect_is_quieted(prefect_harness):
    from prefect.logging.handlers import PrefectConsoleHandler

    consoles = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    assert consoles, "Prefect's console handler is on the root logger"
    before = [(h.level, list(h.filters)) for h in consoles]
    with quiet_prefect():
        for handler in consoles:
            assert not handler.filter(_record("prefect.flow_runs", logging.ERROR))
            assert not handler.filter(_record("prefect.task_runs", logging.CRITICAL))
            for library in ("jax._src.dispatch", "duckdb", "py.warnings"):
                record = _record(library, logging.WARNING)
                assert handler.filter(record) and record.levelno >= handler.level, library
    assert [(h.level, list(h.filters)) for h in consoles] == before  # restored for the rest of the process
