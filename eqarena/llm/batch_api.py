"""The OpenAI Batch API plumbing the judge (judge/batch.py) and generate (generation/batch.py) share:
write a job's JSONL, upload it, create the batch, poll it, download its results. Each user supplies a
job's request bodies, its job table (warehouse/batch_jobs.py) and the import of its results.

Every step is recorded in DuckDB before the next one starts, so a run killed at any point resumes where
it stopped:
  prepared  -> the file is (re-)uploaded (an upload costs nothing);
  uploaded  -> the provider's batches are searched for one made from our file (or tagged with our job
               id) before a new one is created, so a kill between "create" and "record" costs nothing;
  submitted -> polled and imported.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Callable

import duckdb

from eqarena.exceptions import OptionError
from eqarena.llm.providers import Completion, OpenAIProvider, Provider, completion_from_chat

ENDPOINT = "/v1/chat/completions"
TERMINAL = {"completed": "imported", "failed": "failed", "expired": "expired", "cancelled": "cancelled"}
MAX_REQUESTS_PER_BATCH = 50_000  # the Batch API's limit per file


@dataclass(frozen=True)
class BatchSettings:
    """poll_interval_s: seconds between status checks; max_requests: lines per batch file."""

    poll_interval_s: float = 30.0
    max_requests: int = MAX_REQUESTS_PER_BATCH
    completion_window: str = "24h"


def record_completion(record: dict) -> Completion | str:
    """The completion of one result line, or why the request failed."""
    response = record.get("response") or {}
    body = response.get("body") or {}
    if response.get("status_code") == 200 and body.get("choices") is not None:
        return completion_from_chat(body["choices"], body.get("usage"))
    detail = body.get("error") or record.get("error") or {}
    message = detail.get("message") if isinstance(detail, dict) else str(detail)
    return f"batch request failed (HTTP {response.get('status_code')}): {message}"


class BatchAPIJobs:
    """Submits recorded jobs to the Batch API and hands their results to `import_results` (module
    docstring). Subclasses set `role` and implement the hooks below."""

    role = "judge"  # who the provider is, in the refusal

    def __init__(
        self,
        *,
        provider: Provider,
        con: duckdb.DuckDBPyConnection,
        settings: BatchSettings,
        on_status: Callable[[str], None] | None,
    ):
        if not isinstance(provider, OpenAIProvider):
            raise OptionError(
                f"--batch needs an openai: or openai-compatible: {self.role}, not {provider.spec.judge_id}"
            )
        self.provider = provider
        self.client = provider.client
        self.con = con
        self.settings = settings
        self.on_status = on_status or (lambda message: None)

    # ------------------------------------------------------------------ hooks

    def get_job(self, job_id: str) -> Any:
        raise NotImplementedError

    def update_job(self, job_id: str, **changes: str | None) -> None:
        raise NotImplementedError

    def request_bodies(self, job_id: str) -> list[tuple[str, dict]]:
        """(custom_id, chat-completions body) of every line of a job."""
        raise NotImplementedError

    def import_results(self, job: Any, batch: Any, records: list[dict]) -> Any:
        """Store a finished job's result lines and set its final status (TERMINAL[batch.status])."""
        raise NotImplementedError

    # ------------------------------------------------------------------ submitting

    def jsonl(self, job_id: str) -> bytes:
        """The Batch API input file of a job."""
        lines = [
            json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body})
            for custom_id, body in self.request_bodies(job_id)
        ]
        return ("\n".join(lines) + "\n").encode()

    async def submit(self, job_id: str) -> None:
        """Upload and create the batch of a prepared or uploaded job (idempotent, see module docstring)."""
        job = self.get_job(job_id)
        if job.status == "prepared":
            uploaded = await self.client.files.create(file=(f"{job_id}.jsonl", self.jsonl(job_id)), purpose="batch")
            self.update_job(job_id, status="uploaded", input_file_id=uploaded.id)
            job = self.get_job(job_id)
            self.on_status(f"batch job {job_id}: uploaded {job.requests} requests as {uploaded.id}")
        if job.status == "uploaded":
            existing = await self._find_batch(job)
            if existing is None:
                existing = await self.client.batches.create(
                    input_file_id=job.input_file_id,
                    endpoint=ENDPOINT,
                    completion_window=self.settings.completion_window,
                    metadata={"eqarena_job": job_id},
                )
            self.update_job(job_id, status="submitted", batch_id=existing.id, provider_status=existing.status)
            self.on_status(f"batch job {job_id}: batch {existing.id} {existing.status}")

    async def _find_batch(self, job: Any):
        """A batch already created from this job's file (a run killed before recording it)."""
        async for batch in self.client.batches.list(limit=100):
            metadata = batch.metadata or {}
            if batch.input_file_id == job.input_file_id or metadata.get("eqarena_job") == job.job_id:
                return batch
        return None

    # ------------------------------------------------------------------ collecting

    async def wait(self, job_id: str) -> Any:
        """Poll a submitted job until the provider finishes it, then import its results."""
        job = self.get_job(job_id)
        while True:
            batch = await self.client.batches.retrieve(job.batch_id)
            if batch.status != job.provider_status:
                self.update_job(job_id, provider_status=batch.status)
                counts = batch.request_counts
                done = f" ({counts.completed}/{counts.total} done)" if counts is not None else ""
                self.on_status(f"batch {job.batch_id}: {batch.status}{done}")
                job = self.get_job(job_id)
            if batch.status in TERMINAL:
                records = await self._download(batch.output_file_id) + await self._download(batch.error_file_id)
                return self.import_results(job, batch, records)
            await asyncio.sleep(self.settings.poll_interval_s)

    async def _download(self, file_id: str | None) -> list[dict]:
        if not file_id:
            return []
        content = await self.client.files.content(file_id)
        return [json.loads(line) for line in content.text.splitlines() if line.strip()]
