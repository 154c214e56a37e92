"""SQL for per-category leaderboards (`rate --by`): writing each group's point ratings with the rate run,
and reading them back for the console and the report. Tables and view: migrations/014_category_ratings.sql."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import duckdb
import numpy as np

RANK_DECIMALS = 6  # as ratings.rank: ratings equal to 1e-6 share a rank
GROUP_TABLES = ("category_groups", "category_ratings")


@dataclass(frozen=True, eq=False)
class GroupMethodRatings:
    """One method's king ratings of a group's models; mass and exploitability for equilibria."""

    method: str
    models: tuple[str, ...]
    rating: np.ndarray
    mass: np.ndarray | None = None
    exploitability: float | None = None


@dataclass(frozen=True, eq=False)
class GroupRecord:
    """A group of prompts (a category or cluster) as a rate run with --by rated it, or why it did not.
    `prompts`: the group's prompts in the dataset; `prompts_rated` / `models_rated`: the solved tensor's
    size; `reason`: why it was skipped, or what the missing-cell policy did."""

    grouping: str
    category: str
    prompts: int
    prompts_rated: int = 0
    models_rated: int = 0
    ratings: tuple[GroupMethodRatings, ...] = ()
    skipped: bool = False
    reason: str | None = None


def write_groups(con: duckdb.DuckDBPyConnection, run_id: str, groups: Sequence[GroupRecord]) -> None:
    """Insert the run's groups and their ratings (inside the caller's transaction; the caller deleted
    earlier rows of the run)."""
    for g in groups:
        con.execute(
            "INSERT INTO category_groups (run_id, grouping, category, prompts, prompts_rated, models_rated, "
            "status, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                run_id,
                g.grouping,
                g.category,
                g.prompts,
                g.prompts_rated,
                g.models_rated,
                "skipped" if g.skipped else "rated",
                g.reason,
            ],
        )
        for r in g.ratings:
            _write_method(con, run_id, g, r)


def _write_method(con: duckdb.DuckDBPyConnection, run_id: str, g: GroupRecord, r: GroupMethodRatings) -> None:
    n = len(r.models)
    rating = np.asarray(r.rating, dtype=np.float64)
    if rating.shape != (n,) or not np.all(np.isfinite(rating)):
        raise ValueError(f"{g.grouping} {g.category!r}, {r.method}: ratings must be {n} finite numbers")
    mass = [None] * n if r.mass is None else np.asarray(r.mass, dtype=np.float64).tolist()
    con.execute(
        "INSERT INTO category_ratings (run_id, grouping, category, method, model_id, rating, rank, mass, prompts, "
        "exploitability) "
        f"SELECT $run, $grouping, $category, $method, model_id, rating, "
        f"rank() OVER (ORDER BY round(rating, {RANK_DECIMALS}) DESC), mass, $prompts, $exploitability "
        "FROM (SELECT unnest($models::VARCHAR[]) AS model_id, unnest($ratings::DOUBLE[]) AS rating, "
        "unnest($mass::DOUBLE[]) AS mass)",
        {
            "run": run_id,
            "grouping": g.grouping,
            "category": g.category,
            "method": r.method,
            "prompts": g.prompts_rated,
            "exploitability": r.exploitability,
            "models": list(r.models),
            "ratings": rating.tolist(),
            "mass": mass,
        },
    )


# ---------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class GroupRow:
    """One `category_groups` row."""

    grouping: str
    category: str
    prompts: int
    prompts_rated: int
    models_rated: int
    status: str
    reason: str | None


@dataclass(frozen=True)
class GroupRating:
    """One `category_ratings` row."""

    grouping: str
    category: str
    method: str
    model_id: str
    rating: float
    rank: int
    mass: float | None
    prompts: int
    exploitability: float | None


def read_groups(con: duckdb.DuckDBPyConnection, run_id: str) -> list[GroupRow]:
    """The run's groups, rated or skipped, by grouping and name (none for a run without --by)."""
    cursor = con.execute(
        "SELECT grouping, category, prompts, prompts_rated, models_rated, status, reason "
        "FROM category_groups WHERE run_id = ? ORDER BY grouping, category",
        [run_id],
    )
    return [GroupRow(*row) for row in cursor.fetchall()]


def read_group_ratings(con: duckdb.DuckDBPyConnection, run_id: str) -> list[GroupRating]:
    """The run's per-group ratings, by grouping, group, method and rank."""
    cursor = con.execute(
        "SELECT grouping, category, method, model_id, rating, rank, mass, prompts, exploitability "
        "FROM category_ratings WHERE run_id = ? ORDER BY grouping, category, method, rank, model_id",
        [run_id],
    )
    return [GroupRating(*row) for row in cursor.fetchall()]
