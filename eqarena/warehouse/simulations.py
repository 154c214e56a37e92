"""SQL for simulated improvement paths (migrations/012_simulations.sql): a simulation run, its `runs`
row and its steps written in one transaction; the steps read back as a polars frame."""

from __future__ import annotations

import duckdb
import polars as pl

from eqarena.warehouse.runs import RunRecord, to_json, upsert_run

STEP_COLUMNS = (
    "method",
    "setting",
    "trial",
    "iteration",
    "prompt_entropy",
    "model_entropy",
    "added_model",
    "added_prompt",
    "prompt_marginal",
    "equilibrium_prompt_skills",
    "rounds",
    "top_ranked",
)


def write_simulation(con: duckdb.DuckDBPyConnection, run: RunRecord, kind: str, steps: pl.DataFrame) -> None:
    """Write simulation run `run` (its `runs` row, its `simulation_runs` row with run.parameters) and
    `steps` (STEP_COLUMNS), replacing earlier rows of the same run_id; a failed write leaves nothing."""
    missing = set(STEP_COLUMNS) - set(steps.columns)
    if missing:
        raise ValueError(f"simulation steps lack columns {', '.join(sorted(missing))}")
    frame = steps.select(STEP_COLUMNS).with_columns(pl.lit(run.run_id).alias("run_id"))  # noqa: F841 (scanned by DuckDB)
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM simulation_steps WHERE run_id = ?", [run.run_id])
        con.execute("DELETE FROM simulation_runs WHERE run_id = ?", [run.run_id])
        upsert_run(con, run)
        con.execute(
            "INSERT INTO simulation_runs (run_id, kind, parameters, started_at, finished_at) VALUES (?, ?, ?, ?, ?)",
            [run.run_id, kind, to_json(run.parameters), run.started_at, run.finished_at],
        )
        if steps.height:
            con.execute("INSERT INTO simulation_steps BY NAME SELECT * FROM frame")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def read_simulation_steps(con: duckdb.DuckDBPyConnection, run_id: str) -> pl.DataFrame:
    """The steps of simulation run `run_id`, ordered by method, setting, trial and iteration."""
    return con.sql(
        "SELECT * EXCLUDE (run_id) FROM simulation_steps WHERE run_id = ? ORDER BY method, setting, trial, iteration",
        params=[run_id],
    ).pl()
