"""Judge calls on Dask workers (`eqarena judge --runner dask`), through prefect-dask's DaskTaskRunner,
with one rate limit for the whole run.

Design: the flow process stays the only dispatcher; Dask workers only make provider calls.

    flow process (one JudgeRunner, as with the default runner)           Dask workers (processes)
      plan -> budget reserve -> concurrency slot -> rpm/tpm limiter
           -> DaskProvider.complete(): submit `judge_call` ----------->  real SDK provider, ONE attempt,
      <- Completion, or RemoteCallError(status, Retry-After, ...) <-----  returns what came back
      retry (tenacity, Retry-After) -> limiter again -> submit again
      rows (sample_rows / error_rows) -> JudgmentWriter -> DuckDB (the one writer)

`DaskProvider` is a `Provider` like the SDK ones, so the existing `JudgeRunner` runs unchanged on top
of it: every attempt, first tries and retries alike, passes the flow's single aiolimiter (rpm) and
token limiter (tpm) before it is submitted, which is what makes `--rpm` / `--tpm` one limit for the
whole run, however many workers execute the calls. Budget caps, the concurrency bound, retries that
honour Retry-After, unparseable re-asks, error rows and the write buffer are the runner's own code.
Why not a limit inside the workers (Prefect global concurrency limits, `rate_limit()`): it needs every
worker to reach the same Prefect API, costs an API round trip per call, and a worker without
PREFECT_API_URL would start its own temporary server and limit nothing. Dispatching from one process
needs no shared state at all; Dask does the scheduling of the submitted calls. The only cost is that
the calls reach the provider after Dask's dispatch delay, which jitters arrivals by milliseconds. Calls
that wait on a worker bunch up and then arrive faster than the limit, so nothing slow may sit on a call's
way: `warm_up_worker` makes each worker's event loop and provider before the first call is dispatched.
(When each call thread made its own on its first call, the run's first calls waited while the limiter
let the next ones through, and a 10 s window at the provider saw up to 14 requests more than allowed.)

The calls are plain Dask tasks submitted through the DaskTaskRunner's client (prefect-dask's
`PrefectDaskClient`; the runner makes and closes the cluster), inside the flow's `judge_chunk` task
runs. Submitting each call as a Prefect task was measured at about 0.11 s of the dispatcher's CPU per
call on a 2-core machine (Prefect serializes its whole settings and flow-run context for every
submission), which caps a run at ~9 calls/s, below the limits the runner must reach; and a worker
running Prefect tasks needs the flow's Prefect API (a temporary server on 127.0.0.1 is unreachable
from remote workers). Plain tasks need neither: workers import this module and the SDKs, nothing more.

Workers return what the provider answered (the sample texts, token usage, or a picklable description
of the failure, already scrubbed of keys); the flow process turns it into `judgments` rows with the
same functions as the default runner and commits them as they arrive, so a killed run loses at most
the calls in flight and a re-run plans only what is missing.

Secrets: a worker makes its provider with `make_judge_provider`, which reads the API key from the
*worker's* environment. Task arguments (spec without key, messages, sample count, options, timeout),
hence the Dask task graph, logs and rows, never hold a key. A LocalCluster's workers inherit the flow
process's environment; workers of a cluster given by `--dask-address` need OPENAI_API_KEY /
GEMINI_API_KEY (GOOGLE_API_KEY) in their own environment (a missing key there stops the run like a
refused key), the eqarena package installed, and network access to the provider.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from eqarena.exceptions import EqarenaError, OptionError
from eqarena.judge.judges import make_judge_provider
from eqarena.llm.providers import (
    Completion,
    JudgeSpec,
    JudgeSpecError,
    Messages,
    Provider,
    retry_after_seconds,
)
from eqarena.options import GenerationOptions, RunnerOptions

# ---------------------------------------------------------------- worker side


@dataclass(frozen=True)
class RemoteFailure:
    """A failed provider call as a worker saw it (picklable; SDK exceptions and their responses are not
    reliably so). `description` is the provider's own `describe`, keys scrubbed."""

    description: str
    status: int | None = None
    network: bool = False
    fatal: bool = False
    refused: bool = False  # connection refused: nothing listens at the judge's address
    retry_after_s: float | None = None


