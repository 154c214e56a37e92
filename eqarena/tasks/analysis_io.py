"""Tasks: the analyses' reads (the game a rate run solved, its best model) and their one write."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import polars as pl

from eqarena import warehouse
from eqarena.exceptions import NotFoundError
from eqarena.methods import HEADLINE, REFERENCE, SELECTED_NE
from eqarena.orchestration.steps import step
from eqarena.warehouse.analyses import (
    RunGame,
    marginals_in_game_order,
    read_equilibrium_marginals,
    read_run_game,
    run_game,
    write_analysis,
)
from eqarena.warehouse.ratings import EquilibriumRecord, MethodRatings, RatingRow, latest_rate_run_id, read_ratings
from eqarena.warehouse.runs import RunRecord
from eqarena.warehouse.snapshot import publish_snapshot
from eqarena.warehouse.tensor import PayoffTensor


@step("read_rate_game")
def read_rate_game(db: str | None, run_id: str | None = None) -> RunGame:
    """The tensor of rate run `run_id` (default: the newest finished one), read-only."""
    con = warehouse.connect(db, read_only=True)
    try:
        if run_id is None:
            run_id = latest_rate_run_id(con)
            if run_id is None:
                raise NotFoundError("no finished rate run in the warehouse: run `eqarena rate` first")
        return read_run_game(con, run_id)
    finally:
        con.close()


def unwritten_rate_game(run_id: str, tensor: PayoffTensor, methods: Sequence[str]) -> RunGame:
    """The game `read_rate_game` reads back once rate run `run_id` (`tensor` rated by `methods`) is written."""
    return run_game(run_id, tensor.dataset, methods, tensor.prompts, tensor.models, tensor.u_king)


def unwritten_marginals(game: RunGame, tensor: PayoffTensor, record: EquilibriumRecord) -> list[np.ndarray]:
    """The marginals `read_selected_equilibrium` reads back once `record` (an equilibrium of `tensor`) is written."""
    actions = {"prompt": tensor.prompts, "king": tensor.models, "rebel": tensor.models}
    return marginals_in_game_order(
        game,
        {
            (player, a): float(m)
            for player, labels in actions.items()
            for a, m in zip(labels, np.asarray(record.marginals[player]))
        },
    )


@step("read_selected_equilibrium")
def read_selected_equilibrium(db: str | None, game: RunGame, method: str = SELECTED_NE) -> list[np.ndarray]:
    """The rate run's stored `method` equilibrium: its (prompt, king, rebel) marginals over `game`'s actions."""
    con = warehouse.connect(db, read_only=True)
    try:
        return read_equilibrium_marginals(con, game, method)
    finally:
        con.close()


@step("top_model")
def top_model(db: str | None, run_id: str, methods: tuple[str, ...] = (*HEADLINE, REFERENCE)) -> tuple[str, str]:
    """(model, method): the best king of the first of `methods` the run rated (`best_king`)."""
    con = warehouse.connect(db, read_only=True)
    try:
        rows = [r for r in read_ratings(con, run_id) if r.player == "king"]
    finally:
        con.close()
    return best_king(rows, run_id, methods)


def best_king(
    rows: Sequence[RatingRow], run_id: str, methods: tuple[str, ...] = (*HEADLINE, REFERENCE)
) -> tuple[str, str]:
    """(model, method): among the king `rows` of a rate run, the best of the first of `methods` it rated
    (highest rating, then largest equilibrium mass, then name)."""
    for method in methods:
        kings = [r for r in rows if r.method == method and r.player == "king"]
        if kings:
            best = min(kings, key=lambda r: (-r.rating, -(r.mass or 0.0), r.action))
            return best.action, method
    raise NotFoundError(f"rate run {run_id!r} has no model ratings")


def king_rows(ratings: Sequence[MethodRatings]) -> list[RatingRow]:
    """The king rows `read_ratings` gives back once `ratings` are written (rank left 0: `best_king` does
    not read it)."""
    return [
        RatingRow(r.method, r.player, action, float(value), 0, None if r.mass is None else float(r.mass[k]), None, None)
        for r in ratings
        if r.player == "king"
        for k, (action, value) in enumerate(zip(r.actions, r.rating))
    ]


@step("write_analysis_run")
def write_analysis_run(db: str | None, run: RunRecord, frames: dict[str, pl.DataFrame]) -> None:
    """The analysis run's `runs` row and tables, in one transaction."""
    con = warehouse.connect(db)
    try:
        write_analysis(con, run, frames)
        publish_snapshot(con)
    finally:
        con.close()
