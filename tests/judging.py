"""JudgeOptions for tests against the local fake server: fast retries and short timeouts."""

from __future__ import annotations

from eqarena.options import JudgeOptions, RetryPolicy, RunLimits, RunnerOptions, SpendCaps

FAST_RETRY = RetryPolicy(attempts=10, initial_wait_s=0.01, max_wait_s=60.0, timeout_s=1.0)


def judge_options(
    judge: str,
    dataset: str = "toy",
    *,
    retry: RetryPolicy = FAST_RETRY,
    concurrency: int = 16,
    rpm: float | None = None,
    tpm: float | None = None,
    max_cost: float | None = None,
    max_calls: int | None = None,
    runner: RunnerOptions | None = None,
    **fields,
) -> JudgeOptions:
    """A JudgeOptions with the fake server's fast retries; `fields` are JudgeOptions' own fields."""
    return JudgeOptions(
        judge=judge,
        dataset=dataset,
        retry=retry,
        limits=RunLimits(concurrency=concurrency, rpm=rpm, tpm=tpm),
        caps=SpendCaps(max_cost=max_cost, max_calls=max_calls),
        runner=runner or RunnerOptions(),
        **fields,
    )
