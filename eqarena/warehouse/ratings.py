"""SQL for rating runs: writing a run's ratings, equilibria, contributions and coverage (one
transaction), and reading them back for reports. Tables and views: migrations/003_ratings.sql."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Sequence, TypeVar

import duckdb
import numpy as np
import polars as pl

from eqarena.exceptions import NotFoundError
from eqarena.warehouse.category_ratings import GROUP_TABLES, GroupRecord, write_groups
from eqarena.warehouse.runs import RunRecord, to_json, upsert_run
from eqarena.warehouse.tensor import Dropped, PayoffTensor

PLAYERS = ("prompt", "king", "rebel")
JOINT_MASS_THRESHOLD = 1e-7  # CCE joint cells below this are not stored (their total is)
RANK_DECIMALS = 6  # ratings equal to 1e-6 share a rank


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
    full-data `rating`, interval lo / hi holding it (`solvers.bootstrap.intervals`) and `median`,
    rank_probabilities (M, M) [model, rank - 1], top_k {1: (M,), 3: (M,)} = P(rank <= k)."""

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


def _insert_cells(
    con: duckdb.DuckDBPyConnection,
    table: str,
    fixed: dict[str, str],
    t: PayoffTensor,
    cells: tuple[np.ndarray, np.ndarray, np.ndarray],
    values: dict[str, np.ndarray],
) -> None:
    """Insert one row per (prompt, king, rebel) cell of `t`, given as index arrays: the numbers travel
    as Arrow columns and the names are looked up in DuckDB, so a 32-million-cell tensor never becomes
    Python objects. `fixed`: columns with one value for every row (run_id, method)."""
    p, i, j = cells
    if not len(p):
        return
    frame = pl.DataFrame(
        {"_p": p.astype(np.int32) + 1, "_i": i.astype(np.int32) + 1, "_j": j.astype(np.int32) + 1, **values}
    )
    names = [*fixed, "prompt_id", "king", "rebel", *values]
    selects = [*(f"${c}" for c in fixed), "$prompts[_p]", "$models[_i]", "$models[_j]", *values]
    con.register("_cells", frame)
    try:
        con.execute(
            f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join(selects)} FROM _cells",
            {**fixed, "prompts": list(t.prompts), "models": list(t.models)},
        )
    finally:
        con.unregister("_cells")


def _floats(values: np.ndarray | None, n: int) -> list:
    if values is None:
        return [None] * n
    return [None if not np.isfinite(v) else float(v) for v in np.asarray(values, dtype=np.float64)]


_RUN_TABLES = (
    "payoffs",
    "ratings",
    "equilibria",
    "equilibrium_marginals",
    "equilibrium_joint",
    "contributions",
    "coverage",
    "run_inputs",
    "dropped",
    "rating_intervals",
    "rank_probabilities",
    *GROUP_TABLES,
)


def write_rate_run(
    con: duckdb.DuckDBPyConnection,
    run: RunRecord,
    tensor: PayoffTensor,
    coverage_tensor: PayoffTensor,
    dropped: Dropped,
    ratings: Sequence[MethodRatings],
    equilibria: Sequence[EquilibriumRecord],
    intervals: Sequence[IntervalRecord] = (),
    groups: Sequence[GroupRecord] = (),
) -> None:
    """Write everything a rate run produced, replacing any earlier rows of the same run_id, in one
    transaction (nothing partial on failure). `tensor` is the solved (complete) tensor,
    `coverage_tensor` the one before the missing-data policy; `intervals` the bootstrap confidence;
    `groups` the per-category ratings of `rate --by`."""
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
        write_groups(con, run.run_id, groups)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _write_payoffs(con: duckdb.DuckDBPyConnection, run_id: str, t: PayoffTensor) -> None:
    """The covered off-diagonal cells of `t` (all of them, unless the run keeps only the judged cells)."""
    M = t.shape[1]
    cells = t.covered & ~np.eye(M, dtype=bool)[None]
    p, i, j = np.nonzero(cells)
    samples = t.samples + np.swapaxes(t.samples, 1, 2)
    _insert_cells(
        con,
        "payoffs",
        {"run_id": run_id},
        t,
        (p, i, j),
        {
            "u_king": t.u_king[cells].astype(np.float64),
            "samples": samples[cells].astype(np.int32),
            "imputed": np.zeros(len(p), dtype=bool) if t.imputed is None else t.imputed[cells],
        },
    )


