"""`eqarena status` and `eqarena check`: what the warehouse holds, and whether it is whole."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path
from typing import Optional

import typer

from eqarena.cli.output import cells, say, warehouse_file
from eqarena.cli.support import DB_HELP, WAIT, cli_errors

STARTED, STARTED_SHOWN = "%Y-%m-%d %H:%M", "2026-12-03 06:38"  # a run's start as shown, and its width
VERIFY_HELP = "Read every table first, so a damaged file is an error, not plausible counts (--no-verify skips it)."


@cli_errors()
def status(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help=VERIFY_HELP),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Counts of prompts, models, responses and judgments, each judge's coverage (the share of
    prompt x ordered-model-pair cells with an ok judgment, over the datasets the judge covers), and the
    latest runs (a run whose process died shows as abandoned)."""
    from eqarena import warehouse
    from eqarena.warehouse.runs import recent_runs
    from eqarena.warehouse.status import warehouse_status
    from eqarena.warehouse.verify import verify_tables

    path = warehouse_file(db)
    with closing(warehouse.connect(db, read_only=True)) as con:
        if verify:
            _raise_on_damage(verify_tables(con), path)
        found = warehouse_status(con)
        runs = recent_runs(con)
    if as_json:
        unfinished = [
            {"run_id": r.run_id, "kind": r.kind, "status": r.status}
            for r in runs
            if r.status in ("running", "abandoned")
        ]
        say(json.dumps({**found.as_json(), "unfinished_runs": unfinished}))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    totals = Table(title=f"warehouse {path}")
    for column in ("dataset", "prompts", "models", "responses", "judgments"):
        totals.add_column(column, justify="left" if column == "dataset" else "right")
    for d in found.datasets:
        totals.add_row(*cells(d.dataset, f"{d.prompts:,}", f"{d.models:,}", f"{d.responses:,}", f"{d.judgments:,}"))
    totals.add_row(
        "all",
        f"{found.prompts:,}",
        f"{found.models:,}",
        f"{found.responses:,}",
        f"{sum(j.judgments for j in found.judges):,}",
        style="bold",
    )
    console.print(totals)
    judges = Table(title="judges")
    for column in ("judge", "judgments", "ok", "complete cells", "coverage"):
        judges.add_column(column, justify="left" if column == "judge" else "right")
    for j in found.judges:
        judges.add_row(
            *cells(j.judge, f"{j.judgments:,}", f"{j.ok:,}", f"{j.complete_cells:,} / {j.cells:,}", f"{j.coverage:.1%}")
        )
    console.print(judges if found.judges else "no judgments yet")
    if runs:
        # run, status and start whole at any width (80 columns too); the message is cut to what is left
        widths = [
            max(len(r.run_id) for r in runs),
            max(len("status"), *(len(r.status) for r in runs)),
            len(STARTED_SHOWN),
        ]
        left = console.width - sum(widths) - 3 * (len(widths) + 1) - 1  # each column: a border and 2 spaces
        table = Table(title="runs (latest, and any unfinished)")
        for name, width in zip(("run", "status", "started"), widths):
            table.add_column(name, no_wrap=True, min_width=width)
        table.add_column("message", overflow="ellipsis", no_wrap=True, max_width=max(left, 8))
        for r in runs:
            table.add_row(*cells(r.run_id, r.status, f"{r.started_at:{STARTED}}", _short(r.message)))
        console.print(table)


@cli_errors()
def check(
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    wait: Optional[float] = WAIT,
) -> None:
    """Verify the warehouse: open it, read every table (DuckDB checks each block's checksum as it
    reads it) and print each table's rows. Exit 1 with one line naming the damage if any."""
    from eqarena import warehouse
    from eqarena.warehouse.verify import verify_tables

    path = warehouse_file(db)
    with closing(warehouse.connect(db, read_only=True)) as con:
        checks = verify_tables(con)
    _raise_on_damage(checks, path)
    rows = sum(c.rows or 0 for c in checks)
    say(f"ok: {path}: {len(checks)} tables, {rows:,} rows read, every block's checksum verified")


def _raise_on_damage(checks, path: Path) -> None:
    from eqarena.warehouse import WarehouseUnusableError

    damaged = [c for c in checks if not c.ok]
    if damaged:
        names = ", ".join(c.table for c in damaged)
        raise WarehouseUnusableError(
            f"{path} is damaged: {len(damaged)} of {len(checks)} tables cannot be read "
            f"({names}); first error: {damaged[0].error}"
        )


def _short(message: str | None, limit: int = 80) -> str:
    text = " ".join((message or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
