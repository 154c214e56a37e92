"""Flow `judge`: plan the missing judge calls, make them (live or through the Batch API) and store each
judgment as it returns; a re-run continues where the last one stopped and pays for nothing twice.

    read inputs -> plan (missing cells only) -> judge_chunk per chunk of prompts | batch jobs
                -> plan again (what is left) -> runs row

`runner="dask"` makes the live calls as `judge_call` tasks on Dask workers (prefect-dask) while this
process keeps dispatching, rate-limiting and writing them (tasks/judge/dask_calls.py).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Callable

from prefect import flow

import warehouse
from flows.judge_plan import JudgeOutcome, prepare_judge
from flows.run_context import current_flow_run_id, dataset_judge_name
from tasks.judge.batch import BatchJudge, BatchSettings
from tasks.judge.budget import Budget
from tasks.judge.dask_calls import DEFAULT_DASK_WORKERS, RUNNERS, dask_provider
from tasks.judge.inputs import JudgeInputs
from tasks.judge.plan import JudgePlan
from tasks.judge.progress import JudgeProgress
from tasks.judge.providers import GenerationOptions, make_provider
from tasks.judge.retries import RetryPolicy
from tasks.judge.runner import JudgeRunner, RunLimits, RunStats
from tasks.judge.steps import (
    collect_batch_job,
    judge_chunk,
    plan_judgments,
    read_judge_inputs,
    record_judge_run,
    submit_batch_job,
)
from tasks.judge.templates import DEFAULT_TEMPLATE, Template
from warehouse.judge_batches import open_jobs
from warehouse.judgments import JudgmentWriter
from warehouse.runs import RunRecord

CHUNKS_IN_FLIGHT = 2  # the next chunk starts while the last requests of the previous one finish
BATCH_ROUNDS = 3      # batch submissions per run: the first, then re-asks of unparseable verdicts


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def new_run_id() -> str:
    return f"judge-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


@flow(name="judge", flow_run_name=dataset_judge_name("judge"))
def judge_flow(
    judge: str,
    dataset: str = "vicuna80",
    models: list[str] | None = None,
    prompts: int | None = None,
    samples_per_order: int = 4,
    template: str = DEFAULT_TEMPLATE,
    plan_only: bool = False,
    max_cost: float | None = None,
    max_calls: int | None = None,
    concurrency: int = 16,
    rpm: float | None = None,
    tpm: float | None = None,
    batch: bool = False,
    multi_sample: bool | None = None,
    max_unparsed: int | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    retries: int = 8,
    retry_wait: float = 1.0,
    timeout: float = 120.0,
    prices: str | None = None,
    db: str | None = None,
    prompts_per_chunk: int = 10,
    batch_poll_interval: float = 30.0,
    progress: bool = True,
    runner: str = "asyncio",
    dask_address: str | None = None,
    dask_workers: int = DEFAULT_DASK_WORKERS,
) -> JudgeOutcome:
    """Judge every missing (prompt, model pair, order, sample) of `dataset` with `judge` (a spec:
    openai:MODEL, gemini:MODEL, openai-compatible:MODEL@BASE_URL) and `template`; `samples_per_order`
    samples with each model as assistant A (paper Section 3.1: 4 + 4). `plan_only` returns the plan
    and spends nothing. `retries` counts attempts per request (the first included); `retry_wait` is
    the first backoff in seconds when the server gives no Retry-After. `runner`: "asyncio" (calls from
    this process) or "dask" (calls on a Dask LocalCluster of `dask_workers` processes, or on the
    scheduler at `dask_address`; rpm / tpm stay one limit for the whole run)."""
    if runner not in RUNNERS:
        raise ValueError(f"--runner {runner!r}: expected one of {', '.join(RUNNERS)}")
    if runner == "dask" and batch:
        raise ValueError("--runner dask makes live calls; it cannot be combined with --batch")
    if judge.startswith("recorded:") and (batch or runner == "dask"):
        raise ValueError(f"{judge} replays stored judgments from this process; it cannot be combined with "
                         "--batch or --runner dask")
    setup = prepare_judge(judge, template, prices, max_cost=max_cost, max_calls=max_calls, batch=batch,
                          multi_sample=multi_sample)
    spec, chosen_template, price, multi = setup.spec, setup.template, setup.price, setup.multi_sample
    retry = RetryPolicy(attempts=retries, initial_wait_s=retry_wait, max_wait_s=max(retry_wait, 60.0),
                        timeout_s=timeout)
    limits = RunLimits(concurrency=concurrency, rpm=rpm, tpm=tpm)
    options = GenerationOptions(max_tokens=max_tokens, temperature=temperature)
    plan_args = dict(samples_per_order=samples_per_order, max_unparsed=max_unparsed, multi_sample=multi,
                     batch=batch, price=price)

    con = warehouse.connect(db)
    try:
        inputs = read_judge_inputs(con, dataset, models, prompts)
        plan = plan_judgments(con, spec.judge_id, chosen_template, inputs, **plan_args)
        open_batch_jobs = batch and bool(open_jobs(con, spec.judge_id, chosen_template.hash, dataset))
        if plan_only or (plan.samples == 0 and not open_batch_jobs):
            message = "plan only, nothing sent" if plan_only else "nothing to do: every planned cell is judged"
            return JudgeOutcome(spec.judge_id, None, plan.summary(), plan.summary(), message=message)

        run_id = new_run_id()
        started = datetime.now(timezone.utc)
        parameters = {
            "judge": judge, "dataset": dataset, "models": list(inputs.models), "prompts": len(inputs.prompts),
            "samples_per_order": samples_per_order, "template": chosen_template.name,
            "template_hash": chosen_template.hash, "max_cost": max_cost, "max_calls": max_calls,
            "concurrency": concurrency, "rpm": rpm, "tpm": tpm, "batch": batch, "multi_sample": multi,
            "max_unparsed": max_unparsed, "max_tokens": max_tokens, "temperature": temperature,
            "retries": retries, "timeout": timeout, "runner": runner,
        }
        if runner == "dask":
            parameters.update(dask_address=dask_address, dask_workers=None if dask_address else dask_workers)
        record_judge_run(con, RunRecord(
            flow_run_id=current_flow_run_id(), run_id=run_id, kind="judge", started_at=started, status="running",
            parameters=parameters, message="running"))
        budget = Budget(max_cost_usd=max_cost, max_samples=max_calls)
        status, failure = "ok", None
        jobs: tuple[str, ...] = ()
        stats = RunStats()
        try:
            if batch:
                # Unparseable verdicts come back with a job; the next round asks for them again.
                remaining = plan
                for _ in range(BATCH_ROUNDS):
                    new_jobs, round_stats = asyncio.run(_judge_in_batches(
                        con, make_provider(spec, timeout_s=timeout), chosen_template, inputs, remaining, run_id,
                        options, budget, BatchSettings(poll_interval_s=batch_poll_interval), multi))
                    jobs += new_jobs
                    _add_stats(stats, round_stats)
                    remaining = plan_judgments(con, spec.judge_id, chosen_template, inputs, **plan_args)
                    if not remaining.samples or budget.exhausted_by or not round_stats.samples:
                        break
            elif runner == "dask":
                with dask_provider(spec, timeout_s=timeout, address=dask_address, workers=dask_workers,
                                   concurrency=concurrency) as provider:
                    stats = asyncio.run(_judge_live(
                        con, provider, chosen_template, inputs, plan, run_id, retry, limits, options, price,
                        budget, multi, prompts_per_chunk, progress))
            else:
                stats = asyncio.run(_judge_live(
                    con, make_provider(spec, timeout_s=timeout), chosen_template, inputs, plan, run_id, retry,
                    limits, options, price, budget, multi, prompts_per_chunk, progress))
        except BaseException as exc:
            status, failure = "failed", exc
            raise
        finally:
            left = plan_judgments(con, spec.judge_id, chosen_template, inputs, **plan_args)
            stopped_by = budget.exhausted_by if left.samples else None
            message = _message(plan, left, stats, budget, stopped_by, failure)
            record_judge_run(con, RunRecord(
                flow_run_id=current_flow_run_id(),
                run_id=run_id, kind="judge", started_at=started, finished_at=datetime.now(timezone.utc),
                status=status, parameters=parameters, timings={"judge": stats.seconds},
                data_fingerprint=chosen_template.hash, message=message))
        return JudgeOutcome(spec.judge_id, run_id, plan.summary(), left.summary(), _stats_dict(stats, budget),
                            budget.spent_usd, stopped_by, jobs, message)
    finally:
        con.close()


async def _judge_live(con, provider, template: Template, inputs: JudgeInputs, plan: JudgePlan, run_id: str,
                      retry, limits, options, price, budget: Budget, multi: bool, prompts_per_chunk: int,
                      progress: bool) -> RunStats:
    """Run the plan chunk by chunk (CHUNKS_IN_FLIGHT at a time) through one shared runner."""
    writer = JudgmentWriter(con)
    gate = asyncio.Semaphore(CHUNKS_IN_FLIGHT)
    try:
        with JudgeProgress(plan.samples, label=plan.judge, enabled=progress) as bar:
            async with JudgeRunner(provider=provider, template=template, dataset=inputs.dataset,
                                   prompts=inputs.prompts, responses=inputs.responses, writer=writer,
                                   run_id=run_id, retry=retry, limits=limits, options=options, price=price,
                                   budget=budget, progress=bar, multi_sample=multi) as runner:

                async def run_chunk(requests) -> None:
                    async with gate:
                        if runner.halted:
                            runner.stats.skipped_samples += sum(len(r.sample_indices) for r in requests)
                            return
                        await judge_chunk(runner, requests)

                outcomes = await asyncio.gather(*(run_chunk(c) for c in plan.chunks(prompts_per_chunk)),
                                                return_exceptions=True)
            failures = [o for o in outcomes if isinstance(o, BaseException)]
            if failures:
                raise failures[0]
            return runner.stats
    finally:
        await provider.aclose()


async def _judge_in_batches(con, provider, template: Template, inputs: JudgeInputs, plan: JudgePlan, run_id: str,
                            options, budget: Budget, settings: BatchSettings, multi: bool,
                            say: Callable[[str], None] = _to_stderr) -> tuple[tuple[str, ...], RunStats]:
    """Resume open batch jobs, submit the plan (within the caps) as new ones, wait and import all."""
    stats = RunStats()
    try:
        judge = BatchJudge(provider=provider, template=template, dataset=inputs.dataset, prompts=inputs.prompts,
                           responses=inputs.responses, con=con, run_id=run_id, options=options, settings=settings,
                           multi_sample=multi, on_status=say)
        resumed = [job.job_id for job in judge.open_jobs()]
        if resumed:
            say(f"resuming {len(resumed)} open batch job(s): {', '.join(resumed)}")
        affordable = []
        for request in plan.requests:
            samples = len(request.sample_indices)
            tokens_in = request.tokens_in * (1 if multi else samples)
            cost = plan.price.cost(tokens_in, samples * plan.expected_output_tokens, batch=True) if plan.price else 0.0
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
    finally:
        await provider.aclose()


def _add_stats(total: RunStats, part: RunStats) -> None:
    for name in ("requests", "retries", "ok", "unparsed", "errors", "reasked", "tokens_in", "tokens_out",
                 "skipped_samples"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    total.seconds += part.seconds


def _stats_dict(stats: RunStats, budget: Budget) -> dict:
    out = asdict(stats)
    out["samples"] = stats.samples
    out["spent_usd"] = round(budget.spent_usd, 6)
    return out


def _message(plan: JudgePlan, left: JudgePlan, stats: RunStats, budget: Budget, stopped_by: str | None,
             failure: BaseException | None) -> str:
    done = (f"{stats.ok} ok, {stats.unparsed} unparsed, {stats.errors} failed samples from "
            f"{stats.requests} requests ({stats.retries} retries), ${budget.spent_usd:.4f}")
    if failure is not None:
        head = f"failed: {type(failure).__name__}: {failure}"
    elif stopped_by is not None:
        head = f"stopped at the --{stopped_by} cap"
    else:
        head = "done"
    cost = "" if left.cost_usd is None else f", about ${left.cost_usd:.4f}"
    tail = (f"left: {left.samples} calls in {left.request_count} requests{cost}; run the same command again "
            f"to continue" if left.samples else "left: nothing")
    if left.given_up:
        tail += f"; {len(left.given_up)} cells given up after repeated unparseable verdicts"
    return f"{head}: {done}; {tail}"
