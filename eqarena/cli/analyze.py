"""`eqarena analyze clones|risk`: the robustness analyses of a rate run, from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.help import TidyHelpGroup
from eqarena.cli.output import say, warehouse_file
from eqarena.cli.support import DB_HELP, OUT_HELP, WAIT, checked_dataset, cli_errors, db_option, run_pipeline
from eqarena.exceptions import NotFoundError, OptionError
from eqarena.options import DEFAULT_OUT_DIR, CloneOptions, RiskOptions

RUN_HELP = "Rate run id (default: the latest finished rate run of --dataset)."
ANALYZE_DATASET_HELP = (
    "Dataset whose latest finished rate run is analysed, when --run is not given (default: "
    "the warehouse's only dataset, if it holds exactly one)."
)

analyze_app = typer.Typer(
    help="Robustness analyses of a rate run: adversarial clones (paper Section 4.2) and risk dominance "
    "(App. F.4). Results go to DuckDB tables, and the run's HTML report is rewritten to show them.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
    cls=TidyHelpGroup,
)


def parse_counts(text: str, option: str) -> list[int]:
    """'0,250,500' -> [0, 250, 500]; ValueError naming the option otherwise."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise OptionError(f"{option} takes comma-separated whole numbers, e.g. 0,250,500; got {text!r}") from None
    if not counts or counts[0] < 0:
        raise OptionError(f"{option} takes comma-separated whole numbers >= 0; got {text!r}")
    return counts


def source_run(run: Optional[str], dataset: Optional[str], db: Optional[Path]) -> str:
    """The rate run to analyse: `run` if given, else the newest finished rate run of `dataset` (default:
    the warehouse's only dataset); LookupError when there is none."""
    if run is not None:
        return run
    from contextlib import closing

    from eqarena import warehouse
    from eqarena.warehouse.ratings import latest_rate_run_id

    name = checked_dataset(dataset, db)
    with closing(warehouse.connect(db, read_only=True)) as con:
        found = latest_rate_run_id(con, name)
    if found is None:
        raise NotFoundError(f"no finished rate run of dataset {name!r}: run `eqarena rate --dataset {name}` first")
    return found


def _finish(result, out: Path, db: Optional[Path]) -> None:
    """Print the analysis, then rewrite the rate run's report so it shows it."""
    for line in [result.headline, *result.summary]:
        say(line)
    say(
        f"{result.kind} run {result.run_id} (of rate run {result.source_run_id}, {result.seconds:.1f} s) "
        f"written to {warehouse_file(db)}"
    )
    from eqarena.pipelines.report import report as report_pipeline

    path = run_pipeline(report_pipeline, result.source_run_id, str(out), db_option(db))
    say(f"HTML report updated: {Path(path).resolve()}")


@analyze_app.command("clones")
@cli_errors()
def analyze_clones(
    run: Optional[str] = typer.Option(None, "--run", help=RUN_HELP),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=ANALYZE_DATASET_HELP),
    out: Path = typer.Option(Path(DEFAULT_OUT_DIR), "--out", help=OUT_HELP),
    target: Optional[str] = typer.Option(
        None, "--target", help="Model the copied prompts are adversarial to (default: the run's top NE model)."
    ),
    lam: float = typer.Option(
        CloneOptions.lam,
        "--lambda",
        help="Copies are drawn from `softmax(-lambda * the target's mean payoff on each prompt)`.",
    ),
    n: str = typer.Option("0,250,500", "--n", help="Numbers of exact copies to add."),
    n_noisy: str = typer.Option("0,250,500,750,1000", "--n-noisy", help="Numbers of noisy copies to add."),
    noise: float = typer.Option(0.01, "--noise", min=0.0, help="Noisy copies get Uniform(-noise, noise) payoff noise."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw (the same seed gives the same copies)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """How every method's model ranks move as copies of prompts adversarial to one model are added."""
    ns_exact, ns_noisy = parse_counts(n, "--n"), parse_counts(n_noisy, "--n-noisy")

    options = CloneOptions(
        target=target, lam=lam, seed=seed, ns_exact=tuple(ns_exact), ns_noisy=tuple(ns_noisy), noise=noise
    )
    from eqarena.pipelines.analyze import analyze_clones as analyze_clones_pipeline

    result = run_pipeline(analyze_clones_pipeline, options, source_run(run, dataset, db), db_option(db))
    _finish(result, out, db)


@analyze_app.command("risk")
@cli_errors()
def analyze_risk(
    run: Optional[str] = typer.Option(None, "--run", help=RUN_HELP),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help=ANALYZE_DATASET_HELP),
    out: Path = typer.Option(Path(DEFAULT_OUT_DIR), "--out", help=OUT_HELP),
    equilibria: int = typer.Option(
        RiskOptions.equilibria,
        "--equilibria",
        "-k",
        min=2,
        help="Nash equilibria to search for (equilibrium 0 is the run's selected NE).",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the equilibrium search."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Pure Nash equilibria, many mixed ones, and how risky each is when players miscoordinate."""
    from eqarena.pipelines.analyze import analyze_risk as analyze_risk_pipeline

    result = run_pipeline(
        analyze_risk_pipeline,
        RiskOptions(equilibria=equilibria, seed=seed),
        source_run(run, dataset, db),
        db_option(db),
    )
    _finish(result, out, db)
