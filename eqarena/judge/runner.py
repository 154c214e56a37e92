"""Running planned judge requests: asyncio with bounded concurrency, request- and token-per-minute
limits (aiolimiter), retries that honour Retry-After (tenacity), caps on spend and calls, and every
returned judgment handed at once to the warehouse write buffer.

A refused connection (nothing listens at the judge's address) before the judge has answered once ends
the run at once (`JudgeUnreachableError`): a wrong URL or a server not started is not worth minutes of
retries. Once it has answered, a refused connection is retried like any network error (a server
restarting comes back), and ends the run when a request has used up its retries still refused: every
other request would wait as long for nothing.

One `JudgeRunner` serves a whole flow run; the flow's chunk tasks call `judge(requests)` on it
concurrently, so the limits, caps and buffer are shared.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from aiolimiter import AsyncLimiter

from eqarena.judge.budget import Budget
from eqarena.judge.plan import PlannedRequest
from eqarena.judge.pricing import Price
from eqarena.judge.progress import JudgeProgress
from eqarena.judge.providers import Completion, FatalProviderError, JudgeUnreachableError, Provider
from eqarena.judge.retries import retrying
from eqarena.judge.rows import RowContext, error_rows, sample_rows
from eqarena.judge.templates import Template
from eqarena.options import GenerationOptions, RetryPolicy, RunLimits
from eqarena.warehouse.judgments import JudgmentWriter


@dataclass
class RunStats:
    """What a run did. `requests` counts every attempt sent (first tries and retries)."""

    requests: int = 0
    retries: int = 0
    ok: int = 0
    unparsed: int = 0
    errors: int = 0
    reasked: int = 0
    multi_sample_refusals: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    skipped_samples: int = 0
    seconds: float = 0.0
    retry_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return self.ok + self.unparsed + self.errors


def rpm_limiter(rpm: float) -> AsyncLimiter:
    """A leaky bucket for `rpm` requests per minute holding at most one second's worth (>= 1), so the
    rate holds in every second, as providers enforce it, not just on average over a minute."""
    period = max(1.0, 60.0 / rpm)
    return AsyncLimiter(rpm * period / 60.0, period)


class JudgeRunner:
    """Sends planned requests to a provider and writes every sample it gets back (module docstring)."""

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
        self.provider = provider
        self.template = template
        self.dataset = dataset
        self.prompts = prompts
        self.responses = responses
        self.writer = writer
        self.run_id = run_id
        self.retry = retry
        self.limits = limits
        self.options = options
        self.price = price
        self.budget = budget or Budget()
        self.progress = progress or JudgeProgress(0, enabled=False)
        self.multi_sample = multi_sample
        self.stats = RunStats()
        self._rows = RowContext(provider.spec.judge_id, template, dataset, run_id)
        self.fatal: BaseException | None = None  # FatalProviderError, or a failed warehouse write
        self.answered = False  # the judge has answered a request (module docstring: refused connections)
        self._semaphore = asyncio.Semaphore(limits.concurrency)
        self._rpm = rpm_limiter(limits.rpm) if limits.rpm else None
        self._tpm = AsyncLimiter(limits.tpm * limits.tpm_burst_s / 60.0, limits.tpm_burst_s) if limits.tpm else None
        self._flusher: asyncio.Task | None = None
        self._started = 0.0

    @property
    def judge_id(self) -> str:
        return self.provider.spec.judge_id

    @property
    def halted(self) -> bool:
        """No new request may start: a cap was reached, the provider refused us for good or a write failed."""
        return self.fatal is not None or self.budget.exhausted_by is not None

    async def __aenter__(self) -> JudgeRunner:
        self._started = time.perf_counter()
        self._flusher = asyncio.create_task(self._flush_periodically())
        return self

    async def __aexit__(self, *exc) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            try:
                await self._flusher
            except asyncio.CancelledError:
                pass
        self.writer.flush()
        self.stats.seconds = time.perf_counter() - self._started

    async def _flush_periodically(self) -> None:
        interval = max(0.01, self.writer.max_delay_s / 2)
        while True:
            await asyncio.sleep(interval)
            try:
                self.writer.flush_due()
            except Exception as exc:  # noqa: BLE001 - a write that fails stops the run (nothing more is paid)
                self.fatal = self.fatal or exc
                return

    async def judge(self, requests: Sequence[PlannedRequest]) -> None:
        """Judge every request (bounded by the shared concurrency); raises FatalProviderError if the
        provider refuses the run. Samples not asked because of a cap are counted in stats.skipped_samples."""
        pending = iter(requests)

        async def worker() -> None:
            for request in pending:  # one shared iterator: each request is taken by one worker
                await self._judge_request(request)

        workers = min(self.limits.concurrency, len(requests))
        await asyncio.gather(*(worker() for _ in range(workers)))
        if self.fatal is not None:
            raise self.fatal

    def _messages(self, request: PlannedRequest) -> list[dict[str, str]]:
        return self.template.messages(
            self.prompts[request.prompt_id],
            self.responses[request.prompt_id, request.model_a],
            self.responses[request.prompt_id, request.model_b],
        )

    def _estimate_cost(self, request: PlannedRequest, n: int) -> float:
        if self.price is None:
            return 0.0
        return self.price.cost(request.tokens_in, n * self.template.expected_output_tokens)

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
                completion, latency = await self._call(messages, n, request.tokens_in)
            except Exception as exc:  # noqa: BLE001 - every provider failure is classified here
                self.budget.release(estimate, n)
                if self.fatal is not None or self.provider.is_fatal(exc) or self.provider.is_refused(exc):
                    self.fatal = self.fatal or self._fatal_error(exc)
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
            answered = asked[: returned] if returned else asked
            todo = asked[len(answered):] + todo
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

    def _fatal_error(self, exc: BaseException) -> FatalProviderError:
        if not self.provider.is_refused(exc):
            return FatalProviderError(f"judge {self.judge_id} refused the request: {self.provider.describe(exc)}")
        where = self.provider.base_url
        if not self.answered:
            return JudgeUnreachableError(f"cannot reach the judge at {where}: connection refused")
        attempts = f"{self.retry.attempts} attempt" + ("s" if self.retry.attempts != 1 else "")
        return JudgeUnreachableError(f"the judge at {where} stopped answering: connection refused after {attempts}; "
                                     "the judgments made are stored, run the same command again to continue")

    def _worth_retrying(self, exc: BaseException) -> bool:
        """Transient failures, but no refused connection before the judge answered once, and nothing once
        the run has stopped for good."""
        if self.fatal is not None or not self.provider.is_transient(exc):
            return False
        return self.answered or not self.provider.is_refused(exc)

    def _actual_cost(self, request: PlannedRequest, completion: Completion, samples: int) -> float:
        if self.price is None:
            return 0.0
        tokens_in = completion.tokens_in if completion.tokens_in is not None else request.tokens_in
        tokens_out = (completion.tokens_out if completion.tokens_out is not None
                      else samples * self.template.expected_output_tokens)
        return self.price.cost(tokens_in, tokens_out)

    async def _call(self, messages: list[dict[str, str]], n: int, tokens_in: int) -> tuple[Completion, float]:
        """One request with retries; every attempt waits for the concurrency slot and the rate limits."""
        tokens = tokens_in + n * self.template.expected_output_tokens
        async with self._semaphore:
            async for attempt in retrying(self._worth_retrying, self.retry, on_retry=self._count_retry):
                with attempt:
                    if self._rpm is not None:
                        await self._rpm.acquire()
                    if self._tpm is not None:
                        await self._tpm.acquire(min(tokens, self._tpm.max_rate))
                    self.stats.requests += 1
                    started = time.perf_counter()
                    completion = await self.provider.complete(messages, n, self.options)
                    latency = time.perf_counter() - started
                    self.answered = True
        return completion, latency

    def _count_retry(self, exc: BaseException) -> None:
        self.stats.retries += 1
        status = self.provider.status_of(exc)
        reason = f"HTTP {status}" if status else type(exc).__name__
        self.stats.retry_reasons[reason] = self.stats.retry_reasons.get(reason, 0) + 1

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
