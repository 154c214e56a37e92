"""Tasks of the report flow: read a rate run from the warehouse, and write its HTML report."""

from __future__ import annotations

from concurrent.futures import Executor
from contextlib import closing
from pathlib import Path

from eqarena import warehouse
from eqarena.exceptions import NotFoundError
from eqarena.methods import ordered
from eqarena.orchestration.steps import step
from eqarena.report.analyses import load_clone_report, load_risk_report
from eqarena.report.category_table import category_table
from eqarena.report.data import ReportData
from eqarena.report.directory import report_dir, write_whole
from eqarena.report.evidence import read_diagnoses
from eqarena.report.interactive import shown_support
from eqarena.report.render import render_html
from eqarena.warehouse import ratings as store
from eqarena.warehouse.category_ratings import read_group_ratings, read_groups

TOP_PROMPTS = 4


def _top_prompts(ratings: list[store.RatingRow], equilibrium_methods: list[str]) -> list[str]:
    """The top-rated prompts of the first equilibrium method (registry order): best rank, then largest
    equilibrium mass."""
    for method in equilibrium_methods:
        rows = [r for r in ratings if r.method == method and r.player == "prompt"]
        rows.sort(key=lambda r: (r.rank, -(r.mass or 0.0), r.action))
        return [r.action for r in rows[:TOP_PROMPTS]]
    return []


def _prompt_masses(marginals, methods: set[str]) -> dict[str, dict[str, float]]:
    """masses[method][prompt] of the prompt player, per equilibrium method."""
    masses: dict[str, dict[str, float]] = {m: {} for m in methods}
    for row in marginals:
        if row.player == "prompt" and row.method in masses:
            masses[row.method][row.action] = row.mass
    return masses


@step("load_report_data")
def load_report_data(db: str | None, run_id: str | None = None) -> ReportData:
    """Read run `run_id` (default: the latest finished rate run) from the warehouse, read-only."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        if run_id is None:
            run_id = store.latest_rate_run_id(con)
            if run_id is None:
                raise NotFoundError("no finished rate run in the warehouse: run `eqarena rate` first")
        run = store.read_run(con, run_id)
        if run.kind != "rate":
            raise NotFoundError(f"run {run_id!r} is a {run.kind} run, not a rate run")
        ratings = store.read_ratings(con, run_id)
        equilibria = store.read_equilibria(con, run_id)
        top = _top_prompts(ratings, ordered({e.method for e in equilibria}))
        marginals = store.read_marginals(con, run_id)
        support = shown_support(_prompt_masses(marginals, {e.method for e in equilibria}))
        coverage = store.read_coverage(con, run_id)
        models = sorted({r.action for r in ratings if r.player == "king"} | {r.model_a for r in coverage.pairs})
        mean_payoffs = store.read_mean_payoffs(con, run_id)
        diagnosis, lead_diagnosis = read_diagnoses(con, run_id, run.parameters.get("dataset", ""))
        models = sorted(mean_payoffs, key=lambda m: -mean_payoffs[m]) + [m for m in models if m not in mean_payoffs]
        return ReportData(
            run=run,
            models=models,
            ratings=ratings,
            equilibria=equilibria,
            marginals=marginals,
            mean_payoffs=mean_payoffs,
            contributions_by_family=store.read_contributions_by_family(con, run_id),
            coverage=coverage,
            top_prompts=top,
            top_payoffs=store.read_payoffs(con, run_id, top),
            prompt_texts=store.read_prompt_texts(
                con, run.parameters.get("dataset", ""), list(dict.fromkeys(top + support))
            ),
            clones=load_clone_report(con, run_id),
            risk=load_risk_report(con, run_id),
            intervals=store.read_rating_intervals(con, run_id),
            rank_probabilities=store.read_rank_probabilities(con, run_id),
            diagnosis=diagnosis,
            lead_diagnosis=lead_diagnosis,
            categories=category_table(read_groups(con, run_id), read_group_ratings(con, run_id)),
        )


@step("write_report")
def write_report(data: ReportData, out_dir: str | Path, drawing: Executor | None = None) -> Path:
    """Write `eqarena-<run_id>.html` into `out_dir` (created if needed); returns its path. `drawing`:
    helper processes that draw figures too (`report.drawing`)."""
    path = report_dir(out_dir) / f"eqarena-{data.run.run_id}.html"
    return write_whole(path, render_html(data, drawing), data.run.run_id)
