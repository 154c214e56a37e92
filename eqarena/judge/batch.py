"""Judging through the OpenAI Batch API (half price, results within 24 h): the judge's request lines and
the import of their verdicts; uploading, creating, polling, downloading and resuming are shared with
`generate --batch` (eqarena/llm/batch_api.py). Jobs are recorded in eqarena/warehouse/judge_batches.py.
While a job is open its samples count as pending in the plan, so they are never asked for twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import duckdb

from eqarena.judge.plan import PlannedRequest
from eqarena.judge.rows import RowContext, error_rows, sample_rows
from eqarena.judge.templates import Template
from eqarena.llm.batch_api import TERMINAL, BatchAPIJobs, BatchSettings, record_completion
from eqarena.llm.providers import OpenAIProvider
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

__all__ = ["BatchJudge", "BatchSettings", "JobResult"]


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


class BatchJudge(BatchAPIJobs):
    """Submits planned requests as Batch API jobs and imports their results."""

    role = "judge"

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
        super().__init__(provider=provider, con=con, settings=settings, on_status=on_status)
        self.template = template
        self.dataset = dataset
        self.prompts = prompts
        self.responses = responses
        self.run_id = run_id
        self.options = options
        self.multi_sample = multi_sample
        self._rows = RowContext(provider.spec.judge_id, template, dataset, run_id)

    @property
    def judge_id(self) -> str:
        return self.provider.spec.judge_id

    def get_job(self, job_id: str) -> BatchJob:
        return get_job(self.con, job_id)

    def update_job(self, job_id: str, **changes: str | None) -> None:
        update_job(self.con, job_id, **changes)

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
                lines.append(
                    BatchRequest(
                        f"r{len(lines):07d}", request.prompt_id, request.model_a, request.model_b, group[0], len(group)
                    )
                )
        job_ids = []
        size = self.settings.max_requests
        for start in range(0, len(lines), size):
            part = lines[start : start + size]
            job_id = f"judge-{uuid.uuid4().hex[:16]}"
            job = BatchJob(
                job_id=job_id,
                judge=self.judge_id,
                template_hash=self.template.hash,
                dataset=self.dataset,
                status="prepared",
                requests=len(part),
                samples=sum(r.n for r in part),
                run_id=self.run_id,
            )
            record_job(self.con, job, part)
            job_ids.append(job_id)
        return job_ids

    def request_bodies(self, job_id: str) -> list[tuple[str, dict]]:
        """(custom_id, body) of a job's lines: each asks for the verdicts of one ordered cell."""
        bodies = []
        for line in job_requests(self.con, job_id):
            messages = self.template.messages(
                self.prompts[line.prompt_id],
                self.responses[line.prompt_id, line.model_a],
                self.responses[line.prompt_id, line.model_b],
            )
            bodies.append((line.custom_id, self.provider.request_body(messages, line.n, self.options)))
        return bodies

    # ------------------------------------------------------------------ importing

    def import_results(self, job: BatchJob, batch, records: list[dict]) -> JobResult:
        """Store the verdicts of a finished job (failed lines as error rows) and close it."""
        lines = {line.custom_id: line for line in job_requests(self.con, job.job_id)}
        rows: list[JudgmentRow] = []
        ok = unparsed = errors = tokens_in = tokens_out = 0
        for record in records:
            line = lines.get(record.get("custom_id"))
            if line is None:
                continue
            cell = (line.prompt_id, line.model_a, line.model_b)
            indices = list(range(line.first_sample, line.first_sample + line.n))
            completion = record_completion(record)
            if not isinstance(completion, str):
                answered = indices[: len(completion.texts)] if completion.texts else indices
                new, bad = sample_rows(self._rows, cell, answered, completion)
                rows += new
                ok, unparsed = ok + len(answered) - bad, unparsed + bad
                tokens_in += completion.tokens_in or 0
                tokens_out += completion.tokens_out or 0
            else:
                rows += error_rows(self._rows, cell, indices, completion)
                errors += len(indices)
        status = TERMINAL[batch.status]
        # Lines without a result (an expired or cancelled batch) get no row: the next plan asks again.
        finish_job(self.con, job.job_id, rows, status=status, message=f"provider status {batch.status}")
        self.on_status(f"batch {job.batch_id}: imported {ok} ok, {unparsed} unparsed, {errors} failed")
        answered = sum(1 for record in records if record.get("custom_id") in lines)
        return JobResult(job.job_id, status, answered, ok, unparsed, errors, tokens_in, tokens_out)
