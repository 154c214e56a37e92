"""SQL for the `runs` table: one row per pipeline run (ingest, judge, rate, run)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import numpy as np


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
        "data_fingerprint, timings, message, flow_run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [run.run_id, run.kind, run.status, run.started_at, run.finished_at, to_json(run.parameters),
         to_json(run.versions), run.data_fingerprint, to_json(run.timings), run.message, run.flow_run_id],
    )


def matching_rate_run(con: duckdb.DuckDBPyConnection, fingerprint: str, parameters: dict) -> str | None:
    """The newest finished rate run that read data with `fingerprint` (the content hash of the
    judgments, prompts and models behind its tensor) and has every key of `parameters` equal."""
    rows = con.execute(
        "SELECT run_id, parameters FROM runs WHERE kind = 'rate' AND status = 'ok' AND data_fingerprint = ? "
        "ORDER BY finished_at DESC, started_at DESC", [fingerprint]).fetchall()
    for run_id, stored in rows:
        stored = json.loads(stored) if isinstance(stored, str) else (stored or {})
        stored.setdefault("orders", "both")  # rate runs before --orders existed
        if all(stored.get(key) == value for key, value in parameters.items()):
            return run_id
    return None