def _write_coverage(con: duckdb.DuckDBPyConnection, run_id: str, t: PayoffTensor, dropped: Dropped) -> None:
    M = len(t.models)
    counts = t.pair_coverage()
    i, j = np.nonzero(~np.eye(M, dtype=bool))
    _insert_columns(
        con,
        "coverage",
        {
            "run_id": ("VARCHAR", [run_id] * len(i)),
            "model_a": ("VARCHAR", [t.models[k] for k in i]),
            "model_b": ("VARCHAR", [t.models[k] for k in j]),
            "prompts_total": ("INTEGER", [len(t.prompts)] * len(i)),
            "prompts_covered": ("INTEGER", counts[i, j].astype(int).tolist()),
        },
    )
    _insert_columns(
        con,
        "run_inputs",
        {
            "run_id": ("VARCHAR", [run_id] * len(t.inputs)),
            "judge": ("VARCHAR", [j for j, _, _ in t.inputs]),
            "status": ("VARCHAR", [s for _, s, _ in t.inputs]),
            "judgments": ("BIGINT", [n for _, _, n in t.inputs]),
        },
    )
    gone = [("prompt", n, c) for n, c in dropped.prompts] + [("model", n, c) for n, c in dropped.models]
    _insert_columns(
        con,
        "dropped",
        {
            "run_id": ("VARCHAR", [run_id] * len(gone)),
            "player": ("VARCHAR", [g[0] for g in gone]),
            "action": ("VARCHAR", [g[1] for g in gone]),
            "missing_cells": ("INTEGER", [g[2] for g in gone]),
        },
    )


def _write_ratings(con: duckdb.DuckDBPyConnection, run_id: str, r: MethodRatings) -> None:
    if r.player not in PLAYERS:
        raise ValueError(f"player must be one of {PLAYERS}; got {r.player!r}")
    n = len(r.actions)
    rating = np.asarray(r.rating, dtype=np.float64)
    if rating.shape != (n,) or not np.all(np.isfinite(rating)):
        raise ValueError(f"{r.method} {r.player} ratings must be {n} finite numbers")
    values = ", ".join(
        f"unnest(${k}::{t}[]) AS {c}"
        for k, (c, t) in enumerate(
            [
                ("action", "VARCHAR"),
                ("rating", "DOUBLE"),
                ("mass", "DOUBLE"),
                ("ci_lo", "DOUBLE"),
                ("ci_hi", "DOUBLE"),
                ("imputed_share", "DOUBLE"),
            ],
            start=3,
        )
    )
    con.execute(
        f"INSERT INTO ratings (run_id, method, player, action, rating, rank, mass, ci_lo, ci_hi, imputed_share) "
        f"SELECT $1, $2, '{r.player}', action, rating, "
        f"rank() OVER (ORDER BY round(rating, {RANK_DECIMALS}) DESC), mass, ci_lo, ci_hi, imputed_share "
        f"FROM (SELECT {values})",
        [
            run_id,
            r.method,
            list(r.actions),
            rating.tolist(),
            _floats(r.mass, n),
            _floats(r.ci_lo, n),
            _floats(r.ci_hi, n),
            _floats(r.imputed_share, n),
        ],
    )


