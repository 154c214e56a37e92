"""SQL for `eqarena generate --batch`'s Batch API jobs (tables in migrations/015_generate_batches.sql):
recording a job and its prompts before anything is sent, advancing its status (batch_jobs.py), the
prompts open jobs hold (pending in the plan), and importing the answers with the final status in one
transaction, so a killed run resumes a job instead of paying for it twice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import duckdb

from eqarena.warehouse import batch_jobs
from eqarena.warehouse.responses import ResponseRow, insert_responses

TABLE = "generate_batches"


@dataclass(frozen=True)
class GenerateBatchJob(batch_jobs.JobProgress):
    """One row of generate_batches: the answers of `model_id` by `generator`, asked with `generation`."""

    job_id: str
    dataset: str
    model_id: str
    generator: str
    generation: str
    status: str
    requests: int


def record_job(con: duckdb.DuckDBPyConnection, job: GenerateBatchJob, lines: Sequence[tuple[str, str]]) -> None:
    """Store a new job (status 'prepared') and its (custom_id, prompt_id) lines in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        batch_jobs.insert_job(con, TABLE, job)
        con.execute(
            "INSERT INTO generate_batch_requests (job_id, custom_id, prompt_id) "
            "SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
            [job.job_id, [c for c, _ in lines], [p for _, p in lines]],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def update_job(con: duckdb.DuckDBPyConnection, job_id: str, **changes: str | None) -> None:
    batch_jobs.update_job(con, TABLE, job_id, **changes)


def get_job(con: duckdb.DuckDBPyConnection, job_id: str) -> GenerateBatchJob:
    return batch_jobs.get_job(con, TABLE, GenerateBatchJob, job_id)


def open_jobs(con: duckdb.DuckDBPyConnection, dataset: str, model_id: str) -> list[GenerateBatchJob]:
    """Jobs answering for `model_id` on `dataset` not yet imported or given up, oldest first."""
    return batch_jobs.open_jobs(con, TABLE, GenerateBatchJob, dataset=dataset, model_id=model_id)


def job_prompts(con: duckdb.DuckDBPyConnection, job_id: str) -> dict[str, str]:
    """{custom_id: prompt_id} of a job's lines, in custom_id order."""
    return dict(
        con.execute(
            "SELECT custom_id, prompt_id FROM generate_batch_requests WHERE job_id = ? ORDER BY custom_id", [job_id]
        ).fetchall()
    )


def pending_prompts(con: duckdb.DuckDBPyConnection, dataset: str, model_id: str) -> set[str]:
    """The prompts open jobs of `model_id` on `dataset` are asking for (none before migration 015)."""
    if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [TABLE]).fetchone()[0]:
        return set()  # a read-only look at a warehouse not migrated yet
    rows = con.execute(
        "SELECT r.prompt_id FROM generate_batch_requests r JOIN generate_batches b USING (job_id) "
        "WHERE b.dataset = ? AND b.model_id = ? AND list_contains(?, b.status)",
        [dataset, model_id, list(batch_jobs.OPEN_STATUSES)],
    ).fetchall()
    return {p for (p,) in rows}


def finish_job(
    con: duckdb.DuckDBPyConnection, job_id: str, rows: Iterable[ResponseRow], *, status: str, message: str | None = None
) -> int:
    """Insert a job's answers and set its final status in one transaction; returns new answers."""
    return batch_jobs.finish_job(con, TABLE, job_id, insert_responses, rows, status=status, message=message)
