"""What every run of provider requests shares, whether it asks a judge for verdicts
(eqarena/judge/runner.py) or a model for answers (eqarena/generation/runner.py): bounded concurrency,
request- and token-per-minute limits (aiolimiter), retries that honour Retry-After (tenacity), caps on
spend and calls (the Budget), the write buffer flushed in the background, and the rule that stops a run.

A 401, 403 or 404 stops the run at once, and so does a refused connection (nothing listens at the
provider's address) before the provider has answered once: a wrong URL or a server not started is not
worth minutes of retries. Once it has answered, a refused connection is retried like any network error
(a server restarting comes back), and ends the run when a request has used up its retries still
refused: every other request would wait as long for nothing.

A stop asked for by SIGINT (Ctrl-C) or SIGTERM starts no new request but lets the requests in flight
finish, for up to `stop_grace_s()` (30 s), and stores their answers: they are paid for whether or not we
read them. A second signal, or the end of that grace period, stops at once, giving up those answers.
Either way the run then ends as interrupted (KeyboardInterrupt).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Sequence, TypeVar

from aiolimiter import AsyncLimiter

from eqarena.llm.budget import Budget
from eqarena.llm.pricing import Price
from eqarena.llm.progress import JudgeProgress
from eqarena.llm.providers import Completion, FatalProviderError, JudgeUnreachableError, Provider
from eqarena.llm.retries import retrying
from eqarena.options import GenerationOptions, RetryPolicy, RunLimits
from eqarena.warehouse.buffer import WriteBuffer

# A retry that waits this long is shown (a countdown on the bar, one line without one).
LONG_RETRY_WAIT_S = 5.0

Item = TypeVar("Item")


STOP_GRACE_S = 30.0  # how long a stop waits for the requests in flight (EQARENA_STOP_GRACE_S)


def stop_grace_s() -> float:
    """Seconds a stopping run waits for its requests in flight: $EQARENA_STOP_GRACE_S, else STOP_GRACE_S."""
    try:
        return max(0.0, float(os.environ.get("EQARENA_STOP_GRACE_S", STOP_GRACE_S)))
    except ValueError:
        return STOP_GRACE_S


class Stopping(Exception):
    """A request not sent because the run was asked to stop (module docstring)."""


@dataclass
class CallStats:
    """What any run of requests did. `requests` counts every attempt sent (first tries and retries)."""

    requests: int = 0
    retries: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    retry_reasons: dict[str, int] = field(default_factory=dict)


def rpm_limiter(rpm: float) -> AsyncLimiter:
    """A leaky bucket for `rpm` requests per minute holding at most one second's worth (>= 1), so the
    rate holds in every second, as providers enforce it, not just on average over a minute."""
    period = max(1.0, 60.0 / rpm)
    return AsyncLimiter(rpm * period / 60.0, period)


class ProviderRequests:
    """Sends requests to one provider within the run's limits and caps, and keeps its write buffer
    flushing; a subclass decides what each request asks and what becomes of the answer. Use as an
    async context manager (it starts and stops the background flush)."""

    role = "judge"  # what the provider's model is to the run, in messages
    results = "judgments"  # what the run stores, in messages

    def __init__(
        self,
        *,
        provider: Provider,
        writer: WriteBuffer,
        stats: CallStats,
        retry: RetryPolicy = RetryPolicy(),
        limits: RunLimits = RunLimits(),
        options: GenerationOptions = GenerationOptions(),
        price: Price | None = None,
        budget: Budget | None = None,
        progress: JudgeProgress | None = None,
    ):
        self.provider = provider
        self.writer = writer
        self.stats = stats
        self.retry = retry
        self.limits = limits
        self.options = options
        self.price = price
        self.budget = budget or Budget()
        self.progress = progress or JudgeProgress(0, enabled=False)
        self.fatal: BaseException | None = None  # FatalProviderError, or a failed warehouse write
        self.answered = False  # the provider has answered a request (module docstring: refused connections)
        self._semaphore = asyncio.Semaphore(limits.concurrency)
        self._rpm = rpm_limiter(limits.rpm) if limits.rpm else None
        self._tpm = AsyncLimiter(limits.tpm * limits.tpm_burst_s / 60.0, limits.tpm_burst_s) if limits.tpm else None
        self._flusher: asyncio.Task | None = None
        self._started = 0.0
        self.stop_signal: int | None = None  # the signal that asked the run to stop (module docstring)
        self._in_flight = 0
        self._handlers: dict[int, object] = {}  # signal -> the handler it had before the run

    @property
    def provider_id(self) -> str:
        return self.provider.spec.judge_id

    @property
    def halted(self) -> bool:
        """No new request may start: a cap was reached, the provider refused us for good or a write failed."""
        return self.fatal is not None or self.budget.exhausted_by is not None or self.stop_signal is not None

    async def __aenter__(self):
        self._started = time.perf_counter()
        self._flusher = asyncio.create_task(self._flush_periodically())
        self._catch_stop_signals()
        return self

    async def __aexit__(self, kind, exc, tb) -> None:
        self._restore_signal_handlers()
        if self._flusher is not None:
            self._flusher.cancel()
            try:
                await self._flusher
            except asyncio.CancelledError:
                pass
        self.writer.flush()
        self.stats.seconds = time.perf_counter() - self._started
        if self.stop_signal is not None and (exc is None or isinstance(exc, asyncio.CancelledError)):
            raise KeyboardInterrupt(f"stopped by {signal.Signals(self.stop_signal).name}")

    def _catch_stop_signals(self) -> None:
        """Route SIGINT and SIGTERM to `_stop` while the run lasts (only the main thread can)."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            try:
                loop.add_signal_handler(signum, self._stop, signum, task)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            self._handlers[signum] = previous

    def _restore_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum, previous in self._handlers.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, previous)
        self._handlers.clear()

    def _stop(self, signum: int, task: asyncio.Task | None) -> None:
        """First signal: no new request, the ones in flight finish within the grace period (module
        docstring). Second signal, or the grace period over: stop now."""
        if self.stop_signal is None:
            self.stop_signal = signum
            if self._in_flight:
                grace = stop_grace_s()
                self.progress.note(
                    f"eqarena: stopping: waiting up to {grace:g} s for the {self._in_flight} "
                    f"requests in flight, paid for already, to store their {self.results} "
                    "(press Ctrl-C again to stop without them)"
                )
                asyncio.get_running_loop().call_later(grace, self._give_up, task, f"after {grace:g} s")
            return
        self._give_up(task, "now")

    def _give_up(self, task: asyncio.Task | None, when: str) -> None:
        if task is None or task.done() or not self._in_flight:
            return
        self.progress.note(f"eqarena: stopping {when}; the {self._in_flight} requests in flight are given up")
        task.cancel()

    async def _flush_periodically(self) -> None:
        interval = max(0.01, self.writer.max_delay_s / 2)
        while True:
            await asyncio.sleep(interval)
            try:
                self.writer.flush_due()
            except Exception as exc:  # noqa: BLE001 - a write that fails stops the run (nothing more is paid)
                self.fatal = self.fatal or exc
                return

    async def _each(self, items: Sequence[Item], handle: Callable[[Item], Awaitable[None]]) -> None:
        """`handle` every item, at most `limits.concurrency` at once; raises the run's fatal error if one
        stopped it."""
        pending = iter(items)

        async def worker() -> None:
            for item in pending:  # one shared iterator: each item is taken by one worker
                await handle(item)

        await asyncio.gather(*(worker() for _ in range(min(self.limits.concurrency, len(items)))))
        if self.fatal is not None:
            raise self.fatal

    def _stops_the_run(self, exc: BaseException) -> bool:
        """Whether a request's final failure ends the run (module docstring); records why if so."""
        if isinstance(exc, Stopping) or self.stop_signal is not None:
            return True
        if self.fatal is not None or self.provider.is_fatal(exc) or self.provider.is_refused(exc):
            self.fatal = self.fatal or self._fatal_error(exc)
            return True
        return False

    def _fatal_error(self, exc: BaseException) -> FatalProviderError:
        if not self.provider.is_refused(exc):
            return FatalProviderError(
                f"{self.role} {self.provider_id} refused the request: {self.provider.describe(exc)}"
            )
        where = self.provider.base_url
        if not self.answered:
            return JudgeUnreachableError(f"cannot reach the {self.role} at {where}: connection refused")
        attempts = f"{self.retry.attempts} attempt" + ("s" if self.retry.attempts != 1 else "")
        return JudgeUnreachableError(
            f"the {self.role} at {where} stopped answering: connection refused after "
            f"{attempts}; the {self.results} made are stored, run the same command "
            "again to continue"
        )

    def _worth_retrying(self, exc: BaseException) -> bool:
        """Transient failures, but no refused connection before the provider answered once, and nothing
        once the run has stopped for good."""
        if self.fatal is not None or self.stop_signal is not None or not self.provider.is_transient(exc):
            return False
        return self.answered or not self.provider.is_refused(exc)

    async def _call(self, messages: list[dict[str, str]], n: int, tokens: int) -> tuple[Completion, float]:
        """One request with retries (`tokens`: its estimated prompt and output tokens); every attempt
        waits for the concurrency slot and the rate limits. Returns the completion and its latency."""
        async with self._semaphore:
            async for attempt in retrying(self._worth_retrying, self.retry, on_retry=self._count_retry):
                with attempt:
                    if self._rpm is not None:
                        await self._rpm.acquire()
                    if self._tpm is not None:
                        await self._tpm.acquire(min(tokens, self._tpm.max_rate))
                    if self.stop_signal is not None:  # a stop came while this request waited: not sent
                        raise Stopping()
                    self.stats.requests += 1
                    started = time.perf_counter()
                    self._in_flight += 1
                    try:
                        completion = await self.provider.complete(messages, n, self.options)
                    finally:
                        self._in_flight -= 1
                    latency = time.perf_counter() - started
                    self.answered = True
        return completion, latency

    def _count_retry(self, exc: BaseException, wait_s: float) -> None:
        self.stats.retries += 1
        reason = self._reason(exc)
        self.stats.retry_reasons[reason] = self.stats.retry_reasons.get(reason, 0) + 1
        if wait_s >= LONG_RETRY_WAIT_S:
            self.progress.waiting(wait_s, reason, self.retry.max_retry_after_s)

    def _reason(self, exc: BaseException) -> str:
        """A failure in a few words: its HTTP status, else its type ('HTTP 429', 'APITimeoutError')."""
        status = self.provider.status_of(exc)
        return f"HTTP {status}" if status else type(exc).__name__

    def _cost(self, tokens_in: int, tokens_out: int) -> float:
        """The price of a request of these sizes (0 without a price)."""
        return self.price.cost(tokens_in, tokens_out) if self.price is not None else 0.0

    def _billed(self, completion: Completion, tokens_in: int, tokens_out: int) -> float:
        """What a returned request cost: its reported usage, the estimates where the server reports none."""
        return self._cost(
            completion.tokens_in if completion.tokens_in is not None else tokens_in,
            completion.tokens_out if completion.tokens_out is not None else tokens_out,
        )
