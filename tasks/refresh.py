"""Tasks of the refresh flow: what the last runs already cover, so unchanged inputs cost nothing."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass

from prefect import task
from prefect.cache_policies import NONE

import warehouse
from tasks.assemble import expand_judges
from warehouse.analyses import latest_analysis
from warehouse.ratings import read_ratings
from warehouse.runs import matching_rate_run
from warehouse.tensor import assemble_tensor, available_judges


@dataclass(frozen=True)
class RateInputs:
    """The judges a rate run would pool and the content hash of the data it would read."""

    judges: tuple[str, ...]
    fingerprint: str


@task(name="fingerprint_rate_inputs", cache_policy=NONE)
def fingerprint_rate_inputs(db: str | None, dataset: str, judges: list[str], orders: str = "both") -> RateInputs:
    """The judges `judges` expands to and the fingerprint of their judgments on `dataset` (the hash a
    rate run stores as `data_fingerprint`), without solving anything."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        chosen = expand_judges(dataset, available_judges(con, dataset), judges)
        tensor = assemble_tensor(con, dataset, chosen, orders=orders)
    return RateInputs(judges=tuple(tensor.judges), fingerprint=tensor.fingerprint)


@task(name="find_current_rate_run", cache_policy=NONE)
def find_current_rate_run(db: str | None, fingerprint: str, parameters: dict) -> str | None:
    """The newest finished rate run of the same data and parameters, or None."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        return matching_rate_run(con, fingerprint, parameters)


@task(name="find_analysis", cache_policy=NONE)
def find_analysis(db: str | None, kind: str, rate_run_id: str) -> str | None:
    """The newest finished `kind` analysis of the rate run, or None."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        return latest_analysis(con, kind, rate_run_id)


@task(name="read_model_ratings", cache_policy=NONE)
def read_model_ratings(db: str | None, rate_run_id: str) -> list[dict]:
    """The rate run's model (king) ratings: method, action, rating, rank, ..."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        return [r for r in read_ratings(con, rate_run_id) if r["player"] == "king"]
