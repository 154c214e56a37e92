"""The generate flow's steps: plan the unanswered prompts, register the model, ask for the answers chunk
by chunk (each stored as it arrives) or through Batch API jobs (open ones collected first), and record
the run. The Prefect tasks are single steps;
`GenerateSession` holds what they share (one warehouse connection, the write buffer). The work itself
is done by the generation library (eqarena/generation/).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Sequence

import duckdb

from eqarena.datasets.records import model_family
from eqarena.generation.batch import AnswerJobResult, BatchGenerator
from eqarena.generation.plan import AnswerPlan, AnswerRequest, plan_answers
from eqarena.generation.runner import AnswerRunner, AnswerStats
from eqarena.generation.setup import MODEL_OPTION, GenerateSetup
from eqarena.judge.inputs import read_prompt_texts
from eqarena.llm.batch_api import BatchSettings
from eqarena.llm.budget import Budget
from eqarena.llm.progress import JudgeProgress
from eqarena.llm.providers import JudgeUnreachableError, OpenAIProvider, Provider, make_provider
from eqarena.options import GenerateOptions
from eqarena.orchestration.steps import step
from eqarena.tasks.chunks import run_chunks
from eqarena.tasks.runs import outcome_head
from eqarena.tasks.session import WarehouseSession
from eqarena.warehouse.catalog import MODELS, choose_dataset, transaction, write_rows
from eqarena.warehouse.generate_batches import open_jobs
from eqarena.warehouse.responses import ResponseWriter
from eqarena.warehouse.runs import RunRecord, upsert_run

PROMPTS_PER_CHUNK = 50


@step("plan_answers")
def plan_generation(
    con: duckdb.DuckDBPyConnection, options: GenerateOptions, setup: GenerateSetup, dataset: str
) -> AnswerPlan:
    """The chosen prompts of `dataset` the model has not answered yet (eqarena/generation/plan.py)."""
    return plan_answers(
        con,
        dataset=dataset,
        model_id=setup.model_id,
        generator=setup.generator,
        prompt_count=options.prompts,
        max_tokens=options.generation.max_tokens or 0,
        price=setup.price,
        batch=options.batch,
    )


@step("register_model")
def register_model(con: duckdb.DuckDBPyConnection, model_id: str) -> None:
    """The model's `models` row (its family from its name), unless it is there already."""
    with transaction(con):
        write_rows(con, MODELS, [{"model_id": model_id, "family": model_family(model_id)}])


@step("generate_chunk")
async def generate_chunk(runner: AnswerRunner, requests: Sequence[AnswerRequest]) -> int:
    """Ask for the answers of one chunk of prompts; returns how many prompts it asked."""
    await runner.generate(requests)
    return len(requests)


@step("submit_answer_batch")
async def submit_answer_batch(batches: BatchGenerator, job_id: str) -> None:
    """Upload a job's JSONL and create its batch (or find the one a killed run created)."""
    await batches.submit(job_id)


@step("collect_answer_batch")
async def collect_answer_batch(batches: BatchGenerator, job_id: str) -> AnswerJobResult:
    """Poll a batch until it finishes, then store its answers."""
    return await batches.wait(job_id)


@step("record_generate_run")
def record_generate_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    upsert_run(con, run)