def _write_equilibrium(con: duckdb.DuckDBPyConnection, run_id: str, t: PayoffTensor, eq: EquilibriumRecord) -> None:
    joint_cells, omitted = None, None
    if eq.joint is not None:
        joint = np.asarray(eq.joint, dtype=np.float64)
        keep = joint >= JOINT_MASS_THRESHOLD
        p, i, j = np.nonzero(keep)
        joint_cells, omitted = int(keep.sum()), float(joint[~keep].sum())
        _insert_cells(
            con, "equilibrium_joint", {"run_id": run_id, "method": eq.method}, t, (p, i, j), {"mass": joint[p, i, j]}
        )
    con.execute(
        "INSERT INTO equilibria (run_id, method, solution_concept, target, solver, exploitability, steps, "
        "final_temperature, seconds, joint_cells, joint_mass_omitted, diagnostics) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id,
            eq.method,
            eq.solution_concept,
            eq.target,
            eq.solver,
            float(eq.exploitability),
            None if eq.steps is None else int(eq.steps),
            None if eq.final_temperature is None else float(eq.final_temperature),
            None if eq.seconds is None else float(eq.seconds),
            joint_cells,
            omitted,
            to_json(eq.diagnostics),
        ],
    )
    for player, actions in zip(PLAYERS, (t.prompts, t.models, t.models)):
        mass = np.asarray(eq.marginals[player], dtype=np.float64)
        _insert_columns(
            con,
            "equilibrium_marginals",
            {
                "run_id": ("VARCHAR", [run_id] * len(actions)),
                "method": ("VARCHAR", [eq.method] * len(actions)),
                "player": ("VARCHAR", [player] * len(actions)),
                "action": ("VARCHAR", list(actions)),
                "mass": ("DOUBLE", mass.tolist()),
            },
        )
    if eq.contributions is not None:
        delta = np.asarray(eq.contributions, dtype=np.float64)
        i, j = np.nonzero(np.ones_like(delta, dtype=bool))
        _insert_columns(
            con,
            "contributions",
            {
                "run_id": ("VARCHAR", [run_id] * len(i)),
                "method": ("VARCHAR", [eq.method] * len(i)),
                "king": ("VARCHAR", [t.models[k] for k in i]),
                "rebel": ("VARCHAR", [t.models[k] for k in j]),
                "delta": ("DOUBLE", delta[i, j].tolist()),
            },
        )


def _write_interval(con: duckdb.DuckDBPyConnection, run_id: str, b: IntervalRecord) -> None:
    m = len(b.models)
    probs = np.asarray(b.rank_probabilities, dtype=np.float64)
    if probs.shape != (m, m):
        raise ValueError(f"{b.method} {b.scheme}: rank_probabilities must be ({m}, {m}); got {probs.shape}")
    _insert_columns(
        con,
        "rating_intervals",
        {
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
            "max_exploitability": (
                "DOUBLE",
                [None if b.max_exploitability is None else float(b.max_exploitability)] * m,
            ),
        },
    )
    i, k = np.nonzero(np.ones((m, m), dtype=bool))
    _insert_columns(
        con,
        "rank_probabilities",
        {
            "run_id": ("VARCHAR", [run_id] * len(i)),
            "method": ("VARCHAR", [b.method] * len(i)),
            "scheme": ("VARCHAR", [b.scheme] * len(i)),
            "model_id": ("VARCHAR", [b.models[j] for j in i]),
            "rank": ("INTEGER", (k + 1).tolist()),
            "probability": ("DOUBLE", probs[i, k].tolist()),
        },
    )


# ---------------------------------------------------------------------------------------- reading
# Readers return frozen row types whose fields are the queries' column names: `_rows` builds them by
# name, so a renamed or missing column fails at the first read (tests/test_report_render.py reads them all).

T = TypeVar("T")


@dataclass(frozen=True)
class RatingRow:
    """One `ratings` row: `action` (a prompt or model id) of `player` rated by `method`."""

    method: str
    player: str
    action: str
    rating: float
    rank: int
    mass: float | None
    ci_lo: float | None
    ci_hi: float | None


