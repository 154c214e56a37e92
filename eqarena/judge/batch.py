"""Judging through the OpenAI Batch API (half price, results within 24 h): write the JSONL, upload it,
create the batch, poll, download and import the results.

Every step is recorded in DuckDB before the next one starts (eqarena/warehouse/judge_batches.py), so a run
killed at any point resumes where it stopped:
  prepared  -> the file is (re-)uploaded (an upload costs nothing);
  uploaded  -> the provider's batches are searched for one made from our file (or tagged with our job
               id) before a new one is created, so a kill between "create" and "record" costs nothing;
  submitted -> polled and imported.
While a job is open its samples count as pending in the plan, so they are never asked for twice.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import duckdb

from eqarena.judge.plan import PlannedRequest
from eqarena.judge.providers import OpenAIProvider, completion_from_chat
from eqarena.judge.rows import RowContext, error_rows, sample_rows
from eqarena.judge.templates import Template
from eqarena.options import GenerationOptions
from eqarena.warehouse.judge_batches import (
    BatchJob,
    BatchRequest,
    finish_job,
    get_job,
    job_requests,
    open_jobs,
    record_job,
    update_job,
)
from eqarena.warehouse.judgments import JudgmentRow

ENDPOINT = "/v1/chat/completions"
TERMINAL = {"completed": "imported", "failed": "failed", "expired": "expired", "cancelled": "cancelled"}
MAX_REQUESTS_PER_BATCH = 50_000  # the Batch API's limit per file


@dataclass(frozen=True)
class BatchSettings:
    """poll_interval_s: seconds between status checks; max_requests: lines per batch file."""

    poll_interval_s: float = 30.0
    max_requests: int = MAX_REQUESTS_PER_BATCH
    completion_window: str = "24h"


@dataclass(frozen=True)
class JobResult:
    job_id: str
    status: str
    requests: int  # lines with a result
    ok: int
    unparsed: int
    errors: int
    tokens_in: int
    tokens_out: int


class BatchJudge:
    """Submits planned requests as Batch API jobs and imports their results."""

    def __init__(
        self,
        *,
        provider: OpenAIProvider,
        template: Template,
        dataset: str,
        prompts: Mapping[str, str],
        responses: Mapping[tuple[str, str], str],
        con: duckdb.DuckDBPyConnection,
        run_id: str | None = None,
        options: GenerationOptions = GenerationOptions(),
        settings: BatchSettings = BatchSettings(),
        multi_sample: bool = True,
        on_status: Callable[[str], None] | None = None,
    ):
        if not isinstance(provider, OpenAIProvider):
            raise ValueError(f"--batch needs an openai: or openai-compatible: judge, not {provider.spec.judge_id}")
        self.provider = provider
        self.client = provider.client
        self.template = template
        self.dataset = dataset
        self.prompts = prompts
        self.responses = responses
        self.con = con
        self.run_id = run_id
        self.options = options
        self.settings = settings
        self.multi_sample = multi_sample
        self.on_status = on_status or (lambda message: None)
        self._rows = RowContext(provider.spec.judge_id, template, dataset, run_id)

    @property
    def judge_id(self) -> str:
        return self.provider.spec.judge_id

    def open_jobs(self) -> list[BatchJob]:
        return open_jobs(self.con, self.judge_id, self.template.hash, self.dataset)

    # ------------------------------------------------------------------ submitting

    def prepare(self, requests: Sequence[PlannedRequest]) -> list[str]:
        """Record jobs (status 'prepared') for the requests, at most settings.max_requests lines each."""
        lines: list[BatchRequest] = []
        for request in requests:
            indices = request.sample_indices
            groups = [indices] if self.multi_sample else [(i,) for i in indices]
            for group in groups:
                lines.append(BatchRequest(f"r{len(lines):07d}", request.prompt_id, request.model_a,
                                          request.model_b, group[0], len(group)))
        job_ids = []
        size = self.settings.max_requests
        for start in range(0, len(lines), size):
            part = lines[start:start + size]
            job_id = f"judge-{uuid.uuid4().hex[:16]}"
            job = BatchJob(job_id=job_id, judge=self.judge_id, template_hash=self.template.hash,
                           dataset=self.dataset, status="prepared", requests=len(part),
                           samples=sum(r.n for r in part), run_id=self.run_id)
            record_job(self.con, job, part)
            job_ids.append(job_id)
        return job_ids

    def jsonl(self, job_id: str) -> bytes:
        """The Batch API input file of a job."""
        out = []
        for line in job_requests(self.con, job_id):
            messages = self.template.messages(
                self.prompts[line.prompt_id],
                self.responses[line.prompt_id, line.model_a],
                self.responses[line.prompt_id, line.model_b],
            )
            body = self.provider.request_body(messages, line.n, self.options)
            out.append(json.dumps({"custom_id": line.custom_id, "method": "POST", "url": ENDPOINT, "body": body}))
        return ("\n".join(out) + "\n").encode()

    async def submit(self, job_id: str) -> None:
        """Upload and create the batch of a prepared or uploaded job (idempotent, see module docstring)."""
        job = get_job(self.con, job_id)
        if job.status == "prepared":
            uploaded = await self.client.files.create(file=(f"{job_id}.jsonl", self.jsonl(job_id)), purpose="batch")
            update_job(self.con, job_id, status="uploaded", input_file_id=uploaded.id)
            job = get_job(self.con, job_id)
            self.on_status(f"batch job {job_id}: uploaded {job.requests} requests as {uploaded.id}")
        if job.status == "uploaded":
            existing = await self._find_batch(job)
            if existing is None:
                existing = await self.client.batches.create(
                    input_file_id=job.input_file_id, endpoint=ENDPOINT,
                    completion_window=self.settings.completion_window, metadata={"eqarena_job": job_id},
                )
            update_job(self.con, job_id, status="submitted", batch_id=existing.id, provider_status=existing.status)
            self.on_status(f"batch job {job_id}: batch {existing.id} {existing.status}")

    async def _find_batch(self, job: BatchJob):
        """A batch already created from this job's file (a run killed before recording it)."""
        async for batch in self.client.batches.list(limit=100):
            metadata = batch.metadata or {}
            if batch.input_file_id == job.input_file_id or metadata.get("eqarena_job") == job.job_id:
                return batch
        return None

    # ------------------------------------------------------------------ collecting

    async def wait(self, job_id: str) -> JobResult:
        """Poll a submitted job until the provider finishes it, then import its results."""
        job = get_job(self.con, job_id)
        while True:
            batch = await self.client.batches.retrieve(job.batch_id)
            if batch.status != job.provider_status:
                update_job(self.con, job_id, provider_status=batch.status)
                counts = batch.request_counts
                done = f" ({counts.completed}/{counts.total} done)" if counts is not None else ""
                self.on_status(f"batch {job.batch_id}: {batch.status}{done}")
                job = get_job(self.con, job_id)
            if batch.status in TERMINAL:
                return await self._import(job, batch)
            await asyncio.sleep(self.settings.poll_interval_s)

    async def _download(self, file_id: str | None) -> list[dict]:
        if not file_id:
            return []
        content = await self.client.files.content(file_id)
        return [json.loads(line) for line in content.text.splitlines() if line.strip()]

    async def _import(self, job: BatchJob, batch) -> JobResult:
        lines = {line.custom_id: line for line in job_requests(self.con, job.job_id)}
        records = await self._download(batch.output_file_id) + await self._download(batch.error_file_id)
        rows: list[JudgmentRow] = []
        ok = unparsed = errors = tokens_in = tokens_out = 0
        for record in records:
            line = lines.get(record.get("custom_id"))
            if line is None:
                continue
            cell = (line.prompt_id, line.model_a, line.model_b)
            indices = list(range(line.first_sample, line.first_sample + line.n))
            response = record.get("response") or {}
            body = response.get("body") or {}
            if response.get("status_code") == 200 and body.get("choices") is not None:
                completion = completion_from_chat(body["choices"], body.get("usage"))
                answered = indices[: len(completion.texts)] if completion.texts else indices
                new, bad = sample_rows(self._rows, cell, answered, completion)
                rows += new
                ok, unparsed = ok + len(answered) - bad, unparsed + bad
                tokens_in += completion.tokens_in or 0
                tokens_out += completion.tokens_out or 0
            else:
                detail = (body.get("error") or record.get("error") or {})
                message = detail.get("message") if isinstance(detail, dict) else str(detail)
                status = response.get("status_code")
                rows += error_rows(self._rows, cell, indices, f"batch request failed (HTTP {status}): {message}")
                errors += len(indices)
        status = TERMINAL[batch.status]
        # Lines without a result (an expired or cancelled batch) get no row: the next plan asks again.
        finish_job(self.con, job.job_id, rows, status=status, message=f"provider status {batch.status}")
        self.on_status(f"batch {job.batch_id}: imported {ok} ok, {unparsed} unparsed, {errors} failed")
        answered = sum(1 for record in records if record.get("custom_id") in lines)
        return JobResult(job.job_id, status, answered, ok, unparsed, errors, tokens_in, tokens_out)