class GenerateSession(WarehouseSession):
    """One generate run's hold on the warehouse (eqarena/tasks/session.py): its connection, the dataset
    and the plan of what is still missing. Use as a context manager."""

    def __init__(self, db: str | None, options: GenerateOptions, setup: GenerateSetup):
        self.options, self.setup = options, setup
        self.stats = AnswerStats()  # the run's so far, also when it fails
        super().__init__(db)

    def load(self) -> None:
        self.dataset = choose_dataset(self.con, self.options.dataset)

    def plan(self) -> AnswerPlan:
        return plan_generation(self.con, self.options, self.setup, self.dataset)

    def open_batch_jobs(self) -> list[str]:
        """The open Batch API jobs answering for the model on the dataset."""
        return [job.job_id for job in open_jobs(self.con, self.dataset, self.setup.model_id)]

    def register_model(self) -> None:
        register_model(self.con, self.setup.model_id)

    def write_run(self, run: RunRecord) -> None:
        record_generate_run(self.con, run)

    def provider(self) -> Provider:
        """The model's provider (its SDK client); a missing key fails here, before anything is written."""
        return make_provider(self.setup.spec, timeout_s=self.options.retry.timeout_s, option=MODEL_OPTION)

    def generate(
        self, provider: Provider, plan: AnswerPlan, run_id: str, budget: Budget, progress: bool
    ) -> AnswerStats:
        """Collect the open batch jobs (when the provider can), then ask for the plan's answers live or, with
        --batch, in new jobs; closes the provider. Returns the stats (also kept in `self.stats`)."""
        return asyncio.run(self._generate(provider, plan, run_id, budget, progress))

    async def _generate(
        self, provider: Provider, plan: AnswerPlan, run_id: str, budget: Budget, progress: bool
    ) -> AnswerStats:
        try:
            if self.options.batch:
                await self._batches(provider, plan.requests, run_id, budget)
                return self.stats
            if self.open_batch_jobs() and isinstance(provider, OpenAIProvider):
                await self._batches(provider, (), run_id, budget)
            collected = self.stats
            stats = await self._live(provider, plan, run_id, budget, progress)
            self.stats = add_answer_stats(stats, collected)
            return self.stats
        finally:
            await provider.aclose()

    async def _live(
        self, provider: Provider, plan: AnswerPlan, run_id: str, budget: Budget, progress: bool
    ) -> AnswerStats:
        """The plan's answers asked one request each, chunk by chunk, through one runner."""
        options = self.options
        with JudgeProgress(len(plan.requests), label=self.setup.model_id, enabled=progress) as bar:
            async with AnswerRunner(
                provider=provider,
                model_id=self.setup.model_id,
                dataset=plan.dataset,
                prompts=plan.prompts,
                generation=self.setup.generation,
                writer=ResponseWriter(self.con),
                run_id=run_id,
                retry=options.retry,
                limits=options.limits,
                options=options.generation,
                price=self.setup.price,
                budget=budget,
                progress=bar,
            ) as runner:
                self.stats = runner.stats

                def skip(requests) -> None:
                    runner.stats.skipped += len(requests)

                await run_chunks(
                    plan.chunks(PROMPTS_PER_CHUNK),
                    lambda requests: generate_chunk(runner, requests),
                    lambda: runner.halted,
                    skip,
                )
            return runner.stats

    async def _batches(
        self, provider: Provider, requests: Sequence[AnswerRequest], run_id: str, budget: Budget
    ) -> None:
        """Resume the open jobs, submit `requests` (within the caps, at the batch price) as new ones, wait
        for all and store their answers; counts go to `self.stats`."""
        price, max_tokens = self.setup.price, self.options.generation.max_tokens or 0
        batches = BatchGenerator(
            provider=provider,
            model_id=self.setup.model_id,
            dataset=self.dataset,
            prompts=read_prompt_texts(self.con, self.dataset),
            generation=self.setup.generation,
            con=self.con,
            run_id=run_id,
            settings=BatchSettings(poll_interval_s=self.options.batch_poll_s),
            on_status=_say,
        )
        try:
            resumed = self.open_batch_jobs()
            if resumed:
                _say(f"resuming {len(resumed)} open batch job(s): {', '.join(resumed)}")
            affordable = []
            for request in requests:
                if not budget.reserve(price.cost(request.tokens_in, max_tokens, batch=True) if price else 0.0, 1):
                    break
                affordable.append(request)
            self.stats.skipped += len(requests) - len(affordable)
            jobs = resumed + (batches.prepare(affordable) if affordable else [])
            for job_id in jobs:
                await submit_answer_batch(batches, job_id)
            for result in await asyncio.gather(*(collect_answer_batch(batches, job_id) for job_id in jobs)):
                add_job_result(self.stats, result)
        except Exception as exc:
            if provider.is_refused(exc):  # one line instead of the SDK's traceback
                raise JudgeUnreachableError(
                    f"cannot reach the model at {provider.base_url}: connection refused"
                ) from exc
            raise
        spent = price.cost(self.stats.tokens_in, self.stats.tokens_out, batch=True) if price else 0.0
        budget.settle(budget.reserved_usd, budget.reserved_samples, spent, self.stats.ok + self.stats.failed)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_job_result(stats: AnswerStats, result: AnswerJobResult) -> None:
    """Count a batch job's lines, answers, failures and usage into `stats`."""
    stats.requests += result.requests
    stats.ok += result.ok
    stats.failed += result.failed
    stats.tokens_in += result.tokens_in
    stats.tokens_out += result.tokens_out
    for reason, n in result.failures.items():
        stats.failures[reason] = stats.failures.get(reason, 0) + n


def add_answer_stats(total: AnswerStats, part: AnswerStats) -> AnswerStats:
    """`total` with `part`'s counts added (the batch jobs collected before a live run)."""
    add_job_result(
        total,
        AnswerJobResult("", "", part.requests, part.ok, part.failed, part.failures, part.tokens_in, part.tokens_out),
    )
    total.skipped += part.skipped
    return total


def generate_message(
    left: AnswerPlan, stats: AnswerStats, budget: Budget, stopped_by: str | None, failure: BaseException | None
) -> str:
    """The one line a generate run leaves in `runs.message`: what it did, what stopped it, what is left."""
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(stats.failures.items()))
    done = (
        f"{stats.ok} answers stored, {stats.failed} failed{f' ({reasons})' if reasons else ''} from "
        f"{stats.requests} requests ({stats.retries} retries), {stats.tokens_in:,} + {stats.tokens_out:,} "
        f"tokens, ${budget.spent_usd:.4f}"
    )
    head = outcome_head(failure, stopped_by)
    calls = len(left.requests)
    tail = f"left: {calls} prompts; run the same command again to continue" if calls else "left: nothing"
    if left.pending:
        tail += f"; {left.pending} prompts pending in open batch jobs (collected by the next run)"
    return f"{head}: {done}; {tail}"
