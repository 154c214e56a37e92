"""Read what `report.diagnosis.diagnose` needs from one rate run of the warehouse, and diagnose it."""

from __future__ import annotations

from dataclasses import replace

import duckdb

from eqarena.methods import ordered
from eqarena.report.diagnosis import Diagnosis, Evidence, deciding_prompt_ids, diagnose, shown_models
from eqarena.report.verdict import headline_method
from eqarena.warehouse import ratings as store
from eqarena.warehouse.catalog import dataset_model_ids

MASS_TOLERANCE = 1e-6  # marginal mass below this is off the support


def read_evidence(con: duckdb.DuckDBPyConnection, run_id: str, dataset: str, method: str | None = None) -> Evidence:
    """The evidence on `method` (default: the headline method) of rate run `run_id` (module docstring of
    report.diagnosis)."""
    table = store.read_rating_table(con, run_id)
    method = method or headline_method(ordered(table["method"].unique().to_list()))
    equilibria = store.read_equilibria(con, run_id)
    support = {e.method: e.support for e in equilibria}
    limits = {e.method: (str(e.diagnostics.get("limit", "")), e.diagnostics.get("limit_change")) for e in equilibria}
    mass = {
        (r.player, r.action): r.mass
        for r in store.read_marginals(con, run_id)
        if r.method == method and r.mass > MASS_TOLERANCE
    }
    prompt_mass = {a: m for (p, a), m in mass.items() if p == "prompt"}
    rebel_mass = {a: m for (p, a), m in mass.items() if p == "rebel"}
    prompts = deciding_prompt_ids(prompt_mass)
    kings, rebels = shown_models(table, method, rebel_mass)
    return Evidence(
        method=method,
        table=table,
        support=support,
        prompt_mass=prompt_mass,
        rebel_mass=rebel_mass,
        payoffs=store.read_payoff_cells(con, run_id, prompts, kings, rebels),
        mean_payoffs=store.read_mean_payoffs(con, run_id),
        prompt_texts=store.read_prompt_texts(con, dataset, prompts),
        limits=limits,
        answered=frozenset(dataset_model_ids(con, dataset)),
    )


def read_diagnoses(con: duckdb.DuckDBPyConnection, run_id: str, dataset: str) -> tuple[Diagnosis, Diagnosis | None]:
    """The headline method's diagnosis and, where it names another method for the answer to lead with,
    that method's own (its findings and advice; it names no further lead)."""
    headline = diagnose(read_evidence(con, run_id, dataset))
    if headline.lead is None:
        return headline, None
    return headline, replace(diagnose(read_evidence(con, run_id, dataset, headline.lead)), lead=None, unfit=())
