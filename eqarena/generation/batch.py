"""Answers through the OpenAI Batch API (`generate --batch`, half price, within 24 h): a job's lines
(one chat-completions body per prompt, custom_id naming the prompt) and the import of its answers into
`responses` as the live runner stores them. Upload, create, poll, download and resume are the judge's
(eqarena/llm/batch_api.py); jobs are recorded in eqarena/warehouse/generate_batches.py. A failed line
or an empty answer is counted and not stored: the next run asks again.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import duckdb

from eqarena.generation.plan import AnswerRequest, answer_messages
from eqarena.generation.runner import EMPTY_ANSWER
from eqarena.llm.batch_api import TERMINAL, BatchAPIJobs, BatchSettings, record_completion
from eqarena.llm.providers import Provider
from eqarena.options import GenerationOptions
from eqarena.warehouse.generate_batches import (
    GenerateBatchJob,
    finish_job,
    get_job,
    job_prompts,
    open_jobs,
    record_job,
    update_job,
)
from eqarena.warehouse.responses import ResponseRow


@dataclass
class AnswerJobResult:
    """What one job brought: lines with a result, answers stored, failures by reason, usage."""

    job_id: str
    status: str
    requests: int = 0
    ok: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0


class BatchGenerator(BatchAPIJobs):
    """Submits unanswered prompts as Batch API jobs and stores the answers they bring."""

    role = "model"

    def __init__(
        self,
        *,
        provider: Provider,
        model_id: str,
        dataset: str,
        prompts: Mapping[str, str],
        generation: str,
        con: duckdb.DuckDBPyConnection,
        run_id: str | None = None,
        settings: BatchSettings = BatchSettings(),
        on_status: Callable[[str], None] | None = None,
    ):
        super().__init__(provider=provider, con=con, settings=settings, on_status=on_status)
        self.model_id = model_id
        self.dataset = dataset
        self.prompts = prompts  # every prompt text of the dataset: a resumed job may hold any of them
        self.generation = generation
        self.run_id = run_id

    def get_job(self, job_id: str) -> GenerateBatchJob:
        return get_job(self.con, job_id)

    def update_job(self, job_id: str, **changes: str | None) -> None:
        update_job(self.con, job_id, **changes)

    def open_jobs(self) -> list[GenerateBatchJob]:
        return open_jobs(self.con, self.dataset, self.model_id)

    def prepare(self, requests: Sequence[AnswerRequest]) -> list[str]:
        """Record jobs (status 'prepared') for the prompts, at most settings.max_requests lines each."""
        job_ids = []
        size = self.settings.max_requests
        for start in range(0, len(requests), size):
            part = requests[start : start + size]
            job_id = f"generate-{uuid.uuid4().hex[:16]}"
            job = GenerateBatchJob(
                job_id=job_id,
                dataset=self.dataset,
                model_id=self.model_id,
                generator=self.provider.spec.judge_id,
                generation=self.generation,
                status="prepared",
                requests=len(part),
                run_id=self.run_id,
            )
            record_job(self.con, job, [(f"p{k:07d}-{r.prompt_id}", r.prompt_id) for k, r in enumerate(part)])
            job_ids.append(job_id)
        return job_ids

    def request_bodies(self, job_id: str) -> list[tuple[str, dict]]:
        """(custom_id, body) of a job's lines, asked with the settings recorded with the job."""
        settings = json.loads(self.get_job(job_id).generation)
        options = GenerationOptions(max_tokens=settings.get("max_tokens"), temperature=settings.get("temperature"))
        return [
            (custom_id, self.provider.request_body(answer_messages(self.prompts[prompt_id]), 1, options))
            for custom_id, prompt_id in job_prompts(self.con, job_id).items()
        ]

    def import_results(self, job: GenerateBatchJob, batch, records: list[dict]) -> AnswerJobResult:
        """Store a finished job's answers as `responses` rows and close it; failures are only counted."""
        prompts = job_prompts(self.con, job.job_id)
        result = AnswerJobResult(job.job_id, TERMINAL[batch.status])
        rows = []
        for record in records:
            prompt_id = prompts.get(record.get("custom_id"))
            if prompt_id is None:
                continue
            result.requests += 1
            completion = record_completion(record)
            if isinstance(completion, str):
                reason = completion
            else:
                result.tokens_in += completion.tokens_in or 0
                result.tokens_out += completion.tokens_out or 0
                text = completion.texts[0] if completion.texts else ""
                reason = "" if text.strip() else EMPTY_ANSWER
            if reason:
                result.failed += 1
                result.failures[reason] = result.failures.get(reason, 0) + 1
                continue
            rows.append(
                ResponseRow(
                    dataset=job.dataset,
                    prompt_id=prompt_id,
                    model_id=job.model_id,
                    text=text,
                    generator=job.generator,
                    generation=job.generation,
                    tokens_in=completion.tokens_in,
                    tokens_out=completion.tokens_out,
                    run_id=self.run_id or job.run_id,
                )
            )
        # Prompts without a result (an expired or cancelled batch) get no row: the next plan asks again.
        result.ok = finish_job(
            self.con, job.job_id, rows, status=result.status, message=f"provider status {batch.status}"
        )
        self.on_status(f"batch {job.batch_id}: stored {result.ok} answers, {result.failed} failed")
        return result
