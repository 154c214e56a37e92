"""`eqarena judge`: judge the missing cells with an LLM judge (plan, caps, limits, runners, adaptive)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.output import print_plan, say
from eqarena.cli.support import (
    DATASET_HELP,
    DB_HELP,
    MAX_RETRY_AFTER,
    PANEL_RATE_LIMITS_AND_RETRIES,
    WAIT,
    checked_dataset,
    cli_errors,
    db_option,
    options_errors,
    run_pipeline,
    split_list,
)
from eqarena.options import (
    AdaptiveOptions,
    GenerationOptions,
    JudgeOptions,
    RetryPolicy,
    RunLimits,
    RunnerOptions,
    SpendCaps,
)

ADAPTIVE = AdaptiveOptions()


# The option groups of `eqarena judge --help`.
PANEL_JUDGING = "Judging"
PANEL_PLAN_AND_COST = "Plan and cost"
PANEL_REQUESTS = "Requests"
PANEL_RUNNER = "Runner"
PANEL_ADAPTIVE_JUDGING = "Adaptive judging"


@cli_errors()
def judge(
    judge: str = typer.Option(
        ...,
        "--judge",
        "-j",
        rich_help_panel=PANEL_JUDGING,
        help="openai:MODEL, gemini:MODEL or openai-compatible:MODEL@URL (keys from OPENAI_API_KEY / GEMINI_API_KEY).",
    ),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", rich_help_panel=PANEL_JUDGING, help=DATASET_HELP),
    models: Optional[str] = typer.Option(
        None,
        "--models",
        rich_help_panel=PANEL_JUDGING,
        help="Comma-separated model ids (default: every model with answers in the dataset).",
    ),
    prompts: Optional[int] = typer.Option(
        None, "--prompts", rich_help_panel=PANEL_JUDGING, min=1, help="Judge the first N prompts."
    ),
    samples_per_order: int = typer.Option(
        4,
        "--samples-per-order",
        rich_help_panel=PANEL_JUDGING,
        min=1,
        help="Samples with each model as assistant A (paper: 4).",
    ),
    template: str = typer.Option(
        "pairwise5",
        "--template",
        rich_help_panel=PANEL_JUDGING,
        help="pairwise5 (five labels, default), pairwise3 (three classes) or the path of a template file.",
    ),
    plan: bool = typer.Option(
        False,
        "--plan",
        rich_help_panel=PANEL_PLAN_AND_COST,
        help="Print the calls, tokens and cost it would take; send nothing.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan (or the run's outcome) as JSON."),
    max_cost: Optional[float] = typer.Option(
        None, "--max-cost", rich_help_panel=PANEL_PLAN_AND_COST, min=0, help="Stop before spending more USD."
    ),
    max_calls: Optional[int] = typer.Option(
        None, "--max-calls", rich_help_panel=PANEL_PLAN_AND_COST, min=0, help="Stop after this many judge calls."
    ),
    concurrency: int = typer.Option(
        RunLimits.concurrency,
        "--concurrency",
        rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES,
        min=1,
        help="Requests in flight at most.",
    ),
    rpm: Optional[float] = typer.Option(
        None, "--rpm", rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES, help="Requests per minute at most."
    ),
    tpm: Optional[float] = typer.Option(
        None, "--tpm", rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES, help="Tokens per minute at most (estimated)."
    ),
    batch: bool = typer.Option(
        False,
        "--batch",
        rich_help_panel=PANEL_RUNNER,
        help="Use the OpenAI Batch API (half price, up to 24 h); resumable.",
    ),
    multi_sample: Optional[bool] = typer.Option(
        None,
        "--multi-sample/--single-sample",
        rich_help_panel=PANEL_REQUESTS,
        help="Ask for all "
        "samples of a cell in one request (n / candidate_count). "
        "Default: on for openai and gemini, off otherwise.",
    ),
    max_unparsed: Optional[int] = typer.Option(
        None,
        "--max-unparsed",
        rich_help_panel=PANEL_JUDGING,
        min=0,
        help="Unparseable verdicts per ordered cell before giving up on it (default: samples per order).",
    ),
    max_tokens: Optional[int] = typer.Option(
        None, "--max-tokens", rich_help_panel=PANEL_REQUESTS, min=1, help="Output tokens per sample at most."
    ),
    temperature: Optional[float] = typer.Option(
        None, "--temperature", rich_help_panel=PANEL_REQUESTS, help="Sampling temperature."
    ),
    retries: int = typer.Option(
        RetryPolicy.attempts,
        "--retries",
        rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES,
        min=1,
        help="Attempts per request, the first included.",
    ),
    retry_wait: float = typer.Option(
        RetryPolicy.initial_wait_s,
        "--retry-wait",
        rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES,
        min=0,
        help="First backoff in seconds when the server sends no Retry-After.",
    ),
    max_retry_after: float = MAX_RETRY_AFTER,
    timeout: float = typer.Option(
        RetryPolicy.timeout_s,
        "--timeout",
        rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES,
        min=0.01,
        help="Seconds per attempt.",
    ),
    prices: Optional[Path] = typer.Option(
        None,
        "--prices",
        rich_help_panel=PANEL_PLAN_AND_COST,
        help="TOML price file overriding eqarena/llm/prices.toml.",
    ),
    batch_poll: float = typer.Option(
        RunnerOptions.batch_poll_s,
        "--batch-poll",
        rich_help_panel=PANEL_RUNNER,
        min=0,
        help="Seconds between batch status checks.",
    ),
    runner: str = typer.Option(
        "asyncio",
        "--runner",
        rich_help_panel=PANEL_RUNNER,
        help="asyncio (default): calls from this process; dask: "
        "calls on Dask workers (prefect-dask), still one --rpm/--tpm limit for the whole "
        "run, rows written by this process.",
    ),
    dask_address: Optional[str] = typer.Option(
        None,
        "--dask-address",
        rich_help_panel=PANEL_RUNNER,
        help="--runner dask: the scheduler of an "
        "existing Dask cluster (tcp://HOST:PORT); its workers need the "
        "API key in their own environment. Default: a local cluster.",
    ),
    dask_workers: int = typer.Option(
        RunnerOptions.dask_workers,
        "--dask-workers",
        rich_help_panel=PANEL_RUNNER,
        min=1,
        help="--runner dask without --dask-address: worker processes of the local cluster.",
    ),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
    adaptive: bool = typer.Option(
        False,
        "--adaptive",
        rich_help_panel=PANEL_ADAPTIVE_JUDGING,
        help="Judge adaptively: a small random design, then "
        "batches of the cells that matter most for the NE ranking, until every adjacent "
        "pair is ordered (or tied within --indifference) with --stop-probability, or "
        "--max-calls is reached.",
    ),
    batch_calls: int = typer.Option(
        ADAPTIVE.batch_calls,
        "--batch-calls",
        rich_help_panel=PANEL_ADAPTIVE_JUDGING,
        min=2,
        help="--adaptive: judge calls per round (--samples-per-order caps the samples of each cell and order).",
    ),
    stop_probability: float = typer.Option(
        ADAPTIVE.stop_probability,
        "--stop-probability",
        rich_help_panel=PANEL_ADAPTIVE_JUDGING,
        min=0.0,
        max=1.0,
        help="--adaptive: stop when every adjacent pair of the NE ranking is settled with this probability.",
    ),
    indifference: float = typer.Option(
        ADAPTIVE.indifference,
        "--indifference",
        rich_help_panel=PANEL_ADAPTIVE_JUDGING,
        min=0.0,
        help="--adaptive: two models whose NE ratings differ by at most this need not be ordered to stop.",
    ),
    explore: float = typer.Option(
        ADAPTIVE.explore,
        "--explore",
        rich_help_panel=PANEL_ADAPTIVE_JUDGING,
        min=0.0,
        max=1.0,
        help="--adaptive: share of each "
        "batch drawn uniformly at random; the rest goes to the cells of highest priority.",
    ),
    seed: int = typer.Option(
        ADAPTIVE.seed,
        "--seed",
        rich_help_panel=PANEL_ADAPTIVE_JUDGING,
        help="--adaptive: seed of the design, the replicates and tie-breaks.",
    ),
) -> None:
    """Judge the missing (prompt, model pair, order, sample) cells with an LLM judge; resumable."""
    from eqarena.llm.providers import parse_judge_spec

    spec = parse_judge_spec(judge)  # a malformed spec fails first
    if spec.provider == "recorded" and spec.base_url is None and db is not None:
        judge = f"{judge}@{db}"  # the replay judge reads its recording from the same warehouse
    with options_errors():
        options = JudgeOptions(
            judge=judge,
            dataset=None,
            models=tuple(split_list([models])) or None,
            prompts=prompts,
            samples_per_order=samples_per_order,
            template=template,
            max_unparsed=max_unparsed,
            multi_sample=multi_sample,
            prices=str(prices) if prices else None,
            generation=GenerationOptions(max_tokens=max_tokens, temperature=temperature),
            limits=RunLimits(concurrency=concurrency, rpm=rpm, tpm=tpm),
            retry=RetryPolicy(
                attempts=retries,
                initial_wait_s=retry_wait,
                max_wait_s=max(retry_wait, 60.0),
                max_retry_after_s=max_retry_after,
                timeout_s=timeout,
            ),
            caps=SpendCaps(max_cost=max_cost, max_calls=max_calls),
            runner=RunnerOptions(
                runner=runner,
                dask_address=dask_address,
                dask_workers=dask_workers,
                batch=batch,
                batch_poll_s=batch_poll,
            ),
            adaptive=AdaptiveOptions(
                batch_calls=batch_calls,
                stop_probability=stop_probability,
                indifference=indifference,
                explore=explore,
                seed=seed,
            )
            if adaptive
            else None,
        )
    options = replace(options, dataset=checked_dataset(dataset, db))
    if options.adaptive is not None and not plan:
        _judge_adaptively(options, db, as_json)
    elif plan:  # only reads the warehouse: no Prefect, no provider SDK
        from eqarena.tasks.judge_plan import plan_judge_run

        outcome = plan_judge_run(options, db_option(db))
        say(json.dumps(asdict(outcome.plan), indent=2)) if as_json else print_plan(outcome.plan)
    else:
        from eqarena.pipelines.judge import judge as judge_pipeline

        outcome = run_pipeline(judge_pipeline, options, db_option(db), sys.stderr.isatty() and not as_json)
        if as_json:
            say(json.dumps(_outcome_json(outcome), indent=2))
        else:
            print_plan(outcome.plan)
            say(outcome.message)
            if outcome.run_id:
                say(f"run {outcome.run_id}")
        _fail_if_every_call_failed(outcome.stats)


def _fail_if_every_call_failed(stats) -> None:
    """A run that asked and got nothing but failures ends with an `error:` line and exit status 1."""
    if stats.errors == 0 or stats.ok + stats.unparsed > 0:
        return
    reasons = ", ".join(f"{reason} x{count}" for reason, count in sorted(stats.retry_reasons.items()))
    say(
        f"error: every judge call failed ({stats.errors} samples from {stats.requests} requests"
        + (f"; retried for {reasons}" if reasons else "")
        + "); the failures are stored as `error` "
        "judgments, and a re-run asks for them again",
        err=True,
    )
    raise typer.Exit(1)


def _outcome_json(outcome) -> dict:
    """A judge run's outcome as `--json` prints it (the stats with their sample total)."""
    out = asdict(outcome)
    out["stats"]["samples"] = outcome.stats.samples
    return out


def _judge_adaptively(options: JudgeOptions, db: Optional[Path], as_json: bool) -> None:
    from eqarena.pipelines.judge import judge_adaptive as judge_adaptive_pipeline

    result = run_pipeline(judge_adaptive_pipeline, options, db_option(db))
    if as_json:
        say(json.dumps(asdict(result), indent=2))
        return
    if result.ranking:
        say(f"{result.judge} on {options.dataset}: NE ranking {' > '.join(result.ranking)}")
    say(result.message)
    say(f"run {result.run_id}")
