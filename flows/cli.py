"""The `eqarena` command line. Each command parses flags and calls a flow; no logic lives here."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from flows.cli_analyze import analyze_app
from flows.cli_support import DB_HELP, cli_errors, quiet_prefect, release_frames

# Prefect reads these when first imported (inside the commands): without a Prefect server it starts a
# temporary local one, which may take long on a busy machine; it must never phone home.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

app = typer.Typer(
    name="eqarena",
    help="Game-theoretic ratings of LLMs and prompts from pairwise LLM-judge evaluations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(analyze_app, name="analyze")


def _checked_dataset(dataset: Optional[str], db: Optional[Path]) -> str:
    """`dataset` once the warehouse is seen to hold it, or with none given, the warehouse's only
    dataset (said on stderr): a wrong name fails here, before any flow starts."""
    import warehouse
    from warehouse.catalog import choose_dataset

    with cli_errors(LookupError):
        con = warehouse.connect(db, read_only=True)
        try:
            name = choose_dataset(con, dataset)
        finally:
            con.close()
    if dataset is None:
        typer.echo(f"dataset: {name} (the only one in the warehouse)", err=True)
    return name


@app.command()
@cli_errors()
def ingest(
    dataset: str = typer.Option("vicuna80", "--dataset", "-d", help="A bundled dataset (vicuna80, "
                                "arena-hard-v0.1) or a directory: arena-hard layout (question.jsonl + "
                                "model_answer/*.jsonl, new or old layout) or a bundle (dataset.json)."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite stored rows whose content changed."),
    name: Optional[str] = typer.Option(None, "--name", help="Dataset name (default: the bundle's name or "
                                       "the directory's name)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Load prompts, answers (and recorded judgments) into the warehouse; idempotent, one transaction."""
    from flows.ingest import ingest_flow

    with quiet_prefect():
        summary = ingest_flow(dataset=dataset, replace=replace, db=str(db) if db else None, name=name)
    _print_changes("ingest", summary)


def _print_changes(kind: str, summary) -> None:
    """The per-table new / unchanged / changed counts of an ingest or import, and what changed."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{kind} {summary.dataset}", caption=f"from {summary.source}")
    for column in ("table", "new", "unchanged", "changed", "replaced"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for t in summary.tables:
        table.add_row(t.table, f"{t.new:,}", f"{t.unchanged:,}", f"{t.changed:,}", f"{t.replaced:,}")
    Console().print(table)
    for t in summary.tables:
        if t.changed:
            action = "replaced" if summary.replace else "kept the stored version (use --replace to overwrite)"
            keys = "; ".join("/".join(map(str, k)) for k in t.changed_keys)
            more = f" and {t.changed - len(t.changed_keys)} more" if t.changed > len(t.changed_keys) else ""
            typer.secho(f"{t.table}: {t.changed:,} changed, {action}: {keys}{more}", fg="yellow")
    typer.echo(f"{summary.dataset}: {summary.new:,} new, {summary.unchanged:,} unchanged, "
               f"{summary.changed:,} changed (run {summary.run_id})")


_IMPORT_HELP = """Import judgments or scores made elsewhere (idempotent, one transaction; a bad row
stops the import at its file:line and writes nothing).

FORMAT is one of:

- arena-hard-auto: model_judgment/<judge>/<model>.jsonl files (a file, a judge folder or model_judgment/);
  both games against the baseline, verdict labels A>>B ... B>>A, judge arena-hard-auto:<judge>.

- battles: Chatbot-Arena battle logs (JSON, JSONL, CSV, Parquet): model_a, model_b, winner, optional
  question_id and turn.

- pairwise: a long table (CSV, TSV, Parquet, JSONL, JSON): prompt_id, model_a, model_b, score in [-1, 1]
  or verdict, optional judge, sample, prompt_text.

- scores: per-prompt scores, long (prompt_id, model, score) or wide (prompt_id + a column per model);
  payoff of a over b = clip((s_a - s_b) / scale, -1, 1) (--payoff sign: who scored higher).

