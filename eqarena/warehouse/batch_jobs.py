"""SQL shared by the Batch API job tables (`judge_batches`, `generate_batches`): a job row's status
columns and how they advance, and importing a job's results with its final status in one transaction.
Each table's own module (judge_batches.py, generate_batches.py) names its columns and its request lines."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, TypeVar

import duckdb

OPEN_STATUSES = ("prepared", "uploaded", "submitted")
UPDATABLE = ("status", "input_file_id", "batch_id", "output_file_id", "error_file_id", "provider_status", "message")
JOB_TABLES = ("judge_batches", "generate_batches")

Job = TypeVar("Job")


@dataclass(frozen=True, kw_only=True)
class JobProgress:
    """The columns every job table has after its own: how far the job got at the provider (its files,
    batch and status), and the run that submitted it."""

    input_file_id: str | None = None
    batch_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    provider_status: str | None = None
    message: str | None = None
    run_id: str | None = None


def _table(table: str) -> str:
    if table not in JOB_TABLES:
        raise ValueError(f"not a batch job table: {table}")
    return table


def columns(job_type: type) -> list[str]:
    """The columns of a job dataclass, in field order."""
    return [f.name for f in fields(job_type)]


def insert_job(con: duckdb.DuckDBPyConnection, table: str, job: Any) -> None:
    """Insert one job row from its dataclass."""
    names = columns(type(job))
    con.execute(
        f"INSERT INTO {_table(table)} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        [getattr(job, c) for c in names],
    )


def update_job(con: duckdb.DuckDBPyConnection, table: str, job_id: str, **changes: str | None) -> None:
    """Set some of status, input_file_id, batch_id, output_file_id, error_file_id, provider_status, message."""
    unknown = set(changes) - set(UPDATABLE)
    if unknown:
        raise ValueError(f"cannot update {table} column(s) {sorted(unknown)}")
    if not changes:
        return
    assignments = ", ".join(f"{c} = ?" for c in changes)
    con.execute(
        f"UPDATE {_table(table)} SET {assignments}, updated_at = current_timestamp WHERE job_id = ?",
        [*changes.values(), job_id],
    )


def get_job(con: duckdb.DuckDBPyConnection, table: str, job_type: type[Job], job_id: str) -> Job:
    row = con.execute(
        f"SELECT {', '.join(columns(job_type))} FROM {_table(table)} WHERE job_id = ?", [job_id]
    ).fetchone()
    if row is None:
        raise KeyError(f"no batch job {job_id}")
    return _job(job_type, row)


def open_jobs(con: duckdb.DuckDBPyConnection, table: str, job_type: type[Job], **match: str) -> list[Job]:
    """The jobs whose columns equal `match` and that are not yet imported or given up, oldest first."""
    unknown = set(match) - set(columns(job_type))
    if unknown:
        raise ValueError(f"{table} has no column(s) {sorted(unknown)}")
    where = "".join(f"{c} = ? AND " for c in match)
    rows = con.execute(
        f"SELECT {', '.join(columns(job_type))} FROM {_table(table)} WHERE {where}"
        f"list_contains(?, status) ORDER BY created_at, job_id",
        [*match.values(), list(OPEN_STATUSES)],
    ).fetchall()
    return [_job(job_type, row) for row in rows]


def _job(job_type: type[Job], row: tuple) -> Job:
    """A job dataclass from a row of its `columns`, in that order."""
    return job_type(**dict(zip(columns(job_type), row)))


def finish_job(
    con: duckdb.DuckDBPyConnection,
    table: str,
    job_id: str,
    insert: Callable[[Any, Iterable], int],
    rows: Iterable,
    *,
    status: str,
    message: str | None = None,
) -> int:
    """Insert a job's results with `insert` and set its final status in one transaction; returns new rows."""
    con.execute("BEGIN TRANSACTION")
    try:
        written = insert(con, rows)
        update_job(con, table, job_id, status=status, message=message)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return written
