"""SQL for the `runs` table: one row per pipeline run (ingest, judge, rate, run)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import numpy as np
import psutil

PROCESS_START_SLACK_S = 1.0  # psutil's process start times are exact to a clock tick


@dataclass(frozen=True)
class RunRecord:
    """One row of `runs`. parameters / versions / timings are stored as JSON (never secrets)."""

    run_id: str
    kind: str
    started_at: datetime
    finished_at: datetime | None = None
    status: str = "ok"
    parameters: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    data_fingerprint: str | None = None
    timings: dict = field(default_factory=dict)
    message: str | None = None
    flow_run_id: str | None = None  # the Prefect flow run that made this run
    pid: int | None = field(default_factory=os.getpid)  # the process that made it, on host,
    host: str | None = field(default_factory=socket.gethostname)
    process_started: float | None = field(default_factory=lambda: psutil.Process().create_time())  # its start (epoch s)


def to_json(value: Any) -> str:
    """JSON text for a JSON column (NumPy values and datetimes included)."""
    return json.dumps(value, default=_json_default, sort_keys=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def upsert_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    """Insert or replace the `runs` row of run.run_id."""
    con.execute("DELETE FROM runs WHERE run_id = ?", [run.run_id])
    con.execute(
        "INSERT INTO runs (run_id, kind, status, started_at, finished_at, parameters, versions, "
        "data_fingerprint, timings, message, flow_run_id, pid, host, process_started) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run.run_id,
            run.kind,
            run.status,
            run.started_at,
            run.finished_at,
            to_json(run.parameters),
            to_json(run.versions),
            run.data_fingerprint,
            to_json(run.timings),
            run.message,
            run.flow_run_id,
            run.pid,
            run.host,
            run.process_started,
        ],
    )


def process_alive(pid: int | None, host: str | None, process_started: float | None) -> bool:
    """Whether the process that made a run may still be running: True unless it ran on this machine
    and no process with its pid and start time exists (a reused pid belongs to a younger process)."""
    if pid is None or process_started is None or host != socket.gethostname():
        return True
    try:
        return abs(psutil.Process(pid).create_time() - process_started) < PROCESS_START_SLACK_S
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.Error:
        return True


def abandoned_runs(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int]]:
    """(run_id, pid) of every `running` run whose process is gone (process_alive); none in a warehouse
    from before migration 010 (opened read-only, so not migrated), which does not know the processes."""
    knows_processes = con.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'runs' AND column_name = 'process_started'"
    ).fetchone()[0]
    if not knows_processes:
        return []
    rows = con.execute("SELECT run_id, pid, host, process_started FROM runs WHERE status = 'running'").fetchall()
    return [(run_id, pid) for run_id, pid, host, started in rows if not process_alive(pid, host, started)]


def mark_abandoned_runs(con: duckdb.DuckDBPyConnection) -> int:
    """Mark every `running` run whose process is gone as `abandoned`; returns how many."""
    gone = abandoned_runs(con)
    for run_id, pid in gone:
        con.execute(
            "UPDATE runs SET status = 'abandoned', finished_at = coalesce(finished_at, current_timestamp), "
            "message = ? WHERE run_id = ? AND status = 'running'",
            [f"abandoned: its process (pid {pid}) ended without finishing the run", run_id],
        )
    return len(gone)


def matching_rate_run(con: duckdb.DuckDBPyConnection, fingerprint: str, parameters: dict) -> str | None:
    """The newest finished rate run that read data with `fingerprint` (the content hash of the
    judgments, prompts and models behind its tensor) and has every key of `parameters` equal."""
    rows = con.execute(
        "SELECT run_id, parameters FROM runs WHERE kind = 'rate' AND status = 'ok' AND data_fingerprint = ? "
        "ORDER BY finished_at DESC, started_at DESC",
        [fingerprint],
    ).fetchall()
    for run_id, stored in rows:
        stored = json.loads(stored) if isinstance(stored, str) else (stored or {})
        stored.setdefault("orders", "both")  # rate runs before --orders existed
        if all(stored.get(key) == value for key, value in parameters.items()):
            return run_id
    return None


@dataclass(frozen=True)
class RunLine:
    """A run as `eqarena status` lists it; status `abandoned` when its process is gone."""

    run_id: str
    kind: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    message: str | None


def recent_runs(con: duckdb.DuckDBPyConnection, limit: int = 5) -> list[RunLine]:
    """The `limit` newest runs and every unfinished one, newest first; a `running` run whose process
    is gone shows as `abandoned` (also from a read-only connection, which cannot mark it)."""
    gone = {run_id for run_id, _ in abandoned_runs(con)}
    rows = con.execute(
        "SELECT run_id, kind, status, started_at, finished_at, message FROM runs "
        "QUALIFY row_number() OVER (ORDER BY started_at DESC) <= ? OR status = 'running' "
        "ORDER BY started_at DESC",
        [limit],
    ).fetchall()
    return [
        RunLine(run_id, kind, "abandoned" if run_id in gone else status, started, finished, message)
        for run_id, kind, status, started, finished, message in rows
    ]