Then rate as usual, e.g. `eqarena rate --dataset NAME --missing impute` when pairs are sparse."""


@app.command(name="import", help=_IMPORT_HELP)
@cli_errors()
def import_data(
    fmt: str = typer.Argument(..., metavar="FORMAT", help="arena-hard-auto | battles | pairwise | scores"),
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Files (or, for arena-hard-auto, folders)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Dataset name (default: the folder "
                                          "above model_judgment/ for arena-hard-auto, else the first file's name)."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Judge id for battles, pairwise rows without a "
                                        "judge column, and scores (default: <format>:<file name>)."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="arena-hard-auto v0.1 files: the baseline "
                                           "model (default gpt-4-0314; v2.0 files name it)."),
    payoff: str = typer.Option("clip-diff", "--payoff", help="scores: clip-diff or sign."),
    scale: float = typer.Option(1.0, "--scale", help="scores: the score gap that counts as decisive "
                                "(e.g. 100 for percentages)."),
    replace: bool = typer.Option(False, "--replace", help="Overwrite stored rows whose content changed."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    from tasks.importers.scores import PAYOFFS
    from tasks.importing import FORMATS

    with cli_errors(ValueError):
        if fmt not in FORMATS:
            raise ValueError(f"FORMAT must be one of {', '.join(FORMATS)}; got {fmt!r}")
        if payoff not in PAYOFFS:
            raise ValueError(f"--payoff must be one of {', '.join(PAYOFFS)}; got {payoff!r}")
        if not scale > 0:
            raise ValueError(f"--scale must be positive; got {scale}")
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise FileNotFoundError(f"{missing[0]}: no such file or directory")
    from flows.importing import import_flow

    with quiet_prefect():
        result = import_flow(fmt=fmt, paths=[str(p) for p in paths], dataset=dataset, judge=judge,
                             baseline=baseline, payoff=payoff, scale=scale, replace=replace,
                             db=str(db) if db else None)
    for note in result.notes:
        typer.secho(f"note: {note}", fg="yellow", err=True)
    _print_changes("import", result.summary)
    typer.echo(f"judges: {', '.join(result.judges)}")


@app.command()
@cli_errors()
def status(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Counts of prompts, models, responses and judgments, and each judge's coverage (the share of
    prompt x ordered-model-pair cells with an ok judgment, over the datasets the judge covers)."""
    import warehouse
    from warehouse.status import warehouse_status

    con = warehouse.connect(db, read_only=True)
    try:
        found = warehouse_status(con)
    finally:
        con.close()
    if as_json:
        typer.echo(json.dumps(found.as_json()))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    totals = Table(title=f"warehouse {warehouse.resolve_db_path(db)}")
    for column in ("dataset", "prompts", "models", "responses", "judgments"):
        totals.add_column(column, justify="left" if column == "dataset" else "right")
    for d in found.datasets:
        totals.add_row(d.dataset, f"{d.prompts:,}", f"{d.models:,}", f"{d.responses:,}", f"{d.judgments:,}")
    totals.add_row("all", f"{found.prompts:,}", f"{found.models:,}", f"{found.responses:,}",
                   f"{sum(j.judgments for j in found.judges):,}", style="bold")
    console.print(totals)
    judges = Table(title="judges")
    for column in ("judge", "judgments", "ok", "complete cells", "coverage"):
        judges.add_column(column, justify="left" if column == "judge" else "right")
    for j in found.judges:
        judges.add_row(j.judge, f"{j.judgments:,}", f"{j.ok:,}", f"{j.complete_cells:,} / {j.cells:,}",
                       f"{j.coverage:.1%}")
    console.print(judges if found.judges else "no judgments yet")


_DATASET_HELP = "Dataset name in the warehouse (default: its only dataset, if it holds exactly one)."
_METHODS_HELP = ("Comma-separated: bt (Bradley-Terry), ne, cce (affinity-entropy selected NE / CCE), "
                 "ne-shannon, cce-shannon (uniform target).")
_YES_HELP = ("Provider judge only: judge even when the plan's estimated cost is above $1 and no --max-cost "
             "caps it (the plan is printed first either way).")
_MISSING_HELP = ("What to do with an incomplete tensor: refuse (default), drop-prompts (drop prompts with a "
                 "missing cell), drop-models (drop the models in most missing cells until complete) or impute "
                 "(fill each missing cell with the pair's prompt-wise Bradley-Terry prediction; the report "
                 "shows how much of each rating rests on imputed cells).")


