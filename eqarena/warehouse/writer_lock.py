"""One pipeline run writing to a warehouse at a time.

A refresh (or the main job) opens and closes DuckDB many times; between two of its steps another
process could open the file and interleave its own writes. The run therefore holds an exclusive
advisory lock (`fcntl.flock`) on `<warehouse>.lock` for its whole length and records in it who holds
it. A second run waits for the lock at most `wait_s` seconds, then stops with WarehouseBusyError
naming the run that is writing. The kernel releases the lock when the holder exits in any way
(kill -9 included), so a crashed run never leaves the warehouse locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from eqarena.exceptions import EqarenaError

_POLL_S = 0.2


class WarehouseBusyError(EqarenaError, RuntimeError):
    """Another run holds the warehouse's writer lock."""


def lock_path(db_path: Path) -> Path:
    return Path(f"{db_path}.lock")


def lock_holder(db_path: Path) -> dict:
    """What the current (or last) holder wrote into the lock file: run_id, pid, started_at; {} if none."""
    try:
        return json.loads(lock_path(db_path).read_text() or "{}")
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


@contextmanager
def writer_lock(
    db_path: Path, run_id: str, wait_s: float = 0.0, on_wait: Callable[[dict], None] | None = None
) -> Iterator[None]:
    """Hold the warehouse's writer lock for the block (module docstring). `on_wait(holder)` is called
    once if the lock is taken and the run starts waiting."""
    path = lock_path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        deadline = time.monotonic() + max(wait_s, 0.0)
        waiting = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = lock_holder(db_path)
                if time.monotonic() >= deadline:
                    raise WarehouseBusyError(_busy_message(db_path, holder, wait_s)) from None
                if not waiting and on_wait is not None:
                    on_wait(holder)
                waiting = True
                time.sleep(_POLL_S)
        handle.seek(0)
        handle.truncate()
        handle.write(
            json.dumps(
                {
                    "run_id": run_id,
                    "pid": os.getpid(),
                    "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                }
            )
        )
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def _busy_message(db_path: Path, holder: dict, wait_s: float) -> str:
    who = (
        f"run {holder.get('run_id', '?')} (pid {holder.get('pid', '?')}, since {holder.get('started_at', '?')})"
        if holder
        else "another run"
    )
    waited = f" after waiting {wait_s:g} s" if wait_s > 0 else ""
    return f"warehouse busy: {who} is writing {db_path}{waited}; try again when it is done, or pass --wait SECONDS"
