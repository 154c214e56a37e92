"""Retrying transient provider failures with tenacity: honour Retry-After, else exponential backoff."""

from __future__ import annotations

from typing import Callable

import tenacity

from eqarena.llm.providers import retry_after_seconds
from eqarena.options import RetryPolicy


class wait_retry_after:
    """tenacity wait: the failed response's Retry-After if it has one, else `fallback`."""

    def __init__(self, fallback: Callable[[tenacity.RetryCallState], float], cap_s: float):
        self.fallback = fallback
        self.cap_s = cap_s

    def __call__(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_seconds(exc) if exc is not None else None
        return min(asked, self.cap_s) if asked is not None else self.fallback(state)


def retrying(
    worth_retrying: Callable[[BaseException], bool],
    policy: RetryPolicy,
    on_retry: Callable[[BaseException, float], None] | None = None,
) -> tenacity.AsyncRetrying:
    """An AsyncRetrying for `async for attempt in ...: with attempt: ...` that retries the failures
    `worth_retrying` accepts (a provider's transient ones) and re-raises the last error once
    `policy.attempts` are used up. `on_retry(error, seconds)` hears of each retry and its wait."""

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            on_retry(state.outcome.exception(), float(wait))

    return tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.attempts),
        wait=wait_retry_after(
            tenacity.wait_exponential_jitter(
                initial=policy.initial_wait_s, max=policy.max_wait_s, jitter=policy.initial_wait_s
            ),
            cap_s=policy.max_retry_after_s,
        ),
        retry=tenacity.retry_if_exception(worth_retrying),
        before_sleep=before_sleep,
        reraise=True,
    )