def _print_model_ratings(db: Optional[Path], run_id: str, rows: Optional[list[dict]] = None) -> None:
    """A rich table of the run's model ranks and ratings per method (`rows`: the run's king ratings as
    read already, else read from the warehouse)."""
    from rich.console import Console
    from rich.table import Table

    import warehouse
    from tasks.rate import METHODS
    from warehouse.ratings import read_ratings

    if rows is None:
        con = warehouse.connect(db, read_only=True)
        try:
            rows = [r for r in read_ratings(con, run_id) if r["player"] == "king"]
        finally:
            con.close()
    methods = [m for m in METHODS if any(r["method"] == m for r in rows)]
    by = {(r["method"], r["action"]): r for r in rows}
    models = sorted({r["action"] for r in rows}, key=lambda m: [by.get((k, m), {}).get("rank", 99) for k in methods])
    table = Table(title=f"model ratings, run {run_id}", caption="rank (rating) per method")
    table.add_column("model")
    for m in methods:
        table.add_column(m, justify="right")
    for model in models:
        table.add_row(model, *[_rank_cell(m, by[(m, model)]) if (m, model) in by else "–" for m in methods])
    Console().print(table)


def _checked_options(methods: str, missing: str) -> list[str]:
    """Validate --methods and --missing before any work starts (one-line error, exit 1)."""
    from tasks.rate import parse_methods
    from warehouse.tensor import MISSING_POLICIES

    with cli_errors(ValueError):
        chosen = parse_methods(methods)
        if missing not in MISSING_POLICIES:
            raise ValueError(f"--missing must be one of {', '.join(MISSING_POLICIES)}; got {missing!r}")
    return chosen


def _rank_cell(method: str, row: dict) -> str:
    rating = f"{row['rating']:.0f}" if method == "bt" else f"{row['rating']:+.3f}"
    return f"{row['rank']} ({rating})"