@dataclass(frozen=True)
class EquilibriumRow:
    """One solved equilibrium with its diagnostics and, per player, (support size, actions)."""

    method: str
    solution_concept: str
    target: str
    solver: str
    exploitability: float
    steps: int | None
    final_temperature: float | None
    seconds: float | None
    joint_cells: int | None
    joint_mass_omitted: float | None
    diagnostics: dict
    support: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class MarginalRow:
    method: str
    player: str
    action: str
    mass: float


@dataclass(frozen=True)
class PayoffCell:
    prompt_id: str
    king: str
    rebel: str
    u_king: float
    samples: int


@dataclass(frozen=True)
class FamilyContribution:
    """delta(king, rebel family): the part of the king's rating owed to a family of rebels (paper Section 4.3)."""

    method: str
    king: str
    rebel_family: str
    delta: float


@dataclass(frozen=True)
class PairCoverage:
    model_a: str
    model_b: str
    prompts_total: int
    prompts_covered: int


@dataclass(frozen=True)
class InputCount:
    judge: str
    status: str
    judgments: int


@dataclass(frozen=True)
class DroppedAction:
    player: str
    action: str
    missing_cells: int


@dataclass(frozen=True)
class ImputedShare:
    method: str
    model_id: str
    imputed_share: float


@dataclass(frozen=True)
class Coverage:
    """What a rate run's tensor covered: pair coverage, judgment counts by judge and status, what the
    missing policy dropped, and for an imputed tensor the imputed cells and each rating's imputed share."""

    pairs: list[PairCoverage]
    inputs: list[InputCount]
    dropped: list[DroppedAction]
    imputed_cells: int
    imputed_shares: list[ImputedShare]


@dataclass(frozen=True)
class IntervalRow:
    """Bootstrap interval of one model's rating under one method and scheme (rating_intervals)."""

    method: str
    scheme: str
    model_id: str
    rating: float
    lo: float
    hi: float
    median: float
    confidence: float
    p_top1: float
    p_top3: float
    replicates: int
    max_exploitability: float | None


@dataclass(frozen=True)
class RankProbability:
    method: str
    scheme: str
    model_id: str
    rank: int
    probability: float


def _rows(cursor: duckdb.DuckDBPyConnection, row_type: type[T]) -> list[T]:
    """The cursor's rows as `row_type`, fields matched to columns by name."""
    names = [d[0] for d in cursor.description]
    return [row_type(**dict(zip(names, row))) for row in cursor.fetchall()]


def latest_rate_run_id(con: duckdb.DuckDBPyConnection, dataset: str | None = None) -> str | None:
    """run_id of the newest finished rate run (view latest_rate_run), of `dataset` if given, or None."""
    if dataset is None:
        rows = con.execute("SELECT run_id FROM latest_rate_run").fetchall()
    else:
        rows = con.execute(
            "SELECT run_id FROM rate_runs WHERE dataset = ? "
            "ORDER BY finished_at DESC, started_at DESC, run_id DESC LIMIT 1",
            [dataset],
        ).fetchall()
    return rows[0][0] if rows else None


def read_run(con: duckdb.DuckDBPyConnection, run_id: str) -> RunRecord:
    """The `runs` row of run_id with its JSON columns decoded; LookupError when absent."""
    rows = con.execute(
        "SELECT run_id, kind, started_at, finished_at, status, parameters, versions, data_fingerprint, timings, "
        "message, flow_run_id FROM runs WHERE run_id = ?",
        [run_id],
    ).fetchall()
    if not rows:
        raise NotFoundError(f"no run {run_id!r} in the warehouse")
    (run_id, kind, started, finished, status, parameters, versions, fingerprint, timings, message, flow_run) = rows[0]
    return RunRecord(
        run_id=run_id,
        kind=kind,
        started_at=started,
        finished_at=finished,
        status=status,
        parameters=_json(parameters),
        versions=_json(versions),
        data_fingerprint=fingerprint,
        timings=_json(timings),
        message=message,
        flow_run_id=flow_run,
    )


def _json(text: str | None) -> dict:
    return json.loads(text) if text else {}


