"""`eqarena rate`, `eqarena report` and `eqarena methods`: ratings from stored judgments, and their report."""

from __future__ import annotations

import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.config_file import CONFIG
from eqarena.cli.output import (
    print_group_ratings,
    print_methods,
    print_model_ratings,
    said_if_interrupted,
    say,
    warehouse_file,
)
from eqarena.cli.support import (
    BOOTSTRAP_HELP,
    BY,
    CATEGORY_HELP,
    DATASET_HELP,
    DB_HELP,
    METHODS_HELP,
    MISSING_HELP,
    ORDERS_HELP,
    OUT_HELP,
    RUN_HELP,
    WAIT,
    checked_dataset,
    cli_errors,
    db_option,
    options_errors,
    run_pipeline,
    split_list,
)
from eqarena.exceptions import OptionError
from eqarena.options import DEFAULT_OUT_DIR, BootstrapOptions, PromptActions, RateOptions

PROMPT_GROUPS_HELP = (
    "The prompt player's actions: each prompt (prompts), or groups of prompts whose payoffs come from every "
    "battle of the group, smoothed by a Bradley-Terry fit per group shrunk towards the global fit: all (one "
    "group), category, cluster, or a battle log's language, turn, tag (Chatbot Arena's category_tag). auto: "
    "per prompt, unless the judged cells are too sparse for that (a battle log: under 10% judged and over "
    "20M cells), then the first of tag, category, language, cluster the dataset has, else all; it says which."
)
BOOTSTRAP_TIME_HELP = (
    "Seconds the bootstrap's replicates may take (0: no limit). It says what the replicates will cost before "
    "it starts, plans fewer when they would take longer, and stops at the limit with the replicates done."
)

RATE_INTERRUPTED = "rate interrupted: nothing written (a rate run is stored whole, at its end)"


def rate_options(
    methods: Optional[str],
    missing: str,
    orders: str = "both",
    bootstrap: int = 200,
    seed: int = 0,
    judges: Optional[list[str]] = None,
    dataset: Optional[str] = None,
    settle: float = BootstrapOptions.settle,
    baseline: Optional[str] = None,
    style_control: bool = False,
    category: Optional[str] = None,
    by: Optional[str] = None,
    prompt_groups: str = RateOptions.prompt_groups.value,
    bootstrap_time: float = BootstrapOptions.time_limit,
    dask_address: Optional[str] = None,
) -> RateOptions:
    """RateOptions from the flags, checked before any work starts (one-line error, exit 1)."""
    from eqarena.methods import parse_methods

    with options_errors():
        return RateOptions(
            dataset=dataset,
            judges=tuple(split_list(judges)),
            methods=parse_methods(methods) if methods else None,
            missing=missing,
            orders=orders,
            bootstrap=BootstrapOptions(
                replicates=bootstrap, seed=seed, settle=settle, time_limit=bootstrap_time, dask_address=dask_address
            ),
            baseline=baseline,
            style_control=style_control,
            category=category,
            by=by,
            prompt_groups=prompt_groups,
        )


