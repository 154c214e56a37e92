"""`eqarena run`, `eqarena refresh` and `eqarena serve`: the main job (ingest → judge → rate → analyses
→ report), once, incrementally, or on a schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.config_file import CONFIG
from eqarena.cli.output import print_group_ratings, print_model_ratings, said_if_interrupted, say
from eqarena.cli.rating import rate_options
from eqarena.cli.support import (
    BOOTSTRAP_HELP,
    BY,
    DB_HELP,
    METHODS_HELP,
    MISSING_HELP,
    OUT_HELP,
    WAIT,
    cli_errors,
    db_option,
    options_errors,
    run_pipeline,
    split_list,
)
from eqarena.exceptions import OptionError
from eqarena.options import (
    DEFAULT_DATASET,
    DEFAULT_JUDGE,
    DEFAULT_OUT_DIR,
    AnalysesOptions,
    BootstrapOptions,
    MainJobOptions,
    as_parameters,
)

OUT = typer.Option(Path(DEFAULT_OUT_DIR), "--out", help=OUT_HELP)
SOURCE = typer.Option(DEFAULT_DATASET, "--dataset", "-d", help="Bundled dataset name or directory.")
JUDGE = typer.Option(
    DEFAULT_JUDGE,
    "--judge",
    "-j",
    help="`prd:<judge>` or all-prd (recorded PRD judgments, no "
    "API calls), or a provider spec such as openai:MODEL (judges missing cells only).",
)
METHODS = typer.Option(None, "--methods", "-m", help=METHODS_HELP)
MISSING = typer.Option("refuse", "--missing", help=MISSING_HELP)
BOOTSTRAP = typer.Option(BootstrapOptions.replicates, "--bootstrap", min=0, help=BOOTSTRAP_HELP)
SAMPLES = typer.Option(
    4, "--samples-per-order", min=1, help="Provider judge only: samples with each model as assistant A (paper: 4 + 4)."
)
MAX_COST = typer.Option(None, "--max-cost", help="Provider judge only: stop judging at this many USD.")
ANALYSES = typer.Option(
    "clones,risk",
    "--analyses",
    help="Robustness analyses of new ratings, comma-separated: "
    "clones (adversarial prompt copies), risk (risk dominance among many Nash equilibria), "
    "or none. See `eqarena analyze --help`.",
)
YES = typer.Option(
    False,
    "--yes",
    "-y",
    help="Provider judge only: judge even when the plan's estimated cost is "
    "above $1 and no --max-cost caps it (the plan is printed first either way).",
)

# What an interrupted main job (run, refresh) kept: its rate run is stored whole, at its end
KEPT_ON_INTERRUPT = (
    "interrupted: no rate run written (one is stored whole, at its end); the ingest and the judgments made "
    "so far are kept"
)


def main_job_options(
    source: str,
    judge: str,
    out: Path,
    methods: Optional[str],
    missing: str,
    bootstrap: int,
    samples_per_order: int,
    max_cost: Optional[float],
    analyses: str,
    yes: bool,
    by: Optional[str] = None,
) -> MainJobOptions:
    """MainJobOptions from the flags, checked before any work starts (one-line error, exit 1)."""
    rate = rate_options(methods, missing, bootstrap=bootstrap, by=by)
    with options_errors():
        kinds = [a.lower() for a in split_list([analyses]) if a.lower() != "none"]
        return MainJobOptions(
            source=source,
            judge=judge,
            out_dir=str(out),
            rate=rate,
            analyses=AnalysesOptions(run=tuple(kinds)),
            samples_per_order=samples_per_order,
            max_cost=max_cost,
            yes=yes,
        )


@cli_errors()
def run(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
    out: Path = OUT,
    dataset: str = SOURCE,
    judge: str = JUDGE,
    methods: Optional[str] = METHODS,
    missing: str = MISSING,
    bootstrap: int = BOOTSTRAP,
    samples_per_order: int = SAMPLES,
    max_cost: Optional[float] = MAX_COST,
    analyses: str = ANALYSES,
    yes: bool = YES,
    by: Optional[str] = BY,
    config: Optional[Path] = CONFIG,
) -> None:
    """The main job: ingest (idempotent) → judge → rate → analyses → report; prints where the results are."""
    options = main_job_options(
        dataset, judge, out, methods, missing, bootstrap, samples_per_order, max_cost, analyses, yes, by
    )

    from eqarena.runtime.worker_count import planned_main_job_workers
    from eqarena.runtime.worker_pool import workers_ahead

    with (
        cli_errors(),
        workers_ahead(planned_main_job_workers(options)),
        said_if_interrupted(f"run {KEPT_ON_INTERRUPT}"),
    ):
        from eqarena.pipelines.run import main_job as main_job_pipeline

        summary = run_pipeline(main_job_pipeline, options, db_option(db))
    print_model_ratings(db, summary.rate_run_id)
    if options.rate.by is not None:
        print_group_ratings(db, summary.rate_run_id)
    for lines in summary.analyses.values():
        for line in lines:
            say(line)
    say(f"tensor: {summary.dropped}")
    say(f"DuckDB warehouse: {summary.db_path}  (e.g. SELECT * FROM latest_model_ratings)")
    say(f"HTML report:      {summary.report_path}")


@cli_errors()
def refresh(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
    out: Path = OUT,
    dataset: str = SOURCE,
    judge: str = JUDGE,
    methods: Optional[str] = METHODS,
    missing: str = MISSING,
    bootstrap: int = BOOTSTRAP,
    samples_per_order: int = SAMPLES,
    max_cost: Optional[float] = MAX_COST,
    analyses: str = ANALYSES,
    yes: bool = YES,
    by: Optional[str] = BY,
    config: Optional[Path] = CONFIG,
) -> None:
    """The main job, incrementally: only new prompts, models and missing judge cells are judged; ratings,
    analyses and the report are recomputed only when their inputs changed. For schedules (see `serve`)."""
    options = main_job_options(
        dataset, judge, out, methods, missing, bootstrap, samples_per_order, max_cost, analyses, yes, by
    )

    with cli_errors(), said_if_interrupted(f"refresh {KEPT_ON_INTERRUPT}"):
        from eqarena.pipelines.refresh import refresh as refresh_pipeline

        summary = run_pipeline(refresh_pipeline, options, db_option(db), wait)
    if summary.new_rate_run:  # read while the refresh held the warehouse: another run may write it now
        print_model_ratings(db, summary.rate_run_id)
        if options.rate.by is not None:
            print_group_ratings(db, summary.rate_run_id)
    say(summary.line())


@cli_errors()
def serve(
    cron: str = typer.Option(
        "0 3 * * *", "--cron", help="When to refresh (cron syntax, UTC), e.g. `0 3 * * *` for 03:00 every night."
    ),
    name: str = typer.Option(
        "eqarena-refresh", "--name", help="Deployment name (trigger it with `prefect deployment run 'refresh/NAME'`)."
    ),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
    out: Path = OUT,
    dataset: str = SOURCE,
    judge: str = JUDGE,
    methods: Optional[str] = METHODS,
    bootstrap: int = BOOTSTRAP,
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Provider judge only: USD cap per run."),
    analyses: str = typer.Option(
        "clones,risk", "--analyses", help="Analyses of a new rate run (clones, risk or none)."
    ),
) -> None:
    """Serve `refresh` as a Prefect deployment on this machine: runs on the --cron schedule and whenever it
    is triggered from the Prefect UI or `prefect deployment run`; until stopped (Ctrl-C). Point
    PREFECT_API_URL at a Prefect server (`prefect server start`) to keep runs, logs and schedules in its UI."""
    from prefect.client.schemas.schedules import CronSchedule

    from eqarena.flows import refresh_flow
    from eqarena.orchestration.prefect_api import TemporaryApiError, ensure_prefect_api

    options = main_job_options(dataset, judge, out, methods, "refuse", bootstrap, 4, max_cost, analyses, False)
    with options_errors():
        try:
            CronSchedule(cron=cron)
        except ValueError:
            raise OptionError(f"--cron {cron!r} is not a cron expression (e.g. '0 3 * * *')") from None
    with cli_errors(TemporaryApiError):
        if ensure_prefect_api():
            say(
                "no PREFECT_API_URL: serving with a temporary Prefect API that stops with this command "
                "(start `prefect server start` and set PREFECT_API_URL to keep runs and a UI)",
                err=True,
            )
    refresh_flow.serve(
        name=name,
        cron=cron,
        parameters={"options": as_parameters(options), "db": db_option(db)},
        description=f"eqarena refresh of {dataset} by {judge}, scheduled '{cron}' (UTC)",
    )