def read_ratings(con: duckdb.DuckDBPyConnection, run_id: str) -> list[RatingRow]:
    """Every ratings row of the run, by method, player, rank."""
    return _rows(
        con.execute(
            "SELECT method, player, action, rating, rank, mass, ci_lo, ci_hi FROM ratings "
            "WHERE run_id = ? ORDER BY method, player, rank, action",
            [run_id],
        ),
        RatingRow,
    )


def read_equilibria(con: duckdb.DuckDBPyConnection, run_id: str) -> list[EquilibriumRow]:
    """One row per equilibrium method with its diagnostics and support sizes per player."""
    columns = [f.name for f in fields(EquilibriumRow) if f.name not in ("support", "diagnostics")]
    rows = con.execute(
        f"""SELECT {", ".join(f"e.{c}" for c in columns)}, e.diagnostics, s.player, s.support, s.actions
            FROM equilibria e LEFT JOIN equilibrium_support s USING (run_id, method)
            WHERE e.run_id = ? ORDER BY e.method, s.player""",
        [run_id],
    ).fetchall()
    found: dict[str, tuple] = {}
    support: dict[str, dict[str, tuple[int, int]]] = {}
    for row in rows:
        *values, diagnostics, player, size, actions = row
        found.setdefault(values[0], (values, diagnostics))
        if player is not None:
            support.setdefault(values[0], {})[player] = (size, actions)
    return [
        EquilibriumRow(**dict(zip(columns, values)), diagnostics=_json(diagnostics), support=support.get(m, {}))
        for m, (values, diagnostics) in found.items()
    ]


def read_marginals(con: duckdb.DuckDBPyConnection, run_id: str) -> list[MarginalRow]:
    return _rows(
        con.execute(
            "SELECT method, player, action, mass FROM equilibrium_marginals WHERE run_id = ? "
            "ORDER BY method, player, mass DESC, action",
            [run_id],
        ),
        MarginalRow,
    )


def read_payoffs(con: duckdb.DuckDBPyConnection, run_id: str, prompt_ids: Sequence[str]) -> list[PayoffCell]:
    """u_king cells of the given prompts."""
    return _rows(
        con.execute(
            "SELECT prompt_id, king, rebel, u_king, samples FROM payoffs "
            "WHERE run_id = $run AND list_contains($prompts, prompt_id) ORDER BY prompt_id, king, rebel",
            {"run": run_id, "prompts": list(prompt_ids)},
        ),
        PayoffCell,
    )


def read_payoff_cells(
    con: duckdb.DuckDBPyConnection, run_id: str, prompt_ids: Sequence[str], kings: Sequence[str], rebels: Sequence[str]
) -> dict[tuple[str, str, str], tuple[float, bool]]:
    """(u_king, imputed) of the given prompts, kings and rebels, keyed (prompt_id, king, rebel)."""
    rows = con.execute(
        "SELECT prompt_id, king, rebel, u_king, coalesce(imputed, false) FROM payoffs "
        "WHERE run_id = $run AND list_contains($prompts, prompt_id) "
        "AND list_contains($kings, king) AND list_contains($rebels, rebel)",
        {"run": run_id, "prompts": list(prompt_ids), "kings": list(kings), "rebels": list(rebels)},
    ).fetchall()
    return {(p, k, r): (float(u), bool(imputed)) for p, k, r, u, imputed in rows}


def read_mean_payoffs(con: duckdb.DuckDBPyConnection, run_id: str) -> dict[str, float]:
    """Mean u_king of each model over the run's prompts and opponents (view model_mean_payoffs)."""
    rows = con.execute("SELECT model_id, mean_payoff FROM model_mean_payoffs WHERE run_id = ?", [run_id]).fetchall()
    return {m: float(v) for m, v in rows}


def read_contributions_by_family(con: duckdb.DuckDBPyConnection, run_id: str) -> list[FamilyContribution]:
    return _rows(
        con.execute(
            "SELECT method, king, rebel_family, delta FROM contributions_by_family WHERE run_id = ? "
            "ORDER BY method, king, rebel_family",
            [run_id],
        ),
        FamilyContribution,
    )


