"""What every `eqarena` command shares: one-line error exits, quiet Prefect logging, common help texts."""

from __future__ import annotations

import gc
import os
import traceback
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import duckdb
import typer

from eqarena.exceptions import EqarenaError, exception_chain
from eqarena.messages import bounded
from eqarena.options import RetryPolicy
from eqarena.warehouse.connection import (
    DEFAULT_LOCK_WAIT_S,
    WAIT_ENV_VAR,
    unusable_warehouse,
)

T = TypeVar("T")

DB_HELP = "DuckDB warehouse file (default: $EQARENA_DB, else eqarena.duckdb)."
WAIT_HELP = (
    f"Seconds to wait while another process holds the warehouse (a reader, or another run writing) "
    f"before giving up (default: ${WAIT_ENV_VAR}, else {DEFAULT_LOCK_WAIT_S:g}). Work is computed "
    f"first; only the final write waits."
)

# Errors a user can fix (every EqarenaError: bad input, a busy, damaged or unusable database, a report
# directory that cannot be written, ...; and a missing file): shown as one line on stderr, exit 1.
KNOWN_ERRORS: tuple[type[BaseException], ...] = (EqarenaError, FileNotFoundError)


@contextmanager
def cli_errors(*extra: type[BaseException]) -> Iterator[None]:
    """Turn KNOWN_ERRORS (and `extra`), and DuckDB errors that say the file is unusable, into one
    bounded line `error: <message>` on stderr (eqarena/messages.py) and exit code 1, without a
    traceback. Use as a decorator under @app.command() or as a `with` block."""
    try:
        yield
    except typer.Exit:  # an inner cli_errors already reported (click's Exit is a RuntimeError)
        raise
    except (*KNOWN_ERRORS, *extra) as exc:
        _exit_with(exc, exc)
    except duckdb.Error as exc:
        damage = unusable_warehouse(exc)
        if damage is None:
            raise
        _exit_with(exc, damage)


def _exit_with(exc: BaseException, shown: BaseException) -> None:
    typer.echo(f"error: {bounded(shown)}", err=True)
    release_frames(exc)
    raise typer.Exit(1) from None


def apply_wait(wait: float | None) -> float | None:
    """Make every warehouse connection of this command (and of its worker processes) wait up to
    `wait` seconds for the file's lock (eqarena/warehouse/connection.py); None keeps the default.
    The --wait option's callback, so it takes effect as the command line is parsed."""
    if wait is not None:
        os.environ[WAIT_ENV_VAR] = f"{wait:g}"
    return wait


WAIT = typer.Option(None, "--wait", min=0.0, metavar="SECONDS", callback=apply_wait, help=WAIT_HELP)

# The provider commands' (judge, generate) panel of rate limits and retries, and an option they share.
PANEL_RATE_LIMITS_AND_RETRIES = "Rate limits and retries"
MAX_RETRY_AFTER = typer.Option(
    RetryPolicy.max_retry_after_s,
    "--max-retry-after",
    rich_help_panel=PANEL_RATE_LIMITS_AND_RETRIES,
    min=0,
    help="Longest wait in seconds a server's Retry-After is obeyed for; a longer one is cut to this. "
    "Waits over 5 s are shown with a countdown.",
)


def release_frames(exc: BaseException) -> None:
    """Drop the tracebacks of a failed command's errors, once reported, and free what their frames held:
    a DuckDB connection (or a jaxlib array) still alive at interpreter exit makes its bindings print a
    page of "nanobind: leaked instance" warnings after the error message. Whoever keeps an exception
    keeps its frames (Prefect keeps a failed task's until exit, eqarena/orchestration/prefect_exit.py),
    and clearing them is not enough: in Python 3.11 a cleared frame still holds its function, and a
    closure over a judge runner holds the runner's connection."""
    for error in exception_chain(exc):
        traceback.clear_frames(error.__traceback__)
        error.__traceback__ = None
    gc.collect()


@contextmanager
def quiet_prefect() -> Iterator[None]:
    """Run flows from the command line: Prefect's console output kept off the terminal
    (eqarena/orchestration/console.py), flows reporting to the configured Prefect API, else to a
    temporary one that stops with the command (eqarena/orchestration/prefect_api.py)."""
    from eqarena.orchestration.console import prefect_console_quiet
    from eqarena.orchestration.prefect_api import TemporaryApiError, ensure_prefect_api

    with prefect_console_quiet():
        with cli_errors(TemporaryApiError):
            ensure_prefect_api()
        yield


