"""SQL for rating runs: writing a run's ratings, equilibria, contributions and coverage (one
transaction), and reading them back for reports. Tables and views: migrations/003_ratings.sql."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

import duckdb
import numpy as np

from warehouse.runs import RunRecord, to_json, upsert_run
from warehouse.tensor import Dropped, PayoffTensor

PLAYERS = ("prompt", "king", "rebel")
JOINT_MASS_THRESHOLD = 1e-7  # CCE joint cells below this are not stored (their total is)
RANK_DECIMALS = 6            # ratings equal to 1e-6 share a rank


@dataclass(frozen=True, eq=False)
class MethodRatings:
    """Ratings of one player's actions under one method; mass / ci arrays optional (None)."""

    method: str
    player: str
    actions: Sequence[str]
    rating: np.ndarray
    mass: np.ndarray | None = None
    ci_lo: np.ndarray | None = None
    ci_hi: np.ndarray | None = None
    imputed_share: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class EquilibriumRecord:
    """A solved equilibrium as stored: marginals[player] over the tensor's actions, the CCE joint
    (P, M, M) or None, and the king x rebel contributions (M, M) or None."""

    method: str
    solution_concept: str
    target: str
    solver: str
    exploitability: float
    steps: int | None
    final_temperature: float | None
    seconds: float | None
    diagnostics: dict
    marginals: dict[str, np.ndarray]
    joint: np.ndarray | None = None
    contributions: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class IntervalRecord:
    """Bootstrap confidence of one method's model ratings under one resampling scheme (M models):
    full-data `rating`, percentile interval lo / hi and `median`, rank_probabilities (M, M)
    [model, rank - 1], top_k {1: (M,), 3: (M,)} = P(rank <= k)."""

    method: str
    scheme: str
    models: Sequence[str]
    rating: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    median: np.ndarray
    confidence: float
    rank_probabilities: np.ndarray
    top_k: dict[int, np.ndarray]
    replicates: int
    max_exploitability: float | None = None


def _insert_columns(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, tuple[str, list]]) -> None:
    """Insert column-wise lists in one statement (unnest), far faster than executemany."""
    names = list(columns)
    if not names or not len(columns[names[0]][1]):
        return
    selects = ", ".join(f"unnest(${k + 1}::{columns[n][0]}[]) AS {n}" for k, n in enumerate(names))
    con.execute(
        f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM (SELECT {selects})",
        [columns[n][1] for n in names],
    )


def _floats(values: np.ndarray | None, n: int) -> list:
    if values is None:
        return [None] * n
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, dtype=np.float64)]


_RUN_TABLES = ("payoffs", "ratings", "equilibria", "equilibrium_marginals", "equilibrium_joint",
               "contributions", "coverage", "run_inputs", "dropped", "rating_intervals", "rank_probabilities")


def write_rate_run(
    con: duckdb.DuckDBPyConnection,
    run: RunRecord,
    tensor: PayoffTensor,
    coverage_tensor: PayoffTensor,
    dropped: Dropped,
    ratings: Sequence[MethodRatings],
    equilibria: Sequence[EquilibriumRecord],
    intervals: Sequence[IntervalRecord] = (),
) -> None:
    """Write everything a rate run produced, replacing any earlier rows of the same run_id, in one
    transaction (nothing partial on failure). `tensor` is the solved (complete) tensor,
    `coverage_tensor` the one before the missing-data policy; `intervals` the bootstrap confidence."""
    con.execute("BEGIN TRANSACTION")
    try:
        for table in _RUN_TABLES:
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run.run_id])
        upsert_run(con, run)
        _write_payoffs(con, run.run_id, tensor)
        _write_coverage(con, run.run_id, coverage_tensor, dropped)
        for r in ratings:
            _write_ratings(con, run.run_id, r)
        for eq in equilibria:
            _write_equilibrium(con, run.run_id, tensor, eq)
        for record in intervals:
            _write_interval(con, run.run_id, record)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _write_payoffs(con: duckdb.DuckDBPyConnection, run_id: str, t: PayoffTensor) -> None:
    P, M, _ = t.shape
    p, i, j = np.nonzero(~np.eye(M, dtype=bool)[None].repeat(P, axis=0))
    prompts, models = np.asarray(t.prompts, dtype=object), np.asarray(t.models, dtype=object)
    _insert_columns(con, "payoffs", {
        "run_id": ("VARCHAR", [run_id] * len(p)),
        "prompt_id": ("VARCHAR", prompts[p].tolist()),
        "king": ("VARCHAR", models[i].tolist()),
        "rebel": ("VARCHAR", models[j].tolist()),
        "u_king": ("DOUBLE", t.u_king[p, i, j].astype(float).tolist()),
        "samples": ("INTEGER", (t.samples[p, i, j] + t.samples[p, j, i]).astype(int).tolist()),
        "imputed": ("BOOLEAN", ([False] * len(p) if t.imputed is None else t.imputed[p, i, j].tolist())),
    })


