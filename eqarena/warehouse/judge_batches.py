"""SQL for the judge's Batch API jobs (tables in migrations/002_judge.sql): recording a job before
anything is sent, advancing its status, and importing its results with the status change in one
transaction, so a killed run resumes a job instead of paying for it twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import duckdb

from eqarena.warehouse import batch_jobs
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments

TABLE = "judge_batches"


@dataclass(frozen=True)
class BatchJob(batch_jobs.JobProgress):
    """One row of judge_batches."""

    job_id: str
    judge: str
    template_hash: str
    dataset: str
    status: str
    requests: int
    samples: int


@dataclass(frozen=True)
class BatchRequest:
    """One JSONL line of a job: an ordered cell and its samples first_sample .. first_sample + n - 1."""

    custom_id: str
    prompt_id: str
    model_a: str
    model_b: str
    first_sample: int
    n: int


def record_job(con: duckdb.DuckDBPyConnection, job: BatchJob, requests: Sequence[BatchRequest]) -> None:
    """Store a new job (status 'prepared') and its request lines in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        batch_jobs.insert_job(con, TABLE, job)
        con.execute(
            "INSERT INTO judge_batch_requests (job_id, custom_id, prompt_id, model_a, model_b, first_sample, n) "
            "SELECT $job_id, unnest($c::VARCHAR[]), unnest($p::VARCHAR[]), unnest($a::VARCHAR[]), "
            "unnest($b::VARCHAR[]), unnest($s::INTEGER[]), unnest($n::INTEGER[])",
            {
                "job_id": job.job_id,
                "c": [r.custom_id for r in requests],
                "p": [r.prompt_id for r in requests],
                "a": [r.model_a for r in requests],
                "b": [r.model_b for r in requests],
                "s": [r.first_sample for r in requests],
                "n": [r.n for r in requests],
            },
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def update_job(con: duckdb.DuckDBPyConnection, job_id: str, **changes: str | None) -> None:
    """Set some of status, input_file_id, batch_id, output_file_id, error_file_id, provider_status, message."""
    batch_jobs.update_job(con, TABLE, job_id, **changes)


def open_jobs(con: duckdb.DuckDBPyConnection, judge: str, template_hash: str, dataset: str) -> list[BatchJob]:
    """Jobs of this judge, template and dataset not yet imported or given up, oldest first."""
    return batch_jobs.open_jobs(con, TABLE, BatchJob, judge=judge, template_hash=template_hash, dataset=dataset)


def get_job(con: duckdb.DuckDBPyConnection, job_id: str) -> BatchJob:
    return batch_jobs.get_job(con, TABLE, BatchJob, job_id)


def job_requests(con: duckdb.DuckDBPyConnection, job_id: str) -> list[BatchRequest]:
    """The request lines of a job, in custom_id order."""
    rows = con.execute(
        "SELECT custom_id, prompt_id, model_a, model_b, first_sample, n FROM judge_batch_requests "
        "WHERE job_id = ? ORDER BY custom_id",
        [job_id],
    ).fetchall()
    return [BatchRequest(*row) for row in rows]


def finish_job(
    con: duckdb.DuckDBPyConnection, job_id: str, rows: Iterable[JudgmentRow], *, status: str, message: str | None = None
) -> int:
    """Insert a job's judgments and set its final status in one transaction; returns new judgment rows."""
    return batch_jobs.finish_job(con, TABLE, job_id, insert_judgments, rows, status=status, message=message)