def run_pipeline(pipeline: Callable[..., T], *args) -> T:
    """Run a command's `pipeline` with `args`: as plain Python (Prefect not even imported), or as the
    command's Prefect flow (eqarena/flows.py, the command table) when a Prefect API is configured
    (eqarena/orchestration/steps.py)."""
    from eqarena.orchestration.steps import prefect_wanted

    with options_errors():
        as_flow = prefect_wanted()
    if not as_flow:
        return pipeline(*args)
    from eqarena.flows import flow_for  # imports Prefect, whose console handlers quiet_prefect then quiets

    flow = flow_for(pipeline)
    with quiet_prefect():
        return flow(*args)


DATASET_HELP = "Dataset name in the warehouse (default: its only dataset, if it holds exactly one)."
SOURCE_HELP = (
    "A bundled dataset (vicuna80, arena-hard-v0.1) or a directory: arena-hard layout (question.jsonl + "
    "model_answer/*.jsonl, new or old layout) or a bundle (dataset.json)."
)
METHODS_HELP = (
    "Comma-separated names of the method registry (`eqarena methods` lists them): bt (Bradley-Terry), "
    "ne, cce (affinity-entropy selected NE / CCE), ne-shannon, cce-shannon (uniform target). "
    "Default: its default methods."
)
MISSING_HELP = (
    "What to do with an incomplete tensor: refuse (default), drop-prompts (drop prompts with a missing "
    "cell), drop-models (drop the models in most missing cells until complete) or impute (fill each "
    "missing cell with the pair's prompt-wise Bradley-Terry prediction; the report shows how much of "
    "each rating rests on imputed cells)."
)
BOOTSTRAP_HELP = (
    "Bootstrap resamples, at most (seeded by --seed): Bradley-Terry intervals and, for every "
    "equilibrium method, rating intervals and rank / top-1 / top-3 probabilities over prompts and "
    "over judge samples (tables rating_intervals, rank_probabilities); the equilibria's stop "
    "earlier once their intervals settle (rate --settle); 0 turns them off."
)
ORDERS_HELP = (
    "both: a (prompt, pair) cell needs judgments with each model shown first (position balance); any: "
    "one order is enough (battle logs, whose positions were randomised)."
)
CATEGORY_HELP = (
    "Rate only the prompts of this category (table prompts): a normal rate run of those prompts, "
    "the category stored with it."
)
BY_HELP = (
    "category or cluster: after the usual run, rate each category (or cluster) of the prompts on its "
    "own by the same methods and --missing policy: point ratings, no per-category bootstrap or "
    "intervals (rate --category NAME gives one category's). Categories under 2 prompts, or whose "
    "tensor --missing refuses, are skipped with the reason. Table category_ratings."
)
BY = typer.Option(None, "--by", metavar="GROUPING", help=BY_HELP)
RUN_HELP = "Rate run id (default: the latest finished one)."
OUT_HELP = "Directory of the HTML report."


def db_option(db) -> str | None:
    """The --db value as flows take it."""
    return str(db) if db else None


def checked_dataset(dataset: str | None, db) -> str:
    """`dataset` once the warehouse is seen to hold it, or with none given, the warehouse's only
    dataset (said on stderr): a wrong name fails here, before any flow starts."""
    from contextlib import closing

    from eqarena import warehouse
    from eqarena.warehouse.catalog import choose_dataset

    with cli_errors(), closing(warehouse.connect(db, read_only=True)) as con:
        name = choose_dataset(con, dataset)
    if dataset is None:
        typer.echo(f"dataset: {name} (the only one in the warehouse)", err=True)
    return name


def split_list(values) -> list[str]:
    """Repeated and comma-separated values ('a,b' 'c') as one list."""
    return [v.strip() for item in (values or []) if item is not None for v in str(item).split(",") if v.strip()]


@contextmanager
def options_errors() -> Iterator[None]:
    """Invalid option values (OptionError from the options' checks) as one `error:` line, exit 1."""
    with cli_errors():
        yield
