"""Tasks: the analyses' reads (the game a rate run solved, its best model) and their one write."""

from __future__ import annotations

import numpy as np
import polars as pl

from eqarena import warehouse
from eqarena.orchestration.steps import step
from eqarena.warehouse.analyses import RunGame, read_equilibrium_marginals, read_run_game, write_analysis
from eqarena.warehouse.ratings import latest_rate_run_id, read_ratings
from eqarena.warehouse.runs import RunRecord
from eqarena.warehouse.snapshot import publish_snapshot


@step("read_rate_game")
def read_rate_game(db: str | None, run_id: str | None = None) -> RunGame:
    """The tensor of rate run `run_id` (default: the newest finished one), read-only."""
    con = warehouse.connect(db, read_only=True)
    try:
        if run_id is None:
            run_id = latest_rate_run_id(con)
            if run_id is None:
                raise LookupError("no finished rate run in the warehouse: run `eqarena rate` first")
        return read_run_game(con, run_id)
    finally:
        con.close()


@step("read_selected_equilibrium")
def read_selected_equilibrium(db: str | None, game: RunGame, method: str = "ne") -> list[np.ndarray]:
    """The rate run's stored `method` equilibrium: its (prompt, king, rebel) marginals over `game`'s actions."""
    con = warehouse.connect(db, read_only=True)
    try:
        return read_equilibrium_marginals(con, game, method)
    finally:
        con.close()


@step("top_model")
def top_model(db: str | None, run_id: str, methods: tuple[str, ...] = ("ne", "cce", "bt")) -> tuple[str, str]:
    """(model, method): the best king of the first of `methods` the run rated (highest rating, then
    largest equilibrium mass, then name)."""
    con = warehouse.connect(db, read_only=True)
    try:
        rows = [r for r in read_ratings(con, run_id) if r.player == "king"]
    finally:
        con.close()
    for method in methods:
        kings = [r for r in rows if r.method == method]
        if kings:
            best = min(kings, key=lambda r: (-r.rating, -(r.mass or 0.0), r.action))
            return best.action, method
    raise LookupError(f"rate run {run_id!r} has no model ratings")


@step("write_analysis_run")
def write_analysis_run(db: str | None, run: RunRecord, frames: dict[str, pl.DataFrame]) -> None:
    """The analysis run's `runs` row and tables, in one transaction."""
    con = warehouse.connect(db)
    try:
        write_analysis(con, run, frames)
        publish_snapshot(con)
    finally:
        con.close()
