"""The judge flow's steps: read the inputs, plan the missing calls, make them live (chunk by chunk, in
this process or on Dask workers) or through the Batch API, and record the run. The Prefect tasks are
single steps; `JudgeSession` holds what they share (one warehouse connection, the inputs, the write
buffer). The work itself is done by the judge library (eqarena/judge/).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Callable, Sequence

import duckdb

from eqarena.judge.batch import BatchJudge, BatchSettings, JobResult
from eqarena.judge.dask_calls import dask_provider
from eqarena.judge.inputs import JudgeInputs, read_inputs
from eqarena.judge.judges import make_judge_provider
from eqarena.judge.plan import JudgePlan, PlannedRequest, plan_missing
from eqarena.judge.runner import JudgeRunner, RunStats
from eqarena.judge.setup import JudgeSetup
from eqarena.llm.budget import Budget
from eqarena.llm.progress import JudgeProgress
from eqarena.llm.providers import JudgeUnreachableError, Provider
from eqarena.options import JudgeOptions, Runner
from eqarena.orchestration.steps import step
from eqarena.tasks.chunks import run_chunks
from eqarena.tasks.runs import outcome_head
from eqarena.tasks.session import WarehouseSession
from eqarena.warehouse.catalog import choose_dataset
from eqarena.warehouse.judge_batches import open_jobs
from eqarena.warehouse.judgments import JudgmentWriter
from eqarena.warehouse.runs import RunRecord, upsert_run

BATCH_ROUNDS = 3  # batch submissions per run: the first, then re-asks of unparseable verdicts


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@step("read_judge_inputs")
def read_judge_inputs(
    con: duckdb.DuckDBPyConnection, dataset: str | None, models: Sequence[str] | None, prompt_count: int | None
) -> JudgeInputs:
    """The first `prompt_count` prompts of `dataset` (None: the warehouse's only dataset; natural order)
    and the chosen models' answers."""
    return read_inputs(con, choose_dataset(con, dataset), models, prompt_count)


@step("plan_judgments")
def plan_judgments(
    con: duckdb.DuckDBPyConnection, options: JudgeOptions, setup: JudgeSetup, inputs: JudgeInputs
) -> JudgePlan:
    """The missing judge calls of the run on the inputs (eqarena/judge/plan.py)."""
    return plan_missing(
        con,
        setup.spec.judge_id,
        setup.template,
        inputs,
        samples_per_order=options.samples_per_order,
        max_unparsed=options.max_unparsed,
        multi_sample=setup.multi_sample,
        batch=options.runner.batch,
        price=setup.price,
    )


@step("judge_chunk")
async def judge_chunk(runner: JudgeRunner, requests: Sequence[PlannedRequest]) -> int:
    """Judge the requests of one chunk of prompts; returns the samples they asked for."""
    await runner.judge(requests)
    return sum(len(r.sample_indices) for r in requests)


@step("submit_batch_job")
async def submit_batch_job(batch_judge: BatchJudge, job_id: str) -> None:
    """Upload a job's JSONL and create its batch (or find the one a killed run created)."""
    await batch_judge.submit(job_id)


@step("collect_batch_job")
async def collect_batch_job(batch_judge: BatchJudge, job_id: str) -> JobResult:
    """Poll a batch until it finishes, then import its results into judgments."""
    return await batch_judge.wait(job_id)


@step("record_judge_run")
def record_judge_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    upsert_run(con, run)


class JudgeSession(WarehouseSession):
    """One judge run's hold on the warehouse (eqarena/tasks/session.py): its connection, the inputs and
    the plan of what is still missing. Use as a context manager."""

    def __init__(self, db: str | None, options: JudgeOptions, setup: JudgeSetup):
        self.options, self.setup = options, setup
        self.stats = RunStats()  # the live run's so far, also when it fails or is interrupted
        super().__init__(db)

    def load(self) -> None:
        self.inputs = read_judge_inputs(self.con, self.options.dataset, self.options.models, self.options.prompts)

    def plan(self) -> JudgePlan:
        return plan_judgments(self.con, self.options, self.setup, self.inputs)

    def open_batch_jobs(self) -> bool:
        return self.options.runner.batch and bool(
            open_jobs(self.con, self.setup.spec.judge_id, self.setup.template.hash, self.inputs.dataset)
        )

    def write_run(self, run: RunRecord) -> None:
        record_judge_run(self.con, run)

    def judge(self, plan: JudgePlan, run_id: str, budget: Budget, progress: bool) -> tuple[RunStats, tuple[str, ...]]:
        """Make the plan's calls as the options say (live here, live on Dask, or in batches); returns
        the stats and the batch jobs."""
        options, spec = self.options, self.setup.spec
        if options.runner.batch:
            return self._judge_in_batches(plan, run_id, budget)
        if options.runner.runner is Runner.DASK:
            with dask_provider(
                spec,
                timeout_s=options.retry.timeout_s,
                address=options.runner.dask_address,
                workers=options.runner.dask_workers,
                concurrency=options.limits.concurrency,
            ) as provider:
                return asyncio.run(self._judge_live(provider, plan, run_id, budget, progress)), ()
        provider = make_judge_provider(spec, timeout_s=options.retry.timeout_s)
        return asyncio.run(self._judge_live(provider, plan, run_id, budget, progress)), ()

    async def _judge_live(
        self, provider: Provider, plan: JudgePlan, run_id: str, budget: Budget, progress: bool
    ) -> RunStats:
        """Run the plan chunk by chunk (eqarena/tasks/chunks.py) through one shared runner."""
        options, inputs = self.options, self.inputs
        try:
            with JudgeProgress(plan.samples, label=plan.judge, enabled=progress) as bar:
                async with JudgeRunner(
                    provider=provider,
                    template=self.setup.template,
                    dataset=inputs.dataset,
                    prompts=inputs.prompts,
                    responses=inputs.responses,
                    writer=JudgmentWriter(self.con),
                    run_id=run_id,
                    retry=options.retry,
                    limits=options.limits,
                    options=options.generation,
                    price=self.setup.price,
                    budget=budget,
                    progress=bar,
                    multi_sample=self.setup.multi_sample,
                ) as runner:
                    self.stats = runner.stats

                    def skip(requests) -> None:
                        runner.stats.skipped_samples += sum(len(r.sample_indices) for r in requests)

                    await run_chunks(
                        plan.chunks(options.runner.prompts_per_chunk),
                        lambda requests: judge_chunk(runner, requests),
                        lambda: runner.halted,
                        skip,
                    )
                return runner.stats
        finally:
            await provider.aclose()

    def _judge_in_batches(self, plan: JudgePlan, run_id: str, budget: Budget) -> tuple[RunStats, tuple[str, ...]]:
        """Batch rounds: unparseable verdicts come back with a job; the next round asks for them again."""
        stats, jobs, remaining = RunStats(), (), plan
        for _ in range(BATCH_ROUNDS):
            provider = make_judge_provider(self.setup.spec, timeout_s=self.options.retry.timeout_s)
            new_jobs, round_stats = asyncio.run(self._batch_round(provider, remaining, run_id, budget))
            jobs += new_jobs
            add_stats(stats, round_stats)
            remaining = self.plan()
            if not remaining.samples or budget.exhausted_by or not round_stats.samples:
                break
        return stats, jobs

    async def _batch_round(
        self, provider, plan: JudgePlan, run_id: str, budget: Budget, say: Callable[[str], None] = _to_stderr
    ) -> tuple[tuple[str, ...], RunStats]:
        """Resume open batch jobs, submit the plan (within the caps) as new ones, wait and import all."""
        inputs, multi = self.inputs, self.setup.multi_sample
        stats = RunStats()
        try:
            judge = BatchJudge(
                provider=provider,
                template=self.setup.template,
                dataset=inputs.dataset,
                prompts=inputs.prompts,
                responses=inputs.responses,
                con=self.con,
                run_id=run_id,
                options=self.options.generation,
                settings=BatchSettings(poll_interval_s=self.options.runner.batch_poll_s),
                multi_sample=multi,
                on_status=say,
            )
            resumed = [job.job_id for job in judge.open_jobs()]
            if resumed:
                say(f"resuming {len(resumed)} open batch job(s): {', '.join(resumed)}")
            affordable = []
            for request in plan.requests:
                samples = len(request.sample_indices)
                tokens_in = request.tokens_in * (1 if multi else samples)
                cost = (
                    plan.price.cost(tokens_in, samples * plan.expected_output_tokens, batch=True) if plan.price else 0.0
                )
                if not budget.reserve(cost, samples):
                    break
                affordable.append(request)
            stats.skipped_samples = plan.samples - sum(len(r.sample_indices) for r in affordable)
            new_jobs = judge.prepare(affordable) if affordable else []
            jobs = tuple(resumed + new_jobs)
            for job_id in jobs:
                await submit_batch_job(judge, job_id)
            results = await asyncio.gather(*(collect_batch_job(judge, job_id) for job_id in jobs))
            for result in results:
                stats.ok += result.ok
                stats.unparsed += result.unparsed
                stats.errors += result.errors
                stats.tokens_in += result.tokens_in
                stats.tokens_out += result.tokens_out
            spent = plan.price.cost(stats.tokens_in, stats.tokens_out, batch=True) if plan.price else 0.0
            budget.settle(budget.reserved_usd, budget.reserved_samples, spent, stats.samples)
            stats.requests = sum(r.requests for r in results)
            return jobs, stats
        except Exception as exc:
            if provider.is_refused(exc):  # one line instead of the SDK's traceback
                where = provider.base_url
                raise JudgeUnreachableError(f"cannot reach the judge at {where}: connection refused") from exc
            raise
        finally:
            await provider.aclose()


def add_stats(total: RunStats, part: RunStats) -> None:
    """Add `part`'s counts and seconds to `total`."""
    for name in (
        "requests",
        "retries",
        "ok",
        "unparsed",
        "errors",
        "reasked",
        "tokens_in",
        "tokens_out",
        "skipped_samples",
    ):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.seconds += part.seconds


def judge_message(
    plan: JudgePlan,
    left: JudgePlan,
    stats: RunStats,
    budget: Budget,
    stopped_by: str | None,
    failure: BaseException | None,
) -> str:
    """The one line a judge run leaves in `runs.message`: what it did, what stopped it, what is left."""
    done = (
        f"{stats.ok} ok, {stats.unparsed} unparsed, {stats.errors} failed samples from "
        f"{stats.requests} requests ({stats.retries} retries), ${budget.spent_usd:.4f}"
    )
    head = outcome_head(failure, stopped_by)
    cost = "" if left.cost_usd is None else f", about ${left.cost_usd:.4f}"
    tail = (
        f"left: {left.samples} calls in {left.request_count} requests{cost}; run the same command again to continue"
        if left.samples
        else "left: nothing"
    )
    if left.given_up:
        tail += f"; {len(left.given_up)} cells given up after repeated unparseable verdicts"
    return f"{head}: {done}; {tail}"