@dataclass(frozen=True)
class CallOutcome:
    """What one `judge_call` returns: the completion, or the failure."""

    completion: Completion | None = None
    failure: RemoteFailure | None = None
    latency_s: float | None = None


_calls_lock = threading.Lock()
_calls_loop: asyncio.AbstractEventLoop | None = None
_providers: dict[tuple[JudgeSpec, float], Provider] = {}


def _worker_loop() -> asyncio.AbstractEventLoop:
    """The worker process's one event loop for provider calls, running in a daemon thread. Every Dask
    thread of the process hands its call to it, so the process keeps one provider (one connection pool)
    per judge, made once, instead of one per thread made on that thread's first call."""
    global _calls_loop
    with _calls_lock:
        if _calls_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="eqarena-judge-calls", daemon=True).start()
            _calls_loop = loop
        return _calls_loop


def _worker_provider(spec: JudgeSpec, timeout_s: float) -> Provider:
    with _calls_lock:
        key = (spec, timeout_s)
        if key not in _providers:
            _providers[key] = make_judge_provider(spec, timeout_s=timeout_s)  # the key: this worker's environment
        return _providers[key]


def judge_call(
    spec: JudgeSpec, messages: Messages, n: int, options: GenerationOptions, timeout_s: float
) -> CallOutcome:
    """One attempt of one judge request on a Dask worker, through the provider's SDK. Never raises for
    a provider failure: the flow process classifies it, and retries it through the shared limiter."""
    try:
        provider = _worker_provider(spec, timeout_s)
    except JudgeSpecError as exc:  # e.g. the key is missing on this worker
        return CallOutcome(failure=RemoteFailure(f"JudgeSpecError: {exc}", fatal=True))
    started = time.perf_counter()
    try:
        call = asyncio.run_coroutine_threadsafe(provider.complete(messages, n, options), _worker_loop())
        completion = call.result()  # the provider's own timeout bounds the wait
    except Exception as exc:  # noqa: BLE001 - every provider failure goes back to the dispatcher
        return CallOutcome(
            failure=RemoteFailure(
                description=provider.describe(exc),
                status=provider.status_of(exc),
                network=provider.is_network_error(exc),
                fatal=provider.is_fatal(exc),
                refused=provider.is_refused(exc),
                retry_after_s=retry_after_seconds(exc),
            )
        )
    return CallOutcome(completion=completion, latency_s=time.perf_counter() - started)


def warm_up_worker(spec: JudgeSpec, timeout_s: float) -> str:
    """Before the first call: import the SDKs, start the calls' event loop and make the provider, so
    that no call waits for them. Without a key here the first call reports it (a fatal failure)."""
    import google.genai  # noqa: F401
    import openai  # noqa: F401

    _worker_loop()
    try:
        _worker_provider(spec, timeout_s)
    except JudgeSpecError:
        return "no key"
    return "ready"


# ---------------------------------------------------------------- flow side


class RemoteCallError(EqarenaError):
    """A provider call that failed on a Dask worker, as the flow process's runner sees it."""

    def __init__(self, failure: RemoteFailure):
        super().__init__(failure.description)
        self.failure = failure
        self.retry_after_s = failure.retry_after_s  # read by retry_after_seconds (Retry-After honoured)