@app.command()
@cli_errors()
def rate(
    judge: Optional[list[str]] = typer.Option(None, "--judge", "-j", help="Judge id(s) to pool, repeatable "
                                              "(e.g. prd:gpt4; all-prd = the five PRD judges). Default: every "
                                              "judge with judgments on the dataset."),
    methods: str = typer.Option("bt,ne,cce,ne-shannon,cce-shannon", "--methods", "-m", help=_METHODS_HELP),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=_DATASET_HELP),
    missing: str = typer.Option("refuse", "--missing", help=_MISSING_HELP),
    bootstrap: int = typer.Option(200, "--bootstrap", min=0, help="Bootstrap resamples (seeded by --seed): "
                                  "Bradley-Terry intervals and, for every equilibrium method, rating intervals "
                                  "and rank / top-1 / top-3 probabilities over prompts and over judge samples "
                                  "(tables rating_intervals, rank_probabilities); 0 turns them off."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    orders: str = typer.Option("both", "--orders", help="both: a (prompt, pair) cell needs judgments with each "
                               "model shown first (position balance); any: one order is enough (battle logs, "
                               "whose positions were randomised)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Rate models and prompts from stored judgments (BT, NE, CCE); writes ratings under a new run_id."""
    from flows.rate import rate_flow
    from warehouse.tensor import ORDER_RULES, IncompleteTensorError

    chosen = _checked_options(methods, missing)
    with cli_errors(ValueError):
        if orders not in ORDER_RULES:
            raise ValueError(f"--orders must be one of {', '.join(ORDER_RULES)}; got {orders!r}")
    judges = [j.strip() for item in (judge or []) for j in item.split(",") if j.strip()] or None
    dataset = _checked_dataset(dataset, db)
    with cli_errors(IncompleteTensorError, LookupError), quiet_prefect():
        result = rate_flow(db=str(db) if db else None, dataset=dataset, judges=judges, methods=chosen,
                           missing=missing, bootstrap=bootstrap, seed=seed, orders=orders)
    typer.echo(f"u_king {result.shape[0]} prompts x {result.shape[1]} models, judges {', '.join(result.judges)}; "
               f"{result.dropped}")
    _print_model_ratings(db, result.run_id)
    for method, value in result.exploitability.items():
        typer.echo(f"{method}: exploitability {value:.2e}")
    typer.echo(f"run {result.run_id} written to {_warehouse_path(db)}")


def _warehouse_path(db: Optional[Path]) -> Path:
    import warehouse

    return warehouse.resolve_db_path(db).resolve()


@app.command()
@cli_errors(LookupError)
def report(
    run: Optional[str] = typer.Option(None, "--run", help="Rate run id (default: the latest finished one)."),
    out: Path = typer.Option(Path("out"), "--out", help="Directory of the HTML report."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Write one self-contained HTML report of a rate run."""
    from flows.report import report_flow

    with quiet_prefect():
        path = report_flow(db=str(db) if db else None, run_id=run, out_dir=str(out))
    typer.echo(f"report: {Path(path).resolve()}")


# Options of the main-job commands (run, refresh).
_OUT = typer.Option(Path("out"), "--out", help="Directory of the HTML report.")
_SOURCE = typer.Option("vicuna80", "--dataset", "-d", help="Bundled dataset name or directory.")
_MAIN_JUDGE = typer.Option("prd:gpt4", "--judge", "-j", help="prd:<judge> or all-prd (recorded PRD judgments, "
                           "no API calls), or a provider spec such as openai:MODEL (judges missing cells only).")
_METHODS = typer.Option("bt,ne,cce,ne-shannon,cce-shannon", "--methods", "-m", help=_METHODS_HELP)
_MISSING = typer.Option("refuse", "--missing", help=_MISSING_HELP)
_SAMPLES = typer.Option(4, "--samples-per-order", min=1, help="Provider judge only: samples with each model as "
                        "assistant A (paper: 4 + 4).")
_MAX_COST = typer.Option(None, "--max-cost", help="Provider judge only: stop judging at this many USD.")
_ANALYSES = typer.Option("clones,risk", "--analyses", help="Robustness analyses of new ratings, comma-separated: "
                         "clones (adversarial prompt copies), risk (risk dominance among many Nash equilibria), "
                         "or none. See `eqarena analyze --help`.")
_YES = typer.Option(False, "--yes", "-y", help=_YES_HELP)


def _main_job_errors() -> tuple[type[BaseException], ...]:
    """The errors a main-job command reports as one line (bad input, a refused spend, a busy warehouse)."""
    from flows.judge_plan import SpendNotConfirmed
    from tasks.judge.plan import PlanError
    from tasks.judge.pricing import PriceError
    from tasks.judge.providers import FatalProviderError, JudgeSpecError
    from tasks.judge.templates import TemplateError
    from warehouse.tensor import IncompleteTensorError
    from warehouse.writer_lock import WarehouseBusyError

    return (IncompleteTensorError, LookupError, JudgeSpecError, PriceError, PlanError, TemplateError,
            FatalProviderError, SpendNotConfirmed, WarehouseBusyError)


@app.command("run")
@cli_errors()
def run_command(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    out: Path = _OUT,
    dataset: str = _SOURCE,
    judge: str = _MAIN_JUDGE,
    methods: str = _METHODS,
    missing: str = _MISSING,
    samples_per_order: int = _SAMPLES,
    max_cost: Optional[float] = _MAX_COST,
    analyses: str = _ANALYSES,
    yes: bool = _YES,
) -> None:
    """The main job: ingest (idempotent) → judge → rate → analyses → report; prints where the results are."""
    from flows.run import run_flow

    chosen = _checked_options(methods, missing)
    with cli_errors(ValueError):
        from flows.analyze import parse_analyses

        chosen_analyses = parse_analyses(analyses)
    with cli_errors(*_main_job_errors()), quiet_prefect():
        summary = run_flow(db=str(db) if db else None, out_dir=str(out), dataset=dataset, judge=judge,
                           methods=chosen, missing=missing, samples_per_order=samples_per_order,
                           max_cost=max_cost, analyses=chosen_analyses, yes=yes)
    _print_model_ratings(db, summary.rate_run_id)
    for lines in summary.analyses.values():
        for line in lines:
            typer.echo(line)
    typer.echo(f"tensor: {summary.dropped}")
    typer.echo(f"DuckDB warehouse: {summary.db_path}  (e.g. SELECT * FROM latest_model_ratings)")
    typer.echo(f"HTML report:      {summary.report_path}")


@app.command("refresh")
@cli_errors()
def refresh_command(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    out: Path = _OUT,
    dataset: str = _SOURCE,
    judge: str = _MAIN_JUDGE,
    methods: str = _METHODS,
    missing: str = _MISSING,
    samples_per_order: int = _SAMPLES,
    max_cost: Optional[float] = _MAX_COST,
    analyses: str = _ANALYSES,
    wait: float = typer.Option(0.0, "--wait", min=0.0, help="Seconds to wait for another run writing the "
                               "warehouse before giving up with 'warehouse busy' (default: do not wait)."),
    yes: bool = _YES,
) -> None:
    """The main job, incrementally: only new prompts, models and missing judge cells are judged; ratings,
    analyses and the report are recomputed only when their inputs changed. For schedules (see `serve`)."""
    from flows.refresh import refresh_flow, refresh_line

    chosen = _checked_options(methods, missing)
    with cli_errors(ValueError):
        from flows.analyze import parse_analyses

        chosen_analyses = parse_analyses(analyses)
    with cli_errors(*_main_job_errors()), quiet_prefect():
        summary = refresh_flow(db=str(db) if db else None, out_dir=str(out), dataset=dataset, judge=judge,
                               methods=chosen, missing=missing, samples_per_order=samples_per_order,
                               max_cost=max_cost, analyses=chosen_analyses, wait_s=wait, yes=yes)
    if summary.new_rate_run:  # read while the refresh held the warehouse: another run may write it now
        _print_model_ratings(db, summary.rate_run_id, summary.model_ratings)
    typer.echo(refresh_line(summary))


@app.command("serve")
@cli_errors()
def serve_command(
    cron: str = typer.Option("0 3 * * *", "--cron", help="When to refresh (cron syntax, UTC), e.g. '0 3 * * *' "
                             "for 03:00 every night."),
    name: str = typer.Option("eqarena-refresh", "--name", help="Deployment name (trigger it with `prefect "
                             "deployment run 'refresh/NAME'`)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    out: Path = typer.Option(Path("out"), "--out", help="Directory of the HTML report."),
    dataset: str = typer.Option("vicuna80", "--dataset", "-d", help="Bundled dataset name or directory."),
    judge: str = typer.Option("prd:gpt4", "--judge", "-j", help="Recorded judge (prd:<judge>, all-prd) or a "
                              "provider spec."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Provider judge only: USD cap per run."),
    analyses: str = typer.Option("clones,risk", "--analyses", help="Analyses of a new rate run (clones, risk "
                                 "or none)."),
) -> None:
    """Serve `refresh` as a Prefect deployment on this machine: runs on the --cron schedule and whenever it
    is triggered from the Prefect UI or `prefect deployment run`; until stopped (Ctrl-C). Point
    PREFECT_API_URL at a Prefect server (`prefect server start`) to keep runs, logs and schedules in its UI."""
    from prefect.client.schemas.schedules import CronSchedule

    from flows.prefect_api import TemporaryApiError, ensure_prefect_api
    from flows.refresh import refresh_flow

    with cli_errors(ValueError):
        from flows.analyze import parse_analyses

        chosen_analyses = parse_analyses(analyses)
        try:
            CronSchedule(cron=cron)
        except ValueError:
            raise ValueError(f"--cron {cron!r} is not a cron expression (e.g. '0 3 * * *')") from None
    with cli_errors(TemporaryApiError):
        if ensure_prefect_api():
            typer.echo("no PREFECT_API_URL: serving with a temporary Prefect API that stops with this command "
                       "(start `prefect server start` and set PREFECT_API_URL to keep runs and a UI)", err=True)
    parameters = {"db": str(db) if db else None, "out_dir": str(out), "dataset": dataset, "judge": judge,
                  "max_cost": max_cost, "analyses": chosen_analyses}
    refresh_flow.serve(name=name, cron=cron, parameters=parameters,
                       description=f"eqarena refresh of {dataset} by {judge}, scheduled '{cron}' (UTC)")


@app.command("judge")
@cli_errors(LookupError, ValueError, RuntimeError)
def judge_command(
    judge: str = typer.Option(..., "--judge", "-j", help="openai:MODEL, gemini:MODEL or "
                              "openai-compatible:MODEL@BASE_URL (keys from OPENAI_API_KEY / GEMINI_API_KEY)."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=_DATASET_HELP),
    models: Optional[str] = typer.Option(None, "--models", help="Comma-separated model ids (default: every "
                                         "model with answers in the dataset)."),
    prompts: Optional[int] = typer.Option(None, "--prompts", min=1, help="Judge the first N prompts."),
    samples_per_order: int = typer.Option(4, "--samples-per-order", min=1, help="Samples with each model "
                                          "as assistant A (paper: 4)."),
    template: str = typer.Option("pairwise5", "--template", help="pairwise5 (five labels, default), "
                                 "pairwise3 (three classes) or the path of a template file."),
    plan: bool = typer.Option(False, "--plan", help="Print the calls, tokens and cost it would take; send nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan (or the run's outcome) as JSON."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", min=0, help="Stop before spending more USD."),
    max_calls: Optional[int] = typer.Option(None, "--max-calls", min=0, help="Stop after this many judge calls."),
    concurrency: int = typer.Option(16, "--concurrency", min=1, help="Requests in flight at most."),
    rpm: Optional[float] = typer.Option(None, "--rpm", help="Requests per minute at most."),
    tpm: Optional[float] = typer.Option(None, "--tpm", help="Tokens per minute at most (estimated)."),
    batch: bool = typer.Option(False, "--batch", help="Use the OpenAI Batch API (half price, up to 24 h); "
                               "resumable."),
    multi_sample: Optional[bool] = typer.Option(None, "--multi-sample/--single-sample", help="Ask for all "
                                                "samples of a cell in one request (n / candidate_count). "
                                                "Default: on for openai and gemini, off otherwise."),
    max_unparsed: Optional[int] = typer.Option(None, "--max-unparsed", min=0, help="Unparseable verdicts per "
                                               "ordered cell before giving up on it (default: samples per order)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Output tokens per sample at most."),
    temperature: Optional[float] = typer.Option(None, "--temperature", help="Sampling temperature."),
    retries: int = typer.Option(8, "--retries", min=1, help="Attempts per request, the first included."),
    retry_wait: float = typer.Option(1.0, "--retry-wait", min=0, help="First backoff in seconds when the "
                                     "server sends no Retry-After."),
    timeout: float = typer.Option(120.0, "--timeout", min=0.01, help="Seconds per attempt."),
    prices: Optional[Path] = typer.Option(None, "--prices", help="TOML price file overriding "
                                          "tasks/judge/prices.toml."),
    batch_poll: float = typer.Option(30.0, "--batch-poll", min=0, help="Seconds between batch status checks."),
    runner: str = typer.Option("asyncio", "--runner", help="asyncio (default): calls from this process; dask: "
                               "calls on Dask workers (prefect-dask), still one --rpm/--tpm limit for the whole "
                               "run, rows written by this process."),
    dask_address: Optional[str] = typer.Option(None, "--dask-address", help="--runner dask: the scheduler of an "
                                               "existing Dask cluster (tcp://HOST:PORT); its workers need the "
                                               "API key in their own environment. Default: a local cluster."),
    dask_workers: int = typer.Option(2, "--dask-workers", min=1, help="--runner dask without --dask-address: "
                                     "worker processes of the local cluster."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    adaptive: bool = typer.Option(False, "--adaptive", help="Judge adaptively: a small random design, then "
                                  "batches of the cells that matter most for the NE ranking, until every adjacent "
                                  "pair is ordered (or tied within --indifference) with --stop-probability, or "
                                  "--max-calls is reached."),
    batch_calls: int = typer.Option(200, "--batch-calls", min=2, help="--adaptive: judge calls per round "
                                    "(--samples-per-order caps the samples of each cell and order)."),
    stop_probability: float = typer.Option(0.95, "--stop-probability", min=0.0, max=1.0, help="--adaptive: stop "
                                           "when every adjacent pair of the NE ranking is settled with this "
                                           "probability."),
    indifference: float = typer.Option(0.02, "--indifference", min=0.0, help="--adaptive: two models whose NE "
                                       "ratings differ by at most this need not be ordered to stop."),
    explore: float = typer.Option(0.1, "--explore", min=0.0, max=1.0, help="--adaptive: share of each batch "
                                  "drawn uniformly at random; the rest goes to the cells of highest priority."),
    seed: int = typer.Option(0, "--seed", help="--adaptive: seed of the design, the replicates and tie-breaks."),
) -> None:
    """Judge the missing (prompt, model pair, order, sample) cells with an LLM judge; resumable."""
    import sys

    from tasks.judge.providers import parse_judge_spec

    spec = parse_judge_spec(judge)  # a malformed spec fails first
    if spec.provider == "recorded" and spec.base_url is None and db is not None:
        judge = f"{judge}@{db}"  # the replay judge reads its recording from the same warehouse
    chosen = [m.strip() for m in models.split(",") if m.strip()] if models else None
    dataset = _checked_dataset(dataset, db)
    if adaptive and not plan:
        from flows.adaptive import adaptive_judge_flow

        with quiet_prefect():
            result = adaptive_judge_flow(
                judge=judge, dataset=dataset, models=chosen, prompts=prompts, template=template,
                max_calls=max_calls, batch_calls=batch_calls, stop_probability=stop_probability,
                indifference=indifference, explore=explore, seed=seed, max_samples_per_order=samples_per_order,
                concurrency=concurrency, retries=retries, retry_wait=retry_wait, timeout=timeout,
                prices=str(prices) if prices else None, db=str(db) if db else None)
        if as_json:
            from dataclasses import asdict

            typer.echo(json.dumps(asdict(result), indent=2))
            return
        typer.echo(f"{result.judge} on {dataset}: NE ranking {' > '.join(result.ranking)}")
        typer.echo(result.message)
        typer.echo(f"run {result.run_id}")
        return
    if plan:  # only reads the warehouse: no Prefect, no provider SDK
        from flows.judge_plan import plan_judge_run

        outcome = plan_judge_run(
            judge=judge, dataset=dataset, models=chosen, prompts=prompts, samples_per_order=samples_per_order,
            template=template, max_unparsed=max_unparsed, batch=batch, multi_sample=multi_sample,
            prices=str(prices) if prices else None, db=str(db) if db else None, max_cost=max_cost,
            max_calls=max_calls)
    else:
        from flows.judge import judge_flow

        with quiet_prefect():
            outcome = judge_flow(
                judge=judge, dataset=dataset, models=chosen, prompts=prompts, samples_per_order=samples_per_order,
                template=template, max_cost=max_cost, max_calls=max_calls, concurrency=concurrency, rpm=rpm,
                tpm=tpm, batch=batch, multi_sample=multi_sample, max_unparsed=max_unparsed, max_tokens=max_tokens,
                temperature=temperature, retries=retries, retry_wait=retry_wait, timeout=timeout,
                prices=str(prices) if prices else None, db=str(db) if db else None,
                batch_poll_interval=batch_poll, progress=sys.stderr.isatty() and not as_json, runner=runner,
                dask_address=dask_address, dask_workers=dask_workers,
            )
    if as_json:
        from dataclasses import asdict

        typer.echo(json.dumps(outcome.plan if plan else asdict(outcome), indent=2))
        return
    p = outcome.plan
    cost = "unknown (no price; see --prices)" if p["cost_usd"] is None else f"${p['cost_usd']:,.4f}"
    typer.echo(f"{p['judge']} on {p['dataset']}: {p['prompts']} prompts x {len(p['models'])} models, template "
               f"{p['template']} ({p['template_hash']}); {p['done_samples']:,} of {p['wanted_samples']:,} "
               f"samples held, {p['pending_samples']:,} pending in batches")
    typer.echo(f"plan: {p['calls']:,} calls in {p['requests']:,} requests, ~{p['tokens_in']:,} input + "
               f"~{p['tokens_out']:,} output tokens, {cost}" + (" (batch price)" if p["batch"] else ""))
    if not plan:
        typer.echo(outcome.message)
        if outcome.run_id:
            typer.echo(f"run {outcome.run_id}")


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BaseException as exc:  # an unexpected error: its traceback, then nothing else
        release_frames(exc)
        raise


if __name__ == "__main__":
    main()
