"""Running planned judge requests: every returned judgment is handed at once to the warehouse write
buffer; unparseable verdicts are asked again within the cell's allowance. Limits, retries, caps and
the rule that stops a run are shared with answer generation (eqarena/llm/calls.py).

One `JudgeRunner` serves a whole flow run; the flow's chunk tasks call `judge(requests)` on it
concurrently, so the limits, caps and buffer are shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from eqarena.judge.plan import PlannedRequest
from eqarena.judge.rows import RowContext, error_rows, sample_rows
from eqarena.judge.templates import Template
from eqarena.llm.budget import Budget
from eqarena.llm.calls import CallStats, ProviderRequests
from eqarena.llm.pricing import Price
from eqarena.llm.progress import JudgeProgress
from eqarena.llm.providers import Completion, Provider
from eqarena.options import GenerationOptions, RetryPolicy, RunLimits
from eqarena.warehouse.judgments import JudgmentWriter


@dataclass
class RunStats(CallStats):
    """What a judge run did: the requests (CallStats) and the samples they returned."""

    ok: int = 0
    unparsed: int = 0
    errors: int = 0
    reasked: int = 0
    multi_sample_refusals: int = 0
    skipped_samples: int = 0

    @property
    def samples(self) -> int:
        return self.ok + self.unparsed + self.errors


class JudgeRunner(ProviderRequests):
    """Sends planned requests to a judge and writes every sample it gets back (module docstring)."""

    def __init__(
        self,
        *,
        provider: Provider,
        template: Template,
        dataset: str,
        prompts: Mapping[str, str],
        responses: Mapping[tuple[str, str], str],
        writer: JudgmentWriter,
        run_id: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        limits: RunLimits = RunLimits(),
        options: GenerationOptions = GenerationOptions(),
        price: Price | None = None,
        budget: Budget | None = None,
        progress: JudgeProgress | None = None,
        multi_sample: bool = True,
    ):
        super().__init__(
            provider=provider,
            writer=writer,
            stats=RunStats(),
            retry=retry,
            limits=limits,
            options=options,
            price=price,
            budget=budget,
            progress=progress,
        )
        self.template = template
        self.dataset = dataset
        self.prompts = prompts
        self.responses = responses
        self.run_id = run_id
        self.multi_sample = multi_sample
        self._rows = RowContext(provider.spec.judge_id, template, dataset, run_id)

    @property
    def judge_id(self) -> str:
        return self.provider_id

    async def judge(self, requests: Sequence[PlannedRequest]) -> None:
        """Judge every request (bounded by the shared concurrency); raises FatalProviderError if the
        provider refuses the run. Samples not asked because of a cap are counted in stats.skipped_samples."""
        await self._each(requests, self._judge_request)

    def _messages(self, request: PlannedRequest) -> list[dict[str, str]]:
        return self.template.messages(
            self.prompts[request.prompt_id],
            self.responses[request.prompt_id, request.model_a],
            self.responses[request.prompt_id, request.model_b],
        )

    def _estimate_cost(self, request: PlannedRequest, n: int) -> float:
        return self._cost(request.tokens_in, n * self.template.expected_output_tokens)

    async def _judge_request(self, request: PlannedRequest) -> None:
        todo = list(request.sample_indices)
        next_free = request.next_free_index
        allowance = request.unparsed_allowance
        messages = None
        while todo:
            if self.halted:
                self.stats.skipped_samples += len(todo)
                return
            n = len(todo) if self.multi_sample else 1
            asked, todo = todo[:n], todo[n:]
            estimate = self._estimate_cost(request, n)
            if not self.budget.reserve(estimate, n):
                self.stats.skipped_samples += len(asked) + len(todo)
                return
            messages = messages or self._messages(request)
            try:
                tokens = request.tokens_in + n * self.template.expected_output_tokens
                completion, latency = await self._call(messages, n, tokens)
            except Exception as exc:  # noqa: BLE001 - every provider failure is classified here
                self.budget.release(estimate, n)
                if self._stops_the_run(exc):
                    self.stats.skipped_samples += len(asked) + len(todo)
                    return
                if self.provider.rejects_multiple_samples(exc, n):
                    self.multi_sample = False
                    self.stats.multi_sample_refusals += 1
                    todo = asked + todo
                    continue
                self._write(request, asked, error=self.provider.describe(exc))
                continue
            returned = len(completion.texts)
            if 0 < returned < n:
                self.multi_sample = False  # the server ignores n: ask one sample per request from now on
            # No text at all (e.g. filtered output) is recorded as unparseable samples, never dropped.
            answered = asked[:returned] if returned else asked
            todo = asked[len(answered) :] + todo
            cost = self._actual_cost(request, completion, len(answered))
            self.budget.settle(estimate, n, cost, len(answered))
            unparsed = self._write(request, answered, completion=completion, latency=latency)
            again = min(unparsed, allowance)
            if again:
                allowance -= again
                todo += list(range(next_free, next_free + again))
                next_free += again
                self.stats.reasked += again
                self.progress.add_to_total(again)

    def _actual_cost(self, request: PlannedRequest, completion: Completion, samples: int) -> float:
        return self._billed(completion, request.tokens_in, samples * self.template.expected_output_tokens)

    def _write(
        self,
        request: PlannedRequest,
        indices: Sequence[int],
        *,
        error: str | None = None,
        completion: Completion | None = None,
        latency: float | None = None,
    ) -> int:
        """Hand the samples of one request to the write buffer; returns how many were unparseable."""
        if completion is None:
            self.writer.add(error_rows(self._rows, request.cell, indices, error or "failed"))
            self.stats.errors += len(indices)
            unparsed = 0
        else:
            rows, unparsed = sample_rows(self._rows, request.cell, indices, completion, latency)
            self.writer.add(rows)
            self.stats.ok += len(indices) - unparsed
            self.stats.unparsed += unparsed
            self.stats.tokens_in += completion.tokens_in or 0
            self.stats.tokens_out += completion.tokens_out or 0
        self.progress.advance(len(indices), self.budget.spent_usd)
        return unparsed
