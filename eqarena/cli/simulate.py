"""`eqarena simulate ...`: simulated evaluation dynamics (paper Section 2, Algorithm 1)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from eqarena.cli.help import TidyHelpGroup
from eqarena.cli.output import say, warehouse_file
from eqarena.cli.support import DB_HELP, cli_errors
from eqarena.exceptions import OptionError
from eqarena.options import DEFAULT_OUT_DIR, SETTINGS, PathSizes

simulate_app = typer.Typer(
    help="Simulate how rating methods steer model and prompt development.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
    cls=TidyHelpGroup,
)

_SIZES = PathSizes()


def parse_simulation_methods(text: str) -> list[str]:
    """`elo,ne` -> ['elo', 'ne']: `elo` (Bradley-Terry on u_king) first, then registry methods in registry order."""
    from eqarena.methods import REFERENCE, canonical, parse_methods

    items = [m.strip().lower() for m in text.split(",") if m.strip()]
    rest = [m for m in items if canonical(m) != REFERENCE]  # elo or bt: the simulation's Elo
    methods = (["elo"] if len(rest) < len(items) else []) + (list(parse_methods(rest)) if rest else [])
    if not methods:
        raise OptionError("--methods: give at least one method, e.g. elo,ne")
    return methods


def parse_settings(text: str) -> list[str]:
    items = [s.strip().lower() for s in text.split(",") if s.strip()]
    unknown = [s for s in items if s not in SETTINGS]
    if unknown or not items:
        raise OptionError(f"--settings: choose from {', '.join(SETTINGS)}; got {text!r}")
    return [s for s in SETTINGS if s in items]


@simulate_app.command("improvement-path")
@cli_errors()
def improvement_path(
    methods: str = typer.Option(
        "elo,ne",
        "--methods",
        help="`elo` (Bradley-Terry on u_king; prompts by "
        "separability) and/or registry methods (`ne`, `cce`, ...; prompts and models "
        "by their equilibrium ratings).",
    ),
    trials: int = typer.Option(
        32,
        "--trials",
        min=1,
        help="Trials per method and setting (trial k is drawn with seed + k, the same draw for every method).",
    ),
    iterations: int = typer.Option(
        _SIZES.iterations, "--iterations", min=0, help="Models (and prompts) added per trial."
    ),
    settings: str = typer.Option(
        "initial,additional",
        "--settings",
        help="`initial`: fixed initial prompts; `additional`: a best-of-64 prompt is added every iteration.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of trial 0."),
    skills: int = typer.Option(_SIZES.skills, "--skills", min=2, help="K, the number of skills."),
    workers: int = typer.Option(min(2, os.cpu_count() or 1), "--workers", min=1, help="Worker processes."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    out: Path = typer.Option(Path(DEFAULT_OUT_DIR), "--out", help="Directory of the HTML page."),
) -> None:
    """Algorithm 1 of the paper (Section 2, Figure 1): each iteration adds a model grown from
    Dirichlet(1_K) improvement vectors until the method rates it top (and, in the `additional` setting,
    first the best of P' = 64 Dirichlet prompts); prompts are skill distributions, models nonnegative
    skill vectors, u_king[p, i, j] = p^T (m_i - m_j). Defaults: K = 5 skills, P_0 = 5 initial prompts,
    M_0 = 5 initial models, M' = 8 improvement vectors per round (at most 100 rounds per model),
    P' = 64, 16 iterations, 32 trials (elo and ne: about 4 minutes on two cores). Prints the final
    prompt and model skill entropies (nats, 95% bootstrap intervals over trials) and the elo − ne
    differences; writes tables simulation_runs and simulation_steps and an HTML page with Figure 1
    centre and right / Figure 4."""
    from dataclasses import replace

    from eqarena.orchestration.progress import stage
    from eqarena.pipelines.simulate import simulate_improvement_path

    names, kept = parse_simulation_methods(methods), parse_settings(settings)
    sizes = replace(_SIZES, skills=skills, iterations=iterations)
    total = len(names) * len(kept) * trials
    finished_trials = [0]
    with stage("improvement-path trials", total=total) as progress:

        def on_done(job, steps, finished):
            finished_trials[0] = finished
            progress(finished)
            if not sys.stderr.isatty():
                method, setting, trial = job
                say(
                    f"[{finished}/{total}] {method} {setting} trial {trial}: H(p̄) {steps[-1].prompt_entropy:.3f}, "
                    f"H(m̄) {steps[-1].model_entropy:.3f}",
                    err=True,
                )

        try:
            result = simulate_improvement_path(
                names, kept, sizes, trials, seed, None if db is None else str(db), out, workers, on_done
            )
        except KeyboardInterrupt:  # the trials' workers are stopped; the run is recorded `interrupted`
            say(
                f"simulate interrupted after {finished_trials[0]} of {total} trials: none stored "
                "(a simulation is stored whole; the run is recorded as interrupted)",
                err=True,
            )
            raise
    _print_summary(result)
    say(f"simulate run {result.run_id} ({result.seconds:.1f} s) written to {warehouse_file(db)}")
    say(f"HTML page: {result.page.resolve()}")


def _print_summary(result) -> None:
    table = Table(title="Final skill entropy (nats): mean over trials [95% bootstrap interval]", box=box.SIMPLE_HEAD)
    for column in ("method", "setting", "model entropy", "prompt entropy", "trials"):
        table.add_column(column, justify="left" if column in ("method", "setting") else "right", no_wrap=True)
    for f in result.finals:
        table.add_row(f.method, f.setting, _fmt(f.model), _fmt(f.prompt), str(f.model.trials))
    console = Console()
    console.print(table)
    if result.differences:
        diff = Table(title="Paired difference (first method − other), per trial", box=box.SIMPLE_HEAD)
        for column in ("difference", "setting", "skills of", "mean [95% interval]"):
            diff.add_column(column, justify="right" if column.startswith("mean") else "left", no_wrap=True)
        for d in result.differences:
            diff.add_row(f"{d.first} − {d.second}", d.setting, d.what + "s", _fmt(d.difference))
        console.print(diff)
        for d in result.differences:
            say(d.sentence)


def _fmt(i) -> str:
    return (
        f"{i.mean:+.3f} [{i.lo:+.3f}, {i.hi:+.3f}]"
        if i.mean < 0 or i.lo < 0
        else f"{i.mean:.3f} [{i.lo:.3f}, {i.hi:.3f}]"
    )
