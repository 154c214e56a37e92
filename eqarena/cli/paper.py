"""`eqarena paper ...`: the paper's claims, reproduced in one command each."""

from __future__ import annotations

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from eqarena.cli.help import TidyHelpGroup
from eqarena.cli.output import say

paper_app = typer.Typer(
    help="Reproduce the paper's worked examples.", no_args_is_help=True, rich_markup_mode="markdown", cls=TidyHelpGroup
)


@paper_app.command("toys")
def toys() -> None:
    """The toy games of App. D (rock-paper-scissors) and App. E (chicken), with and without a cloned
    action: the row player's equilibrium mass and rating (deviation gain, eq. 1) of each action under NE
    and CCE with the affinity and uniform targets and under deviation ratings, then which methods keep
    the original actions' ratings when an action is cloned. Both games are symmetric, so the column
    player's numbers are the same."""
    from eqarena.solvers.toys.tables import toy_tables

    rows, checks = toy_tables()
    console = Console()
    for game in dict.fromkeys(r.game for r in rows):
        for cloned in (False, True):
            shown = [r for r in rows if r.game == game and r.cloned == cloned]
            table = Table(
                title=f"{game}{' with a cloned action' if cloned else ''}",
                box=box.SIMPLE_HEAD,
                pad_edge=False,
                caption="row player; rating = deviation gain u(a, x_-i) - u(x)",
            )
            for column in ("method", "action", "mass", "rating", "exploitability"):
                table.add_column(column, justify="left" if column in ("method", "action") else "right", no_wrap=True)
            for r in shown:
                for k, (action, mass, rating) in enumerate(zip(r.actions, r.mass, r.rating)):
                    table.add_row(
                        r.method if k == 0 else "",
                        action,
                        f"{mass:.3f}",
                        f"{_zero(rating):+.3f}",
                        f"{r.exploitability:.1e}" if k == 0 else "",
                        end_section=k == len(r.actions) - 1,
                    )
            console.print(table)
    for game in dict.fromkeys(c.game for c in checks):
        parts = [
            f"{c.method} {'unchanged' if c.invariant else f'moved by {c.largest_change:.3f}'}"
            for c in checks
            if c.game == game
        ]
        say(f"clone invariance, {game}: " + "; ".join(parts))


def _zero(value: float) -> float:
    """A rating within solver tolerance of 0 prints as +0.000."""
    return 0.0 if abs(value) < 5e-7 else float(value)