def _write_coverage(con: duckdb.DuckDBPyConnection, run_id: str, t: PayoffTensor, dropped: Dropped) -> None:
    M = len(t.models)
    counts = t.pair_coverage()
    i, j = np.nonzero(~np.eye(M, dtype=bool))
    _insert_columns(con, "coverage", {
        "run_id": ("VARCHAR", [run_id] * len(i)),
        "model_a": ("VARCHAR", [t.models[k] for k in i]),
        "model_b": ("VARCHAR", [t.models[k] for k in j]),
        "prompts_total": ("INTEGER", [len(t.prompts)] * len(i)),
        "prompts_covered": ("INTEGER", counts[i, j].astype(int).tolist()),
    })
    _insert_columns(con, "run_inputs", {
        "run_id": ("VARCHAR", [run_id] * len(t.inputs)),
        "judge": ("VARCHAR", [j for j, _, _ in t.inputs]),
        "status": ("VARCHAR", [s for _, s, _ in t.inputs]),
        "judgments": ("BIGINT", [n for _, _, n in t.inputs]),
    })
    gone = [("prompt", n, c) for n, c in dropped.prompts] + [("model", n, c) for n, c in dropped.models]
    _insert_columns(con, "dropped", {
        "run_id": ("VARCHAR", [run_id] * len(gone)),
        "player": ("VARCHAR", [g[0] for g in gone]),
        "action": ("VARCHAR", [g[1] for g in gone]),
        "missing_cells": ("INTEGER", [g[2] for g in gone]),
    })


def _write_ratings(con: duckdb.DuckDBPyConnection, run_id: str, r: MethodRatings) -> None:
    if r.player not in PLAYERS:
        raise ValueError(f"player must be one of {PLAYERS}; got {r.player!r}")
    n = len(r.actions)
    rating = np.asarray(r.rating, dtype=np.float64)
    if rating.shape != (n,) or not np.all(np.isfinite(rating)):
        raise ValueError(f"{r.method} {r.player} ratings must be {n} finite numbers")
    values = ", ".join(f"unnest(${k}::{t}[]) AS {c}" for k, (c, t) in enumerate(
        [("action", "VARCHAR"), ("rating", "DOUBLE"), ("mass", "DOUBLE"), ("ci_lo", "DOUBLE"), ("ci_hi", "DOUBLE"),
         ("imputed_share", "DOUBLE")],
        start=3))
    con.execute(
        f"INSERT INTO ratings (run_id, method, player, action, rating, rank, mass, ci_lo, ci_hi, imputed_share) "
        f"SELECT $1, $2, '{r.player}', action, rating, "
        f"rank() OVER (ORDER BY round(rating, {RANK_DECIMALS}) DESC), mass, ci_lo, ci_hi, imputed_share "
        f"FROM (SELECT {values})",
        [run_id, r.method, list(r.actions), rating.tolist(), _floats(r.mass, n), _floats(r.ci_lo, n),
         _floats(r.ci_hi, n), _floats(r.imputed_share, n)],
    )


