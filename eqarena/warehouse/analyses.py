"""SQL for the robustness analyses of a rate run (migrations/004_analyses.sql): the game a rate run
solved, read back; clone-robustness and risk-dominance results written from polars frames (handed to
DuckDB through Arrow) in one transaction, and read back for the report."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping, Sequence

import duckdb
import numpy as np
import polars as pl

from eqarena.exceptions import NotFoundError
from eqarena.warehouse.runs import RunRecord, upsert_run

ANALYSIS_KINDS = ("clones", "risk")
_TABLES = {
    "clones": ("clone_robustness", "clone_prompts", "clone_verdicts"),
    "risk": ("risk_dominance", "risk_equilibrium_ratings", "pure_nash_equilibria"),
}


@dataclass(frozen=True, eq=False)
class RunGame:
    """The king tensor u_king[P, M, M] a rate run solved (table payoffs), with its labels and the
    methods the run rated with."""

    run_id: str
    dataset: str
    prompts: tuple[str, ...]
    models: tuple[str, ...]
    u_king: np.ndarray
    methods: tuple[str, ...] = ()


def _natural_key(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def read_run_game(con: duckdb.DuckDBPyConnection, run_id: str) -> RunGame:
    """The tensor of rate run `run_id`, prompts in natural order, models sorted; LookupError when the
    run is not a finished rate run."""
    found = con.execute("SELECT dataset, methods FROM rate_runs WHERE run_id = ?", [run_id]).fetchall()
    if not found:
        raise NotFoundError(f"no finished rate run {run_id!r} in the warehouse (see `eqarena rate`)")
    cells = _frame(con, "SELECT prompt_id, king, rebel, u_king FROM payoffs WHERE run_id = ?", [run_id])
    prompts = tuple(sorted(cells["prompt_id"].unique().to_list(), key=_natural_key))
    models = tuple(
        sorted(set(cells["king"].unique().to_list()) | set(cells["rebel"].unique().to_list()), key=_natural_key)
    )
    p_index = {p: k for k, p in enumerate(prompts)}
    m_index = {m: k for k, m in enumerate(models)}
    u = np.zeros((len(prompts), len(models), len(models)))
    u[
        [p_index[p] for p in cells["prompt_id"]],
        [m_index[m] for m in cells["king"]],
        [m_index[m] for m in cells["rebel"]],
    ] = cells["u_king"].to_numpy()
    dataset, methods = found[0]
    return RunGame(run_id, dataset, prompts, models, u, tuple(json.loads(methods) if methods else ()))


def run_game(
    run_id: str, dataset: str, methods: Sequence[str], prompts: Sequence[str], models: Sequence[str], u_king: np.ndarray
) -> RunGame:
    """The game `read_run_game` reads back once rate run `run_id` is written, from the tensor it writes
    (u_king (P, M, M) over `prompts` x `models`, diagonal 0): the same order of prompts and models.
    The main job hands it to its analyses while the run's bootstrap is still going."""
    p_order = sorted(range(len(prompts)), key=lambda k: _natural_key(prompts[k]))
    m_order = sorted(range(len(models)), key=lambda k: _natural_key(models[k]))
    u = np.asarray(u_king, dtype=np.float64)[np.ix_(p_order, m_order, m_order)]
    return RunGame(
        run_id, dataset, tuple(prompts[k] for k in p_order), tuple(models[k] for k in m_order), u, tuple(methods)
    )


def read_equilibrium_marginals(con: duckdb.DuckDBPyConnection, game: RunGame, method: str) -> list[np.ndarray]:
    """The rate run's stored marginals of `method` (prompt, king, rebel), in the order of `game`'s actions;
    LookupError when the run has no such equilibrium."""
    rows = con.execute(
        "SELECT player, action, mass FROM equilibrium_marginals WHERE run_id = ? AND method = ?", [game.run_id, method]
    ).fetchall()
    if not rows:
        raise NotFoundError(f"rate run {game.run_id!r} has no {method} equilibrium (rate it with --methods {method})")
    return marginals_in_game_order(game, {(player, action): value for player, action, value in rows})


def marginals_in_game_order(game: RunGame, mass: Mapping[tuple[str, str], float]) -> list[np.ndarray]:
    """(prompt, king, rebel) marginals over `game`'s actions from {(player, action): mass} (absent: 0)."""
    return [
        np.array([mass.get((player, a), 0.0) for a in actions])
        for player, actions in (("prompt", game.prompts), ("king", game.models), ("rebel", game.models))
    ]


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> pl.DataFrame:
    """A query's result as a polars frame (through Arrow)."""
    return con.sql(sql, params=params).pl()


def _insert_frame(con: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> None:
    """Append `frame` to `table`, columns matched by name (DuckDB scans the local `frame` through Arrow)."""
    if frame.height:
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM frame")


def write_analysis(con: duckdb.DuckDBPyConnection, run: RunRecord, frames: dict[str, pl.DataFrame]) -> None:
    """Write an analysis run (`run.kind` in ANALYSIS_KINDS) and its tables' frames, replacing any earlier
    rows of the same run_id, in one transaction: a failed write leaves nothing."""
    tables = _TABLES[run.kind]
    unknown = set(frames) - set(tables)
    if unknown:
        raise ValueError(f"a {run.kind} run writes {', '.join(tables)}; got {', '.join(sorted(unknown))}")
    con.execute("BEGIN TRANSACTION")
    try:
        for table in tables:
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run.run_id])
        upsert_run(con, run)
        for table, frame in frames.items():
            _insert_frame(con, table, frame.with_columns(pl.lit(run.run_id).alias("run_id")))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def latest_analysis(con: duckdb.DuckDBPyConnection, kind: str, source_run_id: str) -> str | None:
    """run_id of the newest finished `kind` analysis of rate run `source_run_id`, or None."""
    rows = con.execute(
        "SELECT run_id FROM analysis_runs WHERE kind = ? AND source_run_id = ? "
        "ORDER BY finished_at DESC, run_id DESC LIMIT 1",
        [kind, source_run_id],
    ).fetchall()
    return rows[0][0] if rows else None


def read_clone_robustness(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    return _frame(
        con,
        "SELECT target, adversary_lambda, seed, variant, n_clones, method, model_id, rank, rating, "
        "exploitability FROM clone_robustness WHERE run_id = ? "
        "ORDER BY variant, n_clones, method, rank, model_id",
        [run_id],
    )


def read_clone_verdicts(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, str]:
    return dict(con.execute("SELECT method, verdict FROM clone_verdicts WHERE run_id = ?", [run_id]).fetchall())


def read_clone_prompts(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    return _frame(
        con, "SELECT draw, prompt_id, source_prompt_id FROM clone_prompts WHERE run_id = ? ORDER BY draw", [run_id]
    )


def read_risk_dominance(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    return _frame(con, "SELECT * EXCLUDE (run_id) FROM risk_dominance WHERE run_id = ? ORDER BY equilibrium", [run_id])


def read_risk_ratings(con: duckdb.DuckDBPyConnection, run_id: str, player: str) -> pl.DataFrame:
    return _frame(
        con,
        "SELECT equilibrium, action, rating, mass FROM risk_equilibrium_ratings "
        "WHERE run_id = ? AND player = ? ORDER BY equilibrium, action",
        [run_id, player],
    )


def read_pure_nash(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    return _frame(
        con,
        "SELECT prompt_id, king, rebel FROM pure_nash_equilibria WHERE run_id = ? ORDER BY prompt_id, king, rebel",
        [run_id],
    )
