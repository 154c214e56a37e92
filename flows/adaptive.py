"""Flow `judge-adaptive` (`eqarena judge --adaptive`): judge only the cells that matter for the NE ranking.

    read inputs -> held judgments of this judge + template -> solvers.adaptive.adaptive_judging, whose
    judge step sends each round's requests (one sample per order of each chosen cell) through the
    JudgeRunner and reads the scores back -> runs row

The selection, rating (missing cells imputed explicitly) and stop rule are `solvers/adaptive.py`'s.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import numpy as np
from prefect import flow

import warehouse
from flows.judge import new_run_id
from flows.judge_plan import prepare_judge
from flows.run_context import current_flow_run_id
from solvers.adaptive import AdaptiveResult, CellStats, adaptive_judging
from tasks.judge.budget import Budget
from tasks.judge.plan import PlannedRequest
from tasks.judge.pricing import estimate_message_tokens
from tasks.judge.providers import GenerationOptions, make_provider
from tasks.judge.retries import RetryPolicy
from tasks.judge.runner import JudgeRunner, RunLimits, RunStats
from tasks.judge.steps import read_judge_inputs, record_judge_run
from tasks.judge.templates import DEFAULT_TEMPLATE
from warehouse.judgments import JudgmentWriter, read_samples
from warehouse.runs import RunRecord


@dataclass(frozen=True)
class AdaptiveOutcome:
    """What an adaptive run did: calls per round, the final NE ranking and its adjacent-pair probabilities."""

    judge: str
    run_id: str
    calls: list[int]
    ranking: list[str]
    ratings: dict[str, float]
    probabilities: list[float]
    stopped_by: str | None
    stats: dict = field(default_factory=dict)
    message: str = ""


@flow(name="judge-adaptive")
def adaptive_judge_flow(
    judge: str,
    dataset: str = "vicuna80",
    models: list[str] | None = None,
    prompts: int | None = None,
    template: str = DEFAULT_TEMPLATE,
    max_calls: int | None = None,
    batch_calls: int = 200,
    stop_probability: float = 0.95,
    indifference: float = 0.02,
    explore: float = 0.1,
    initial_prompts: int = 5,
    replicates: int = 30,
    max_samples_per_order: int | None = None,
    seed: int = 0,
    concurrency: int = 16,
    retries: int = 8,
    retry_wait: float = 1.0,
    timeout: float = 120.0,
    prices: str | None = None,
    db: str | None = None,
) -> AdaptiveOutcome:
    """Judge `dataset` adaptively with `judge` until every adjacent pair of the NE model ranking is
    ordered, or tied within `indifference`, with probability >= `stop_probability`, or `max_calls` calls
    were made (solvers/adaptive.py)."""
    setup = prepare_judge(judge, template, prices, max_calls=max_calls)
    spec, chosen = setup.spec, setup.template
    con = warehouse.connect(db)
    try:
        inputs = read_judge_inputs(con, dataset, models, prompts)
        prompt_ids, model_ids = list(inputs.prompts), list(inputs.models)
        p_at, m_at = {p: k for k, p in enumerate(prompt_ids)}, {m: k for k, m in enumerate(model_ids)}
        held = CellStats.empty(len(prompt_ids), len(model_ids))
        next_index: dict[tuple[str, str, str], int] = {}
        ok_rows = []
        for p, a, b, k, status, score in read_samples(con, spec.judge_id, chosen.hash, dataset):
            next_index[p, a, b] = max(next_index.get((p, a, b), 0), k + 1)
            if p in p_at and a in m_at and b in m_at:  # failed rows count as tried (NaN)
                ok_rows.append(((p_at[p], m_at[a], m_at[b]), score if status == "ok" else np.nan))
        if ok_rows:
            held.add(np.array([c for c, _ in ok_rows]), np.array([s for _, s in ok_rows], float))
        run_id = new_run_id()
        started = datetime.now(UTC)
        parameters = {"judge": judge, "dataset": dataset, "models": model_ids, "prompts": len(prompt_ids),
                      "template": chosen.name, "template_hash": chosen.hash, "adaptive": True,
                      "max_calls": max_calls, "batch_calls": batch_calls, "stop_probability": stop_probability,
                      "indifference": indifference, "explore": explore, "seed": seed}
        record_judge_run(con, RunRecord(flow_run_id=current_flow_run_id(), run_id=run_id, kind="judge",
                                        started_at=started, status="running", parameters=parameters,
                                        message="running"))
        provider = make_provider(spec, timeout_s=timeout)
        writer = JudgmentWriter(con)
        budget = Budget(max_samples=max_calls)
        total = RunStats()

        def judge_round(requests: np.ndarray) -> np.ndarray:
            planned, keys = [], []
            for p, a, b in requests:
                cell = (prompt_ids[p], model_ids[a], model_ids[b])
                k = next_index.get(cell, 0)
                next_index[cell] = k + 1
                messages = chosen.messages(inputs.prompts[cell[0]], inputs.responses[cell[0], cell[1]],
                                           inputs.responses[cell[0], cell[2]])
                planned.append(PlannedRequest(*cell, sample_indices=(k,), next_free_index=k + 1,
                                              unparsed_allowance=0, tokens_in=estimate_message_tokens(messages)))
                keys.append((*cell, k))
            asyncio.run(_run(provider, chosen, inputs, writer, run_id, budget, planned, total, concurrency,
                             RetryPolicy(attempts=retries, initial_wait_s=retry_wait,
                                         max_wait_s=max(retry_wait, 60.0), timeout_s=timeout), setup.price))
            got = {(p, a, b, k): s for p, a, b, k, status, s in read_samples(con, spec.judge_id, chosen.hash, dataset)
                   if status == "ok"}
            return np.array([got.get(key, np.nan) for key in keys], float)

        status, result = "failed", None
        try:
            result = adaptive_judging(judge_round, len(prompt_ids), len(model_ids), max_calls=max_calls,
                                      batch_calls=batch_calls, stop_probability=stop_probability,
                                      indifference=indifference, explore=explore, initial_prompts=initial_prompts,
                                      replicates=replicates,
                                      max_samples_per_order=max_samples_per_order, seed=seed, initial=held)
            status = "ok"
        finally:
            asyncio.run(provider.aclose())
            message = _message(result, total, model_ids)
            record_judge_run(con, RunRecord(flow_run_id=current_flow_run_id(), run_id=run_id, kind="judge",
                                            started_at=started, finished_at=datetime.now(UTC),
                                            status=status, parameters=parameters,
                                            timings={"judge": total.seconds}, data_fingerprint=chosen.hash,
                                            message=message))
        ratings = result.ratings[-1]
        order = [model_ids[k] for k in np.lexsort((np.arange(len(ratings)), -ratings))]
        return AdaptiveOutcome(spec.judge_id, run_id, result.calls, order,
                               {m: float(r) for m, r in zip(model_ids, ratings)},
                               [float(p) for p in result.probabilities[-1]], result.stopped_by,
                               asdict(total), message)
    finally:
        con.close()


async def _run(provider, template, inputs, writer, run_id, budget, planned, total: RunStats, concurrency, retry,
               price) -> None:
    async with JudgeRunner(provider=provider, template=template, dataset=inputs.dataset, prompts=inputs.prompts,
                           responses=inputs.responses, writer=writer, run_id=run_id, retry=retry,
                           limits=RunLimits(concurrency=concurrency), options=GenerationOptions(), price=price,
                           budget=budget, multi_sample=False) as runner:
        await runner.judge(planned)
    for name in ("requests", "retries", "ok", "unparsed", "errors", "tokens_in", "tokens_out", "skipped_samples"):
        setattr(total, name, getattr(total, name) + getattr(runner.stats, name))
    total.seconds += runner.stats.seconds


def _message(result: AdaptiveResult | None, total: RunStats, models: list[str]) -> str:
    done = f"{total.ok} ok, {total.unparsed} unparsed, {total.errors} failed samples from {total.requests} requests"
    if result is None:
        return f"failed: {done}"
    probs = ", ".join(f"{p:.2f}" for p in result.probabilities[-1])
    return (f"stopped ({result.stopped_by}) after {result.calls[-1]} calls in {len(result.calls)} rounds: {done}; "
            f"adjacent-pair order probabilities [{probs}]")
