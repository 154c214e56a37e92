"""Adaptive judging against the warehouse (`eqarena judge --adaptive`): the held judgments of the judge
and template as cell statistics, a judge step that sends each round's requests (one sample per order
of each chosen cell) through the JudgeRunner and reads the scores back, and the run's outcome.

The selection, rating (missing cells imputed explicitly) and stop rule are eqarena/solvers/sparse/adaptive.py's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from eqarena.judge.judges import make_judge_provider
from eqarena.judge.plan import PlannedRequest
from eqarena.judge.runner import JudgeRunner, RunStats
from eqarena.llm.budget import Budget
from eqarena.llm.pricing import estimate_message_tokens
from eqarena.options import AdaptiveOptions
from eqarena.orchestration.steps import step
from eqarena.solvers.sparse.adaptive import NOT_SENT, AdaptiveResult, CellStats, adaptive_judging
from eqarena.tasks.judge import JudgeSession, add_stats
from eqarena.tasks.runs import RunLog
from eqarena.warehouse.judgments import JudgmentWriter, read_samples


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
    stats: RunStats = field(default_factory=RunStats)
    message: str = ""


class AdaptiveJudge:
    """The warehouse side of adaptive judging for one session: held judgments as CellStats, and the
    `judge(requests) -> scores` step `solvers.sparse.adaptive.adaptive_judging` calls each round."""

    def __init__(self, session: JudgeSession, run_id: str):
        self.session, self.run_id = session, run_id
        self.prompt_ids, self.model_ids = list(session.inputs.prompts), list(session.inputs.models)
        self.stats = RunStats()
        caps = session.options.caps
        self.budget = Budget(max_cost_usd=caps.max_cost, max_samples=caps.max_calls)
        self.provider = make_judge_provider(session.setup.spec, timeout_s=session.options.retry.timeout_s)
        # One event loop for every round: the provider's HTTP client belongs to the loop it first ran on.
        self._loop = asyncio.Runner()
        self._next_index: dict[tuple[str, str, str], int] = {}

    def _samples(self):
        setup = self.session.setup
        return read_samples(self.session.con, setup.spec.judge_id, setup.template.hash, self.session.inputs.dataset)

    def held(self) -> CellStats:
        """What this judge and template already judged on the chosen prompts and models (failed rows
        count as tried, with a NaN score)."""
        p_at = {p: k for k, p in enumerate(self.prompt_ids)}
        m_at = {m: k for k, m in enumerate(self.model_ids)}
        held = CellStats.empty(len(self.prompt_ids), len(self.model_ids))
        cells, scores = [], []
        for p, a, b, k, status, score in self._samples():
            self._next_index[p, a, b] = max(self._next_index.get((p, a, b), 0), k + 1)
            if p in p_at and a in m_at and b in m_at:
                cells.append((p_at[p], m_at[a], m_at[b]))
                scores.append(score if status == "ok" else np.nan)
        if cells:
            held.add(np.array(cells), np.array(scores, float))
        return held

    def __call__(self, requests: np.ndarray) -> np.ndarray:
        """Judge one sample of each requested ordered cell (p, a, b); their scores (NaN: not ok,
        NOT_SENT: refused by the cost or call cap)."""
        inputs, template = self.session.inputs, self.session.setup.template
        planned, keys = [], []
        for p, a, b in requests:
            cell = (self.prompt_ids[p], self.model_ids[a], self.model_ids[b])
            k = self._next_index.get(cell, 0)
            self._next_index[cell] = k + 1
            messages = template.messages(
                inputs.prompts[cell[0]], inputs.responses[cell[0], cell[1]], inputs.responses[cell[0], cell[2]]
            )
            planned.append(
                PlannedRequest(
                    *cell,
                    sample_indices=(k,),
                    next_free_index=k + 1,
                    unparsed_allowance=0,
                    tokens_in=estimate_message_tokens(messages),
                )
            )
            keys.append((*cell, k))
        self._loop.run(self._judge(planned))
        written = {(p, a, b, k): s if status == "ok" else np.nan for p, a, b, k, status, s in self._samples()}
        for p, a, b, k in keys:
            if (p, a, b, k) not in written:  # not sent (the cost cap): its sample index stays free
                self._next_index[p, a, b] = min(self._next_index[p, a, b], k)
        return np.array([written.get(key, NOT_SENT) for key in keys], float)

    async def _judge(self, planned: list[PlannedRequest]) -> None:
        session = self.session
        inputs, options = session.inputs, session.options
        async with JudgeRunner(
            provider=self.provider,
            template=session.setup.template,
            dataset=inputs.dataset,
            prompts=inputs.prompts,
            responses=inputs.responses,
            writer=JudgmentWriter(session.con),
            run_id=self.run_id,
            retry=options.retry,
            limits=options.limits,  # --concurrency, --rpm and --tpm, as a plain judge run takes them
            options=options.generation,  # --max-tokens, --temperature
            price=session.setup.price,
            budget=self.budget,
            multi_sample=False,
        ) as runner:
            await runner.judge(planned)
        add_stats(self.stats, runner.stats)

    def close(self) -> None:
        try:
            self._loop.run(self.provider.aclose())
        finally:
            self._loop.close()


@step("judge_adaptively")
def judge_adaptively(session: JudgeSession, log: RunLog) -> AdaptiveOutcome:
    """Run `solvers.sparse.adaptive.adaptive_judging` through the session's judge, then record the run's row
    (failed ones too, with what they did)."""
    judge = AdaptiveJudge(session, log.run_id)
    options = session.options.adaptive or AdaptiveOptions()
    result, status = None, "failed"
    try:
        result = adaptive_judging(
            judge,
            len(judge.prompt_ids),
            len(judge.model_ids),
            max_calls=session.options.caps.max_calls,
            batch_calls=options.batch_calls,
            stop_probability=options.stop_probability,
            indifference=options.indifference,
            explore=options.explore,
            initial_prompts=options.initial_prompts,
            replicates=options.replicates,
            max_samples_per_order=session.options.samples_per_order,
            seed=options.seed,
            initial=judge.held(),
            spent=lambda: judge.budget.exhausted_by,
        )
        status = "ok"
    finally:
        judge.close()
        message = adaptive_message(result, judge.stats)
        log.timings["judge"] = judge.stats.seconds
        session.record(log.record(status, data_fingerprint=session.setup.template.hash, message=message))
    ratings = result.ratings[-1] if result.ratings else np.zeros(0)  # none: the cap admitted no call
    order = [judge.model_ids[k] for k in np.lexsort((np.arange(len(ratings)), -ratings))]
    return AdaptiveOutcome(
        session.setup.spec.judge_id,
        log.run_id,
        result.calls,
        order,
        {m: float(r) for m, r in zip(judge.model_ids, ratings)},
        [float(p) for p in result.probabilities[-1]] if result.probabilities else [],
        result.stopped_by,
        judge.stats,
        message,
    )


def adaptive_message(result: AdaptiveResult | None, total: RunStats) -> str:
    done = f"{total.ok} ok, {total.unparsed} unparsed, {total.errors} failed samples from {total.requests} requests"
    if result is None:
        return f"failed: {done}"
    if not result.probabilities:
        return (
            f"stopped ({result.stopped_by}) before a rating: {done}, too few to rate every model; "
            "raise the cap or judge without --adaptive"
        )
    probs = ", ".join(f"{p:.2f}" for p in result.probabilities[-1])
    return (
        f"stopped ({result.stopped_by}) after {len(result.calls)} round(s): {done}; "
        f"adjacent-pair order probabilities [{probs}]"
    )
