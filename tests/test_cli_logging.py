"""While a command runs a flow, Prefect's own console output is kept off the terminal (the command
prints its summary), but warnings of other libraries still reach it."""

from __future__ import annotations

import logging
import subprocess
import sys

from eqarena.cli.support import quiet_prefect


def _record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "message", None, None)


def test_prefect_puts_its_console_handler_on_the_root_logger():
    """What `quiet_prefect` relies on, in a process as the command line's once it imports flows (no other
    handler on the root logger; under pytest, Prefect leaves the root logger to pytest's handlers)."""
    probe = (
        "import logging; from prefect import flow; from prefect.logging.handlers import PrefectConsoleHandler; "
        "print(sum(isinstance(h, PrefectConsoleHandler) for h in logging.getLogger().handlers))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_only_prefect_is_quieted(prefect_harness):
    from prefect.logging.handlers import PrefectConsoleHandler

    root = logging.getLogger()
    added = None if any(isinstance(h, PrefectConsoleHandler) for h in root.handlers) else PrefectConsoleHandler()
    if added is not None:  # as in the command line's process (test above)
        root.addHandler(added)
    try:
        consoles = [h for h in root.handlers if isinstance(h, PrefectConsoleHandler)]
        before = [(h.level, list(h.filters)) for h in consoles]
        with quiet_prefect():
            for handler in consoles:
                assert not handler.filter(_record("prefect.flow_runs", logging.ERROR))
                assert not handler.filter(_record("prefect.task_runs", logging.CRITICAL))
                for library in ("jax._src.dispatch", "duckdb", "py.warnings"):
                    record = _record(library, logging.WARNING)
                    assert handler.filter(record) and record.levelno >= handler.level, library
        assert [(h.level, list(h.filters)) for h in consoles] == before  # restored for the rest of the process
    finally:
        if added is not None:
            root.removeHandler(added)
