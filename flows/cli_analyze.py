"""`eqarena analyze clones|risk`: the robustness analyses of a rate run, from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from flows.cli_support import DB_HELP, cli_errors, quiet_prefect

analyze_app = typer.Typer(
    help="Robustness analyses of a rate run: adversarial clones (paper Section 4.2) and risk dominance "
         "(App. F.4). Results go to DuckDB tables and into the run's report.",
    no_args_is_help=True,
)

RUN_HELP = "Rate run id (default: the latest finished one)."


def parse_counts(text: str, option: str) -> list[int]:
    """'0,250,500' -> [0, 250, 500]; ValueError naming the option otherwise."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"{option} takes comma-separated whole numbers, e.g. 0,250,500; got {text!r}") from None
    if not counts or counts[0] < 0:
        raise ValueError(f"{option} takes comma-separated whole numbers >= 0; got {text!r}")
    return counts


def _echo_result(result, db: Optional[Path]) -> None:
    import warehouse

    for line in result.summary:
        typer.echo(line)
    typer.echo(f"{result.kind} run {result.run_id} (of rate run {result.source_run_id}, {result.seconds:.1f} s) "
               f"written to {warehouse.resolve_db_path(db).resolve()}; `eqarena report --run "
               f"{result.source_run_id}` shows it")


@analyze_app.command("clones")
@cli_errors(LookupError, ValueError)
def analyze_clones(
    run: Optional[str] = typer.Option(None, "--run", help=RUN_HELP),
    target: Optional[str] = typer.Option(None, "--target", help="Model the copied prompts are adversarial to "
                                         "(default: the run's top NE model)."),
    lam: float = typer.Option(10.0, "--lambda", help="Copies are drawn from softmax(-lambda * the target's mean "
                              "payoff on each prompt)."),
    n: str = typer.Option("0,250,500", "--n", help="Numbers of exact copies to add."),
    n_noisy: str = typer.Option("0,250,500,750,1000", "--n-noisy", help="Numbers of noisy copies to add."),
    noise: float = typer.Option(0.01, "--noise", min=0.0, help="Noisy copies get Uniform(-noise, noise) payoff noise."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw (the same seed gives the same copies)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """How every method's model ranks move as copies of prompts adversarial to one model are added."""
    ns_exact, ns_noisy = parse_counts(n, "--n"), parse_counts(n_noisy, "--n-noisy")
    from flows.analyze import clones_flow

    with quiet_prefect():
        result = clones_flow(db=str(db) if db else None, run_id=run, target=target, lam=lam, seed=seed,
                             ns_exact=ns_exact, ns_noisy=ns_noisy, noise=noise)
    _echo_result(result, db)


@analyze_app.command("risk")
@cli_errors(LookupError, ValueError)
def analyze_risk(
    run: Optional[str] = typer.Option(None, "--run", help=RUN_HELP),
    equilibria: int = typer.Option(128, "--equilibria", "-k", min=2, help="Nash equilibria to search for "
                                   "(equilibrium 0 is the run's selected NE)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the equilibrium search."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Pure Nash equilibria, many mixed ones, and how risky each is when players miscoordinate."""
    from flows.analyze import risk_flow

    with quiet_prefect():
        result = risk_flow(db=str(db) if db else None, run_id=run, num=equilibria, seed=seed)
    _echo_result(result, db)