class DaskProvider(Provider):
    """A Provider whose calls run as `judge_call` Dask tasks on the DaskTaskRunner's cluster. One attempt
    per submission; the JudgeRunner on top of it retries, limits and writes exactly as for an SDK provider."""

    def __init__(self, spec: JudgeSpec, task_runner: Any, *, timeout_s: float):
        super().__init__(spec)
        self.task_runner = task_runner
        self.timeout_s = timeout_s
        # A call that has not come back long after its own HTTP timeout (a hung worker) is given up and
        # retried like a network error.
        self.wait_s = 2 * timeout_s + 60.0

    async def complete(self, messages: Messages, n: int, options: GenerationOptions) -> Completion:
        # pure=False and an explicit key: no hashing of the arguments; every attempt is a new task.
        future = self.task_runner.client.submit(
            judge_call,
            self.spec,
            messages,
            n,
            options,
            self.timeout_s,
            key=f"judge_call-{uuid.uuid4().hex}",
            pure=False,
        )
        settled: concurrent.futures.Future = concurrent.futures.Future()

        def collect(done) -> None:  # on a callback thread of the Dask client: may block
            try:
                settled.set_result(done.result())
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                settled.set_exception(exc)

        future.add_done_callback(collect)
        try:
            outcome: CallOutcome = await asyncio.wait_for(asyncio.wrap_future(settled), self.wait_s)
        except BaseException:
            future.cancel()
            raise
        finally:
            future.release()
        if outcome.failure is not None:
            raise RemoteCallError(outcome.failure)
        return outcome.completion

    def status_of(self, exc: BaseException) -> int | None:
        return exc.failure.status if isinstance(exc, RemoteCallError) else None

    def is_network_error(self, exc: BaseException) -> bool:
        if isinstance(exc, RemoteCallError):
            return exc.failure.network
        from distributed import CancelledError as DaskCancelled
        from distributed.comm.core import CommClosedError
        from distributed.scheduler import KilledWorker

        # a lost worker or connection, or a call that never came back: the attempt is retried
        return isinstance(exc, (KilledWorker, CommClosedError, DaskCancelled, TimeoutError, ConnectionError))

    def is_fatal(self, exc: BaseException) -> bool:
        return isinstance(exc, RemoteCallError) and exc.failure.fatal

    def is_refused(self, exc: BaseException) -> bool:
        # only the judge's refusals: a refused connection to the Dask scheduler is a lost worker, retried
        return isinstance(exc, RemoteCallError) and exc.failure.refused

    def describe(self, exc: BaseException) -> str:
        if isinstance(exc, RemoteCallError):
            return exc.failure.description  # the worker's provider described (and scrubbed) it
        return super().describe(exc)


@contextmanager
def dask_provider(
    spec: JudgeSpec,
    *,
    timeout_s: float,
    address: str | None = None,
    workers: int = RunnerOptions.dask_workers,
    concurrency: int = 16,
) -> Iterator[DaskProvider]:
    """A DaskProvider on a started DaskTaskRunner: a LocalCluster of `workers` worker processes (with
    enough threads between them for `concurrency` calls in flight), or the scheduler at `address`.
    The cluster (if made here) is closed on exit."""
    from prefect_dask import DaskTaskRunner

    if workers < 1:
        raise OptionError(f"--dask-workers must be at least 1, got {workers}")
    if address:
        runner = DaskTaskRunner(address=address)
    else:
        make_judge_provider(spec, timeout_s=timeout_s)  # a missing key fails here, before a cluster starts
        runner = DaskTaskRunner(
            cluster_kwargs=dict(
                n_workers=workers,
                threads_per_worker=max(1, math.ceil(concurrency / workers)),
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.WARNING,
            )
        )
    with ExitStack() as stack:
        quiet = logging.getLogger("distributed")  # the scheduler's and client's chatter (workers: silence_logs)
        stack.callback(quiet.setLevel, quiet.level)
        quiet.setLevel(max(quiet.getEffectiveLevel(), logging.WARNING))
        stack.enter_context(runner)
        runner.client.run(warm_up_worker, spec, timeout_s)  # starts the cluster (or connects); readies every worker
        yield DaskProvider(spec, runner, timeout_s=timeout_s)