def _write_equilibrium(con: duckdb.DuckDBPyConnection, run_id: str, t: PayoffTensor, eq: EquilibriumRecord) -> None:
    joint_cells, omitted = None, None
    if eq.joint is not None:
        joint = np.asarray(eq.joint, dtype=np.float64)
        keep = joint >= JOINT_MASS_THRESHOLD
        p, i, j = np.nonzero(keep)
        joint_cells, omitted = int(keep.sum()), float(joint[~keep].sum())
        prompts, models = np.asarray(t.prompts, dtype=object), np.asarray(t.models, dtype=object)
        _insert_columns(con, "equilibrium_joint", {
            "run_id": ("VARCHAR", [run_id] * len(p)),
            "method": ("VARCHAR", [eq.method] * len(p)),
            "prompt_id": ("VARCHAR", prompts[p].tolist()),
            "king": ("VARCHAR", models[i].tolist()),
            "rebel": ("VARCHAR", models[j].tolist()),
            "mass": ("DOUBLE", joint[p, i, j].tolist()),
        })
    con.execute(
        "INSERT INTO equilibria (run_id, method, solution_concept, target, solver, exploitability, steps, "
        "final_temperature, seconds, joint_cells, joint_mass_omitted, diagnostics) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [run_id, eq.method, eq.solution_concept, eq.target, eq.solver, float(eq.exploitability),
         None if eq.steps is None else int(eq.steps),
         None if eq.final_temperature is None else float(eq.final_temperature),
         None if eq.seconds is None else float(eq.seconds), joint_cells, omitted, to_json(eq.diagnostics)],
    )
    for player, actions in zip(PLAYERS, (t.prompts, t.models, t.models)):
        mass = np.asarray(eq.marginals[player], dtype=np.float64)
        _insert_columns(con, "equilibrium_marginals", {
            "run_id": ("VARCHAR", [run_id] * len(actions)),
            "method": ("VARCHAR", [eq.method] * len(actions)),
            "player": ("VARCHAR", [player] * len(actions)),
            "action": ("VARCHAR", list(actions)),
            "mass": ("DOUBLE", mass.tolist()),
        })
    if eq.contributions is not None:
        delta = np.asarray(eq.contributions, dtype=np.float64)
        i, j = np.nonzero(np.ones_like(delta, dtype=bool))
        _insert_columns(con, "contributions", {
            "run_id": ("VARCHAR", [run_id] * len(i)),
            "method": ("VARCHAR", [eq.method] * len(i)),
            "king": ("VARCHAR", [t.models[k] for k in i]),
            "rebel": ("VARCHAR", [t.models[k] for k in j]),
            "delta": ("DOUBLE", delta[i, j].tolist()),
        })


def _write_interval(con: duckdb.DuckDBPyConnection, run_id: str, b: IntervalRecord) -> None:
    m = len(b.models)
    probs = np.asarray(b.rank_probabilities, dtype=np.float64)
    if probs.shape != (m, m):
        raise ValueError(f"{b.method} {b.scheme}: rank_probabilities must be ({m}, {m}); got {probs.shape}")
    _insert_columns(con, "rating_intervals", {
        "run_id": ("VARCHAR", [run_id] * m),
        "method": ("VARCHAR", [b.method] * m),
        "scheme": ("VARCHAR", [b.scheme] * m),
        "model_id": ("VARCHAR", list(b.models)),
        "rating": ("DOUBLE", np.asarray(b.rating, dtype=float).tolist()),
        "lo": ("DOUBLE", np.asarray(b.lo, dtype=float).tolist()),
        "hi": ("DOUBLE", np.asarray(b.hi, dtype=float).tolist()),
        "median": ("DOUBLE", np.asarray(b.median, dtype=float).tolist()),
        "confidence": ("DOUBLE", [float(b.confidence)] * m),
        "p_top1": ("DOUBLE", np.asarray(b.top_k[1], dtype=float).tolist()),
        "p_top3": ("DOUBLE", np.asarray(b.top_k[3], dtype=float).tolist()),
        "replicates": ("INTEGER", [int(b.replicates)] * m),
        "max_exploitability": ("DOUBLE", [None if b.max_exploitability is None else float(b.max_exploitability)] * m),
    })
    i, k = np.nonzero(np.ones((m, m), dtype=bool))
    _insert_columns(con, "rank_probabilities", {
        "run_id": ("VARCHAR", [run_id] * len(i)),
        "method": ("VARCHAR", [b.method] * len(i)),
        "scheme": ("VARCHAR", [b.scheme] * len(i)),
        "model_id": ("VARCHAR", [b.models[j] for j in i]),
        "rank": ("INTEGER", (k + 1).tolist()),
        "probability": ("DOUBLE", probs[i, k].tolist()),
    })


# ---------------------------------------------------------------------------------------- reading


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def latest_rate_run_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """run_id of the newest finished rate run (view latest_rate_run), or None."""
    row = con.execute("SELECT run_id FROM latest_rate_run").fetchone()
    return row[0] if row else None


def read_run(con: duckdb.DuckDBPyConnection, run_id: str) -> dict:
    """The `runs` row of run_id with JSON columns decoded; LookupError when absent."""
    rows = _dicts(con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]))
    if not rows:
        raise LookupError(f"no run {run_id!r} in the warehouse")
    run = rows[0]
    for key in ("parameters", "versions", "timings"):
        run[key] = json.loads(run[key]) if run[key] else {}
    return run


