"""Tasks: the analyses' reads (the game a rate run solved, its best model) and their one write."""

from __future__ import annotations

import numpy as np
import polars as pl
from prefect import task
from prefect.cache_policies import NONE

from eqarena import warehouse
from eqarena.warehouse.analyses import RunGame, read_equilibrium_marginals, read_run_game, write_analysis
from eqarena.warehouse.ratings import latest_rate_run_id, read_ratings
from eqarena.warehouse.runs import RunRecord


@task(name="read_rate_game", cache_policy=NONE)
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


@task(name="read_selected_equilibrium", cache_policy=NONE)
def read_selected_equilibrium(db: str | None, game: RunGame, method: str = "ne") -> list[np.ndarray]:
    """The rate run's stored `method` equilibrium: its (prompt, king, rebel) marginals over `game`'s actions."""
    con = warehouse.connect(db, read_only=True)
    try:
        return read_equilibrium_marginals(con, game, method)
    finally:
        con.close()


@task(name="top_model", cache_policy=NONE)
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


@task(name="write_analysis_run", cache_policy=NONE)
def write_analysis_run(db: str | None, run: RunRecord, frames: dict[str, pl.DataFrame]) -> None:
    """The analysis run's `runs` row and tables, in one transaction."""
    con = warehouse.connect(db)
    try:
        write_analysis(con, run, frames)
    finally:
        con.close()
