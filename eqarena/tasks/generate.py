"""The generate flow's steps: plan the unanswered prompts, register the model, ask for the answers chunk
by chunk (each stored as it arrives) and record the run. The Prefect tasks are single steps;
`GenerateSession` holds what they share (one warehouse connection, the write buffer). The work itself
is done by the generation library (eqarena/generation/).
"""

from __future__ import annotations

import asyncio
from typing import Sequence

import duckdb
from prefect import task
from prefect.cache_policies import NONE

from eqarena.datasets.records import model_family
from eqarena.generation.plan import AnswerPlan, AnswerRequest, plan_answers
from eqarena.generation.runner import AnswerRunner, AnswerStats
from eqarena.generation.setup import MODEL_OPTION, GenerateSetup
from eqarena.judge.budget import Budget
from eqarena.judge.progress import JudgeProgress
from eqarena.judge.providers import Provider, make_provider
from eqarena.options import GenerateOptions
from eqarena.tasks.chunks import run_chunks
from eqarena.tasks.runs import outcome_head
from eqarena.tasks.session import WarehouseSession
from eqarena.warehouse.catalog import MODELS, choose_dataset, transaction, write_rows
from eqarena.warehouse.responses import ResponseWriter
from eqarena.warehouse.runs import RunRecord, upsert_run

PROMPTS_PER_CHUNK = 50


@task(name="plan_answers", cache_policy=NONE)
def plan_generation(con: duckdb.DuckDBPyConnection, options: GenerateOptions, setup: GenerateSetup,
                    dataset: str) -> AnswerPlan:
    """The chosen prompts of `dataset` the model has not answered yet (eqarena/generation/plan.py)."""
    return plan_answers(con, dataset=dataset, model_id=setup.model_id, generator=setup.generator,
                        prompt_count=options.prompts, max_tokens=options.generation.max_tokens or 0,
                        price=setup.price)


@task(name="register_model", cache_policy=NONE)
def register_model(con: duckdb.DuckDBPyConnection, model_id: str) -> None:
    """The model's `models` row (its family from its name), unless it is there already."""
    with transaction(con):
        write_rows(con, MODELS, [{"model_id": model_id, "family": model_family(model_id)}])


@task(name="generate_chunk", cache_policy=NONE)
async def generate_chunk(runner: AnswerRunner, requests: Sequence[AnswerRequest]) -> int:
    """Ask for the answers of one chunk of prompts; returns how many prompts it asked."""
    await runner.generate(requests)
    return len(requests)


@task(name="record_generate_run", cache_policy=NONE)
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

    def register_model(self) -> None:
        register_model(self.con, self.setup.model_id)

    def write_run(self, run: RunRecord) -> None:
        record_generate_run(self.con, run)

    def provider(self) -> Provider:
        """The model's provider (its SDK client); a missing key fails here, before anything is written."""
        return make_provider(self.setup.spec, timeout_s=self.options.retry.timeout_s, option=MODEL_OPTION)

    def generate(self, provider: Provider, plan: AnswerPlan, run_id: str, budget: Budget,
                 progress: bool) -> AnswerStats:
        """Ask `provider` for the plan's answers through one runner, chunk by chunk, then close it; returns
        the runner's stats."""
        return asyncio.run(self._generate(provider, plan, run_id, budget, progress))

    async def _generate(self, provider: Provider, plan: AnswerPlan, run_id: str, budget: Budget,
                        progress: bool) -> AnswerStats:
        options = self.options
        try:
            with JudgeProgress(len(plan.requests), label=self.setup.model_id, enabled=progress) as bar:
                async with AnswerRunner(provider=provider, model_id=self.setup.model_id, dataset=plan.dataset,
                                        prompts=plan.prompts, generation=self.setup.generation,
                                        writer=ResponseWriter(self.con), run_id=run_id, retry=options.retry,
                                        limits=options.limits, options=options.generation, price=self.setup.price,
                                        budget=budget, progress=bar) as runner:
                    self.stats = runner.stats

                    def skip(requests) -> None:
                        runner.stats.skipped += len(requests)

                    await run_chunks(plan.chunks(PROMPTS_PER_CHUNK), lambda requests: generate_chunk(runner, requests),
                                     lambda: runner.halted, skip)
                return runner.stats
        finally:
            await provider.aclose()


def generate_message(left: AnswerPlan, stats: AnswerStats, budget: Budget, stopped_by: str | None,
                     failure: BaseException | None) -> str:
    """The one line a generate run leaves in `runs.message`: what it did, what stopped it, what is left."""
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(stats.failures.items()))
    done = (f"{stats.ok} answers stored, {stats.failed} failed{f' ({reasons})' if reasons else ''} from "
            f"{stats.requests} requests ({stats.retries} retries), {stats.tokens_in:,} + {stats.tokens_out:,} "
            f"tokens, ${budget.spent_usd:.4f}")
    head = outcome_head(failure, stopped_by)
    calls = len(left.requests)
    tail = f"left: {calls} prompts; run the same command again to continue" if calls else "left: nothing"
    return f"{head}: {done}; {tail}"