def read_ratings(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """Every ratings row of the run: method, player, action, rating, rank, mass, ci_lo, ci_hi."""
    return _dicts(con.execute(
        "SELECT method, player, action, rating, rank, mass, ci_lo, ci_hi FROM ratings "
        "WHERE run_id = ? ORDER BY method, player, rank, action", [run_id]))


def read_equilibria(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """One dict per equilibrium method with its diagnostics and support sizes per player."""
    rows = _dicts(con.execute(
        """SELECT e.*, s.player, s.support, s.actions
           FROM equilibria e LEFT JOIN equilibrium_support s USING (run_id, method)
           WHERE e.run_id = ? ORDER BY e.method, s.player""", [run_id]))
    out: dict[str, dict] = {}
    for r in rows:
        eq = out.setdefault(r["method"], {k: v for k, v in r.items() if k not in ("player", "support", "actions")})
        eq.setdefault("support", {})[r["player"]] = (r["support"], r["actions"])
    for eq in out.values():
        eq["diagnostics"] = json.loads(eq["diagnostics"]) if eq["diagnostics"] else {}
    return list(out.values())


def read_marginals(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    return _dicts(con.execute(
        "SELECT method, player, action, mass FROM equilibrium_marginals WHERE run_id = ? "
        "ORDER BY method, player, mass DESC, action", [run_id]))


def read_payoffs(con: duckdb.DuckDBPyConnection, run_id: str, prompt_ids: Sequence[str]) -> list[dict]:
    """u_king cells of the given prompts: prompt_id, king, rebel, u_king, samples."""
    return _dicts(con.execute(
        "SELECT prompt_id, king, rebel, u_king, samples FROM payoffs "
        "WHERE run_id = $run AND list_contains($prompts, prompt_id) ORDER BY prompt_id, king, rebel",
        {"run": run_id, "prompts": list(prompt_ids)}))


def read_mean_payoffs(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, float]:
    """Mean u_king of each model over the run's prompts and opponents (view model_mean_payoffs)."""
    rows = con.execute("SELECT model_id, mean_payoff FROM model_mean_payoffs WHERE run_id = ?", [run_id]).fetchall()
    return {m: float(v) for m, v in rows}


def read_contributions_by_family(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    return _dicts(con.execute(
        "SELECT method, king, rebel_family, delta FROM contributions_by_family WHERE run_id = ? "
        "ORDER BY method, king, rebel_family", [run_id]))


def read_contributions(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    return _dicts(con.execute(
        "SELECT method, king, rebel, delta FROM contributions WHERE run_id = ? ORDER BY method, king, rebel",
        [run_id]))


def read_coverage(con: duckdb.DuckDBPyConnection, run_id: str) -> dict:
    """Pair coverage rows, judgment counts by judge and status, what was dropped, and for an imputed
    tensor the number of imputed cells and each model rating's imputed share (king, per method)."""
    return {
        "pairs": _dicts(con.execute(
            "SELECT model_a, model_b, prompts_total, prompts_covered FROM coverage WHERE run_id = ? "
            "ORDER BY model_a, model_b", [run_id])),
        "inputs": _dicts(con.execute(
            "SELECT judge, status, judgments FROM run_inputs WHERE run_id = ? ORDER BY judge, status", [run_id])),
        "dropped": _dicts(con.execute(
            "SELECT player, action, missing_cells FROM dropped WHERE run_id = ? ORDER BY player, action", [run_id])),
        "imputed_cells": con.execute("SELECT coalesce(max(imputed_cells), 0) FROM payoff_imputation "
                                     "WHERE run_id = ?", [run_id]).fetchall()[0][0],
        "imputed_shares": _dicts(con.execute(
            "SELECT method, action AS model_id, imputed_share FROM ratings WHERE run_id = ? AND player = 'king' "
            "AND imputed_share IS NOT NULL ORDER BY method, rank, action", [run_id])),
    }


def read_model_families(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT model_id, family FROM models").fetchall())


def read_prompt_texts(con: duckdb.DuckDBPyConnection, dataset: str, prompt_ids: Sequence[str]) -> dict[str, str]:
    rows = con.execute(
        "SELECT prompt_id, text FROM prompts WHERE dataset = $dataset AND list_contains($ids, prompt_id)",
        {"dataset": dataset, "ids": list(prompt_ids)}).fetchall()
    return dict(rows)


def read_rating_intervals(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """Bootstrap intervals of the run's model ratings: method, scheme, model_id, rating, lo, hi, median,
    confidence, p_top1, p_top3, replicates, max_exploitability; best full-data rating first."""
    return _dicts(con.execute(
        "SELECT method, scheme, model_id, rating, lo, hi, median, confidence, p_top1, p_top3, replicates, "
        "max_exploitability FROM rating_intervals WHERE run_id = ? ORDER BY method, scheme, rating DESC, model_id",
        [run_id]))


def read_rank_probabilities(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict]:
    """P(rank) of every model of the run: method, scheme, model_id, rank, probability."""
    return _dicts(con.execute(
        "SELECT method, scheme, model_id, rank, probability FROM rank_probabilities WHERE run_id = ? "
        "ORDER BY method, scheme, model_id, rank", [run_id]))