def read_coverage(con: duckdb.DuckDBPyConnection, run_id: str) -> Coverage:
    """What the run's tensor covered (Coverage)."""
    return Coverage(
        pairs=_rows(
            con.execute(
                "SELECT model_a, model_b, prompts_total, prompts_covered FROM coverage WHERE run_id = ? "
                "ORDER BY model_a, model_b",
                [run_id],
            ),
            PairCoverage,
        ),
        inputs=_rows(
            con.execute(
                "SELECT judge, status, judgments FROM run_inputs WHERE run_id = ? ORDER BY judge, status", [run_id]
            ),
            InputCount,
        ),
        dropped=_rows(
            con.execute(
                "SELECT player, action, missing_cells FROM dropped WHERE run_id = ? ORDER BY player, action", [run_id]
            ),
            DroppedAction,
        ),
        imputed_cells=con.execute(
            "SELECT coalesce(max(imputed_cells), 0) FROM payoff_imputation WHERE run_id = ?", [run_id]
        ).fetchall()[0][0],
        imputed_shares=_rows(
            con.execute(
                "SELECT method, action AS model_id, imputed_share FROM ratings WHERE run_id = ? AND player = 'king' "
                "AND imputed_share IS NOT NULL ORDER BY method, rank, action",
                [run_id],
            ),
            ImputedShare,
        ),
    )


def read_prompt_texts(con: duckdb.DuckDBPyConnection, dataset: str, prompt_ids: Sequence[str]) -> dict[str, str]:
    rows = con.execute(
        "SELECT prompt_id, text FROM prompts WHERE dataset = $dataset AND list_contains($ids, prompt_id)",
        {"dataset": dataset, "ids": list(prompt_ids)},
    ).fetchall()
    return dict(rows)


def read_rating_intervals(con: duckdb.DuckDBPyConnection, run_id: str) -> list[IntervalRow]:
    """Bootstrap intervals of the run's model ratings, best full-data rating first per method and scheme."""
    return _rows(
        con.execute(
            "SELECT method, scheme, model_id, rating, lo, hi, median, confidence, p_top1, p_top3, replicates, "
            "max_exploitability FROM rating_intervals WHERE run_id = ? ORDER BY method, scheme, rating DESC, model_id",
            [run_id],
        ),
        IntervalRow,
    )


def read_rank_probabilities(con: duckdb.DuckDBPyConnection, run_id: str) -> list[RankProbability]:
    """P(rank) of every model of the run."""
    return _rows(
        con.execute(
            "SELECT method, scheme, model_id, rank, probability FROM rank_probabilities WHERE run_id = ? "
            "ORDER BY method, scheme, model_id, rank",
            [run_id],
        ),
        RankProbability,
    )


def read_rating_table(
    con: duckdb.DuckDBPyConnection, run_id: str, player: str = "king", method: str | None = None
) -> pl.DataFrame:
    """One run's ratings of `player`'s actions as a polars frame (`eqarena.read_ratings`): method, action,
    rank, rating, mass, ci_lo / ci_hi (a model-rating method's own interval, else the equilibrium's
    bootstrap interval over prompts), p_top1, p_top3, imputed_share; by method, then rank."""
    return con.sql(
        """SELECT r.method, r.action, r.rank, r.rating, r.mass,
                  coalesce(r.ci_lo, i.lo) AS ci_lo, coalesce(r.ci_hi, i.hi) AS ci_hi, i.p_top1, i.p_top3,
                  r.imputed_share
           FROM ratings r
           LEFT JOIN rating_intervals i ON i.run_id = r.run_id AND i.method = r.method AND i.model_id = r.action
                AND i.scheme = 'prompts' AND r.player = 'king'
           WHERE r.run_id = $run AND r.player = $player AND ($method IS NULL OR r.method = $method)
           ORDER BY r.method, r.rank, r.action""",
        params={"run": run_id, "player": player, "method": method},
    ).pl()
