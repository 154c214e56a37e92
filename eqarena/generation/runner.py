"""Asking a model for its answers: one request per planned prompt, through the limits, retries and caps
every provider run shares (eqarena/llm/calls.py), each answer handed at once to the warehouse write
buffer. A request that fails for good, or returns no text, is counted and not stored: the next run asks
again. A 401/403/404, or a refused connection before the model has answered once, stops the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from eqarena.generation.plan import AnswerRequest, answer_messages
from eqarena.llm.budget import Budget
from eqarena.llm.calls import CallStats, ProviderRequests
from eqarena.llm.pricing import Price
from eqarena.llm.progress import JudgeProgress
from eqarena.llm.providers import Provider
from eqarena.options import GenerationOptions, RetryPolicy, RunLimits
from eqarena.warehouse.responses import ResponseRow, ResponseWriter

EMPTY_ANSWER = "empty answer"


@dataclass
class AnswerStats(CallStats):
    """What a generate run did: its requests (CallStats) and what became of the prompts asked.
    `failures` counts failed prompts by reason (the provider's error, or EMPTY_ANSWER)."""

    ok: int = 0  # answers stored
    failed: int = 0  # requests that failed for good, or returned no text: not stored, asked again next run
    skipped: int = 0  # not asked: a cap was reached or the run was stopped
    failures: dict[str, int] = field(default_factory=dict)


class AnswerRunner(ProviderRequests):
    """Sends planned prompts to a model and stores every answer it returns (module docstring)."""

    role = "model"
    results = "answers"

    def __init__(
        self,
        *,
        provider: Provider,
        model_id: str,
        dataset: str,
        prompts: Mapping[str, str],
        generation: str,
        writer: ResponseWriter,
        run_id: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        limits: RunLimits = RunLimits(),
        options: GenerationOptions = GenerationOptions(),
        price: Price | None = None,
        budget: Budget | None = None,
        progress: JudgeProgress | None = None,
    ):
        super().__init__(
            provider=provider,
            writer=writer,
            stats=AnswerStats(),
            retry=retry,
            limits=limits,
            options=options,
            price=price,
            budget=budget,
            progress=progress,
        )
        self.model_id = model_id
        self.dataset = dataset
        self.prompts = prompts
        self.generation = generation
        self.run_id = run_id
        self.max_tokens = options.max_tokens or 0

    async def generate(self, requests: Sequence[AnswerRequest]) -> None:
        """Answer every request (bounded by the shared concurrency); raises FatalProviderError if the
        provider refuses the run. Prompts not asked because of a cap are counted in stats.skipped."""
        await self._each(requests, self._answer)

    async def _answer(self, request: AnswerRequest) -> None:
        if self.halted:
            self.stats.skipped += 1
            return
        estimate = self._cost(request.tokens_in, self.max_tokens)
        if not self.budget.reserve(estimate, 1):
            self.stats.skipped += 1
            return
        try:
            completion, _ = await self._call(
                answer_messages(self.prompts[request.prompt_id]), 1, request.tokens_in + self.max_tokens
            )
        except Exception as exc:  # noqa: BLE001 - every provider failure is classified here
            self.budget.release(estimate, 1)
            if self._stops_the_run(exc):
                self.stats.skipped += 1
            else:
                self._fail(self._reason(exc))
            return
        self.budget.settle(estimate, 1, self._billed(completion, request.tokens_in, self.max_tokens), 1)
        self.stats.tokens_in += completion.tokens_in or 0
        self.stats.tokens_out += completion.tokens_out or 0
        text = completion.texts[0] if completion.texts else ""
        if not text.strip():
            self._fail(EMPTY_ANSWER)
            return
        self.writer.add(
            [
                ResponseRow(
                    dataset=self.dataset,
                    prompt_id=request.prompt_id,
                    model_id=self.model_id,
                    text=text,
                    generator=self.provider_id,
                    generation=self.generation,
                    tokens_in=completion.tokens_in,
                    tokens_out=completion.tokens_out,
                    run_id=self.run_id,
                )
            ]
        )
        self.stats.ok += 1
        self.progress.advance(1, self.budget.spent_usd)

    def _fail(self, reason: str) -> None:
        self.stats.failed += 1
        self.stats.failures[reason] = self.stats.failures.get(reason, 0) + 1
        self.progress.advance(1, self.budget.spent_usd)
