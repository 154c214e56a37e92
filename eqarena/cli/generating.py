"""`eqarena generate`: a model's answers to a dataset's prompts (plan, caps, limits), for the judge to
compare; `eqarena refresh` then judges only the cells involving the new model."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.output import say
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
)
from eqarena.options import ANSWER_MAX_TOKENS, GenerateOptions, GenerationOptions, RetryPolicy, RunLimits, SpendCaps

# The option groups of `eqarena generate --help` (as `eqarena judge --help`'s).
PANEL_MODEL = "Model and prompts"
PANEL_PLAN_AND_COST = "Plan and cost"
PANEL_REQUESTS = "Requests"
PANEL_BATCH = "Batch API"


@cli_errors()
def generate(
    model: str = typer.Option(
        ...,
        "--model",
        rich_help_panel=PANEL_MODEL,
        help="Who answers: openai:MODEL, "
        "gemini:MODEL or openai-compatible:MODEL@URL (vLLM, llama.cpp, Ollama; keys from "
        "OPENAI_API_KEY / GEMINI_API_KEY).",
    ),
    as_name: Optional[str] = typer.Option(
        None,
        "--as",
        metavar="NAME",
        rich_help_panel=PANEL_MODEL,
        help="Model id the answers are stored under (default: the spec's model name).",
    ),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", rich_help_panel=PANEL_MODEL, help=DATASET_HELP),
    prompts: Optional[int] = typer.Option(
        None,
        "--prompts",
        rich_help_panel=PANEL_MODEL,
        min=1,
        help="Answer the first N prompts (natural order, as `judge --prompts`).",
    ),
    plan: bool = typer.Option(
        False,
        "--plan",
        rich_help_panel=PANEL_PLAN_AND_COST,
        help="Print the prompts still unanswered and the tokens and cost they would take at most; send nothing.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan (or the run's outcome) as JSON."),
    max_cost: Optional[float] = typer.Option(
        None,
        "--max-cost",
        rich_help_panel=PANEL_PLAN_AND_COST,
        min=0,
        help="Stop before spending more USD (each answer counted at --max-tokens until its usage is known).",
    ),
    max_calls: Optional[int] = typer.Option(
        None, "--max-calls", rich_help_panel=PANEL_PLAN_AND_COST, min=0, help="Stop after asking this many prompts."
    ),
    prices: Optional[Path] = typer.Option(
        None,
        "--prices",
        rich_help_panel=PANEL_PLAN_AND_COST,
        help="TOML price file overriding eqarena/llm/prices.toml.",
    ),
    max_tokens: int = typer.Option(
        ANSWER_MAX_TOKENS,
        "--max-tokens",
        rich_help_panel=PANEL_REQUESTS,
        min=1,
        help="Output tokens per answer at most (arena-hard-auto: 4096).",
    ),
    temperature: Optional[float] = typer.Option(
        None, "--temperature", rich_help_panel=PANEL_REQUESTS, help="Sampling temperature (default: the provider's)."
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
        None,
        "--tpm",
        rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES,
        help="Tokens per minute at most (estimated: prompt + --max-tokens).",
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
    batch: bool = typer.Option(
        False,
        "--batch",
        rich_help_panel=PANEL_BATCH,
        help="Use the OpenAI Batch API "
        "(openai: / openai-compatible: only; half price, up to 24 h); resumable: a killed "
        "run's job is collected by the next run, never paid twice.",
    ),
    batch_poll: float = typer.Option(
        30.0,
        "--batch-poll",
        rich_help_panel=PANEL_BATCH,
        min=0,
        metavar="SECONDS",
        help="Seconds between batch status checks.",
    ),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Answer the prompts of a dataset with a model (arena-hard-auto's gen_answer), storing each answer as it
    arrives; only prompts it has not answered are asked, so a re-run continues. With --batch the prompts go
    to an OpenAI Batch API job (half price, up to 24 h; resumable). Then `eqarena refresh` judges the new
    model against the others and rates it."""
    from eqarena.generation.setup import MODEL_OPTION
    from eqarena.llm.providers import LIVE_PROVIDERS, parse_judge_spec

    parse_judge_spec(model, MODEL_OPTION, LIVE_PROVIDERS)  # a malformed spec fails first
    with options_errors():
        options = GenerateOptions(
            model=model,
            model_id=as_name,
            prompts=prompts,
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
            batch=batch,
            batch_poll_s=batch_poll,
        )
    options = replace(options, dataset=checked_dataset(dataset, db))
    if plan:  # only reads the warehouse: no Prefect, no provider SDK
        from eqarena.tasks.generate_plan import plan_generate_run

        summary = plan_generate_run(options, db_option(db)).plan
        if as_json:
            say(json.dumps(asdict(summary), indent=2))
        else:
            for line in summary.lines():
                say(line)
        return
    from eqarena.pipelines.generate import generate as generate_pipeline

    outcome = run_pipeline(generate_pipeline, options, db_option(db), sys.stderr.isatty() and not as_json)
    if as_json:
        say(json.dumps(asdict(outcome), indent=2))
        return
    for line in outcome.plan.lines():
        say(line)
    say(outcome.message)
    if outcome.run_id:
        say(f"run {outcome.run_id}")
