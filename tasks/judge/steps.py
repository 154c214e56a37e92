"""Prefect tasks of the judge flow: read the inputs, plan, judge one chunk of prompts, run batch jobs,
record the run. Each is one step; the work is done by the modules they call."""

from __future__ import annotations

from typing import Sequence

import duckdb
from prefect import task
from prefect.cache_policies import NONE

from tasks.judge.batch import BatchJudge, JobResult
from tasks.judge.inputs import JudgeInputs, read_inputs
from tasks.judge.plan import JudgePlan, PlannedRequest, plan_missing
from tasks.judge.pricing import Price
from tasks.judge.runner import JudgeRunner
from tasks.judge.templates import Template
from warehouse.runs import RunRecord, upsert_run


@task(name="read_judge_inputs", cache_policy=NONE)
def read_judge_inputs(
    con: duckdb.DuckDBPyConnection, dataset: str, models: Sequence[str] | None, prompt_count: int | None
) -> JudgeInputs:
    """The first `prompt_count` prompts of `dataset` (natural order) and the chosen models' answers."""
    return read_inputs(con, dataset, models, prompt_count)


@task(name="plan_judgments", cache_policy=NONE)
def plan_judgments(
    con: duckdb.DuckDBPyConnection,
    judge: str,
    template: Template,
    inputs: JudgeInputs,
    *,
    samples_per_order: int,
    max_unparsed: int | None,
    multi_sample: bool,
    batch: bool,
    price: Price | None,
) -> JudgePlan:
    """The missing judge calls for `judge` + `template` on the inputs (tasks/judge/plan.py)."""
    return plan_missing(con, judge, template, inputs, samples_per_order=samples_per_order,
                        max_unparsed=max_unparsed, multi_sample=multi_sample, batch=batch, price=price)


@task(name="judge_chunk", cache_policy=NONE)
async def judge_chunk(runner: JudgeRunner, requests: Sequence[PlannedRequest]) -> int:
    """Judge the requests of one chunk of prompts; returns the samples they asked for."""
    await runner.judge(requests)
    return sum(len(r.sample_indices) for r in requests)


@task(name="submit_batch_job", cache_policy=NONE)
async def submit_batch_job(batch_judge: BatchJudge, job_id: str) -> None:
    """Upload a job's JSONL and create its batch (or find the one a killed run created)."""
    await batch_judge.submit(job_id)


@task(name="collect_batch_job", cache_policy=NONE)
async def collect_batch_job(batch_judge: BatchJudge, job_id: str) -> JobResult:
    """Poll a batch until it finishes, then import its results into judgments."""
    return await batch_judge.wait(job_id)


@task(name="record_judge_run", cache_policy=NONE)
def record_judge_run(con: duckdb.DuckDBPyConnection, run: RunRecord) -> None:
    upsert_run(con, run)