@cli_errors()
def rate(
    judge: Optional[list[str]] = typer.Option(
        None,
        "--judge",
        "-j",
        help="Judge id(s) to pool, repeatable "
        "(e.g. prd:gpt4; all-prd = the five PRD judges). Default: every "
        "judge with judgments on the dataset.",
    ),
    methods: Optional[str] = typer.Option(None, "--methods", "-m", help=METHODS_HELP),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=DATASET_HELP),
    missing: str = typer.Option("refuse", "--missing", help=MISSING_HELP),
    bootstrap: int = typer.Option(BootstrapOptions.replicates, "--bootstrap", min=0, help=BOOTSTRAP_HELP),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    settle: float = typer.Option(
        BootstrapOptions.settle,
        "--settle",
        min=0.0,
        help="Stop the equilibria's bootstrap once their interval bounds moved, in root mean square over the "
        "models, by less than this fraction of the median interval width over 24 replicates (from 48 on; "
        "0: always --bootstrap replicates).",
    ),
    orders: str = typer.Option("both", "--orders", help=ORDERS_HELP),
    baseline: Optional[str] = typer.Option(
        None,
        "--baseline",
        help="Rate by `winrate` against this model "
        "(percent win rate, ties half). Default for winrate: the model in "
        "the most judgments (an arena-hard-auto import's baseline).",
    ),
    style_control: bool = typer.Option(
        False,
        "--style-control",
        help="Also rate by `bt-style`: Bradley-Terry "
        "with the answers' length and markdown counts as covariates (needs "
        "the responses' texts); its style coefficients go in the run's parameters.",
    ),
    category: Optional[str] = typer.Option(None, "--category", metavar="NAME", help=CATEGORY_HELP),
    by: Optional[str] = BY,
    prompt_groups: PromptActions = typer.Option(RateOptions.prompt_groups, "--prompt-groups", help=PROMPT_GROUPS_HELP),
    bootstrap_time: float = typer.Option(
        BootstrapOptions.time_limit, "--bootstrap-time", min=0.0, metavar="SECONDS", help=BOOTSTRAP_TIME_HELP
    ),
    dask_address: Optional[str] = typer.Option(
        None,
        "--dask-address",
        metavar="ADDRESS",
        help=(
            "Solve the bootstrap's replicates on the Dask scheduler at ADDRESS (e.g. tcp://host:8786; its workers "
            "need eqarena installed) instead of this machine's worker processes: the same replicates."
        ),
    ),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
    config: Optional[Path] = CONFIG,
) -> None:
    """Rate models and prompts from stored judgments (every method chosen); writes ratings under a new run_id."""
    options = rate_options(
        methods,
        missing,
        orders,
        bootstrap,
        seed,
        judge,
        settle=settle,
        baseline=baseline,
        style_control=style_control,
        category=category,
        by=by,
        prompt_groups=prompt_groups.value,
        bootstrap_time=bootstrap_time,
        dask_address=dask_address,
    )
    options = replace(options, dataset=checked_dataset(dataset, db))
    from eqarena.runtime.worker_count import planned_bootstrap_workers
    from eqarena.runtime.worker_pool import workers_ahead

    with workers_ahead(planned_bootstrap_workers(options)):  # they import while the pipeline's modules load
        from eqarena.warehouse.tensor import IncompleteTensorError

        with cli_errors(IncompleteTensorError), said_if_interrupted(RATE_INTERRUPTED):
            from eqarena.pipelines.rate import rate as rate_pipeline

            result = run_pipeline(rate_pipeline, options, db_option(db))
    say(
        f"u_king {result.shape[0]} prompts x {result.shape[1]} models, judges {', '.join(result.judges)}; "
        f"{result.dropped}"
    )
    print_model_ratings(db, result.run_id)
    for note in result.notes:
        say(note)
    for method, value in result.exploitability.items():
        say(f"{method}: exploitability {value:.2e}")
    if options.by is not None:
        print_group_ratings(db, result.run_id)
    say(f"run {result.run_id} written to {warehouse_file(db)}")


@cli_errors()
def report(
    run: Optional[str] = typer.Option(None, "--run", help=RUN_HELP),
    out: Path = typer.Option(Path(DEFAULT_OUT_DIR), "--out", help=OUT_HELP),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Write one self-contained HTML report of a rate run."""
    from eqarena.pipelines.report import report as report_pipeline

    path = run_pipeline(report_pipeline, run, str(out), db_option(db))
    say(f"report: {Path(path).resolve()}")


@cli_errors()
def export(
    run: Optional[str] = typer.Option(None, "--run", help=RUN_HELP),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", "-d", help="Without --run: the latest finished rate run of this dataset."
    ),
    fmt: str = typer.Option("csv", "--format", "-f", help="csv, json or markdown."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="File to write (default: standard output)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Write a rate run's model ratings as a leaderboard to share: one row per model in the order of the
    method the answer leads with (as `rate` prints it); per method its rank, rating, 95% interval and
    P(top 1) (docs: eqarena/report/export.py)."""
    from eqarena import warehouse
    from eqarena.exceptions import NotFoundError
    from eqarena.report.diagnosis import diagnose
    from eqarena.report.directory import write_whole
    from eqarena.report.evidence import read_evidence
    from eqarena.report.export import EXPORT_FORMATS, export_text
    from eqarena.warehouse.ratings import latest_rate_run_id, read_rating_table, read_run

    with options_errors():
        if fmt not in EXPORT_FORMATS:
            raise OptionError(f"--format must be one of {', '.join(EXPORT_FORMATS)}; got {fmt!r}")
    with closing(warehouse.connect(db, read_only=True)) as con:
        run_id = run or latest_rate_run_id(con, dataset)
        if run_id is None:
            where = f" of dataset {dataset!r}" if dataset else ""
            raise NotFoundError(f"no finished rate run{where} in {warehouse_file(db)}: `eqarena rate` makes one")
        rows = read_rating_table(con, run_id)
        if rows.is_empty():
            raise NotFoundError(f"run {run_id!r} has no model ratings (is it a finished rate run?)")
        dataset_name = read_run(con, run_id).parameters.get("dataset", "")
        lead = diagnose(read_evidence(con, run_id, dataset_name)).lead
        text = export_text(rows, fmt, run_id, dataset_name, lead)
    if out is None:
        sys.stdout.write(text)
        return
    again = f"eqarena export --run {run_id} --format {fmt} --out {out}"
    say(f"{fmt}: {write_whole(out, text, run_id, 'export', again).resolve()}", err=True)


def methods() -> None:
    """List the rating methods `--methods` takes (the method registry)."""
    print_methods()
