"""eqarena from Python (a notebook, a script): ingest data, rate it, read the ratings back.

    import eqarena
    eqarena.ingest("vicuna80", db="ratings.duckdb")
    run = eqarena.rate("vicuna80", db="ratings.duckdb", judges=["prd:gpt4"], bootstrap=50)
    eqarena.read_ratings("ratings.duckdb", method="ne")        # a polars frame, best model first

`ingest` and `rate` run the same pipelines as the command line, as plain Python (no Prefect), and
store everything in the DuckDB warehouse;
`read_ratings` only reads it. The solvers work on arrays without any of this: `eqarena.solvers.nash.limiting_logit`,
`eqarena.solvers.cce.max_entropy`, `eqarena.solvers.pairwise.bradley_terry`, ...
"""

from __future__ import annotations

from contextlib import closing
from os import PathLike
from typing import TYPE_CHECKING, Sequence

from eqarena.exceptions import NotFoundError
from eqarena.options import BootstrapOptions, IngestOptions, MissingPolicy, OrderRule, PromptActions, RateOptions

if TYPE_CHECKING:
    import polars as pl

    from eqarena.pipelines.rate import RateResult
    from eqarena.tasks.ingest import IngestSummary

Db = str | PathLike | None


def _db(db: Db) -> str | None:
    return None if db is None else str(db)


def ingest(
    source: str = IngestOptions.source, *, db: Db = None, name: str | None = None, replace: bool = False
) -> IngestSummary:
    """Load a bundled dataset (`vicuna80`, `arena-hard-v0.1`) or an arena-hard directory into the
    warehouse `db` (default: $EQARENA_DB, else ./eqarena.duckdb); idempotent."""
    from eqarena.pipelines.ingest import ingest as ingest_pipeline

    return ingest_pipeline(IngestOptions(source=source, name=name, replace=replace), _db(db))


def rate(
    dataset: str,
    *,
    db: Db = None,
    judges: Sequence[str] = (),
    methods: Sequence[str] | None = None,
    missing: MissingPolicy | str = MissingPolicy.REFUSE,
    orders: OrderRule | str = OrderRule.BOTH,
    bootstrap: int = BootstrapOptions.replicates,
    seed: int = 0,
    category: str | None = None,
    by: str | None = None,
    prompt_groups: PromptActions | str = PromptActions.AUTO,
    bootstrap_time: float = BootstrapOptions.time_limit,
) -> RateResult:
    """Rate the models and prompts of `dataset` from the judgments of `judges` (default: all) by
    `methods` (names of the method registry; default: its default methods); a new rate run in `db`.
    `category`: only that category's prompts; `by` ("category" or "cluster"): also each group rated
    alone (table category_ratings). `prompt_groups`: the prompt player's actions (`PromptActions`:
    "auto", "prompts", "all", "tag", ...; docs/game.md#prompt-groups); `bootstrap_time`: seconds the
    bootstrap may take (0: no limit). Returns its run id, shape and each equilibrium's exploitability;
    `read_ratings` reads the ratings."""
    from eqarena.pipelines.rate import rate as rate_pipeline

    options = RateOptions(
        dataset=dataset,
        judges=tuple(judges),
        methods=None if methods is None else tuple(methods),
        missing=missing,
        orders=orders,
        bootstrap=BootstrapOptions(replicates=bootstrap, seed=seed, time_limit=bootstrap_time),
        category=category,
        by=by,
        prompt_groups=prompt_groups,
    )
    return rate_pipeline(options, _db(db))


def read_ratings(
    db: Db = None, run_id: str | None = None, *, method: str | None = None, player: str = "king"
) -> pl.DataFrame:
    """The ratings of rate run `run_id` (default: the latest) as a polars frame: one row per method and
    action of `player` (king: the models; prompt: the prompts) with rank, rating, equilibrium mass and,
    where a bootstrap ran, its interval; best first within each method. Reads only."""
    from eqarena import warehouse
    from eqarena.warehouse.ratings import latest_rate_run_id, read_rating_table

    with closing(warehouse.connect(db, read_only=True)) as con:
        run_id = run_id or latest_rate_run_id(con)
        if run_id is None:
            raise NotFoundError("no finished rate run in the warehouse: rate first (eqarena.rate or `eqarena rate`)")
        return read_rating_table(con, run_id, player, method)
