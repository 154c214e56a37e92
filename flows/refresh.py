"""Flow `refresh`: the main job made incremental, for scheduled and manual runs.

ingest → judge → rate → analyses → report, each a subflow, each done only when its inputs changed:
ingest writes only new rows; the judge asks only for missing cells (new prompts, new models, unjudged
samples); a new rate run is made only when no finished rate run has the same data fingerprint (the
content hash of the judgments, prompts and models it reads) and parameters; analyses and the report
only for a new rate run, or when they are missing. The whole refresh holds the warehouse's writer
lock (warehouse/writer_lock.py): a second refresh waits up to `wait_s` seconds, then stops with
"warehouse busy".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter

from prefect import flow, get_run_logger

import warehouse
from flows.analyze import parse_analyses
from flows.rate import new_run_id, rate_flow
from flows.report import DEFAULT_OUT_DIR, report_flow
from flows.run import (
    ANALYSIS_FLOWS,
    DEFAULT_ANALYSES,
    DEFAULT_DATASET,
    DEFAULT_JUDGE,
    is_recorded_judge,
    judge_missing,
)
from flows.run_context import current_flow_run_id, dataset_judge_name
from tasks.rate import package_versions, parse_methods
from tasks.refresh import find_analysis, find_current_rate_run, fingerprint_rate_inputs, read_model_ratings
from warehouse.runs import RunRecord, upsert_run
from warehouse.writer_lock import writer_lock


@dataclass(frozen=True)
class RefreshSummary:
    run_id: str
    rate_run_id: str
    new_rate_run: bool
    judge_calls: int
    new_rows: int
    report_path: Path
    db_path: Path
    steps: dict[str, str] = field(default_factory=dict)  # step -> what it did
    model_ratings: list[dict] = field(default_factory=list)  # the rate run's king ratings, read under the lock

    @property
    def unchanged(self) -> bool:
        return not self.new_rate_run and self.judge_calls == 0 and self.new_rows == 0


@flow(name="refresh", flow_run_name=dataset_judge_name("judge"))
def refresh_flow(
    db: str | None = None,
    out_dir: str = DEFAULT_OUT_DIR,
    dataset: str = DEFAULT_DATASET,
    judge: str = DEFAULT_JUDGE,
    methods: list[str] | None = None,
    missing: str = "refuse",
    bootstrap: int = 200,
    samples_per_order: int = 4,
    max_cost: float | None = None,
    analyses: list[str] = DEFAULT_ANALYSES,
    orders: str = "both",
    wait_s: float = 0.0,
    yes: bool = False,
) -> RefreshSummary:
    """Bring the ratings of `dataset` by `judge` up to date, doing only what new data requires (module
    docstring). `max_cost` (USD) caps a provider judge's spend (a plan estimated above SPEND_CONFIRM_USD
    needs it or `yes`); `wait_s` bounds the wait for a refresh already writing the warehouse."""
    logger = get_run_logger()
    chosen_methods = parse_methods(methods)
    chosen_analyses = parse_analyses(analyses)
    run_id = new_run_id("refresh")
    started = datetime.now(timezone.utc)
    db_path = warehouse.resolve_db_path(db).resolve()
    steps: dict[str, str] = {}
    timings: dict[str, float] = {}

    def waiting(holder: dict) -> None:
        logger.warning(f"warehouse {db_path} is being written by run {holder.get('run_id', '?')}; "
                       f"waiting up to {wait_s:g} s")

    with writer_lock(db_path, run_id, wait_s, on_wait=waiting):
        t0 = perf_counter()
        from flows.ingest import ingest_flow

        ingested = ingest_flow(dataset=dataset, db=db)
        name, new_rows = ingested.dataset, ingested.new
        steps["ingest"] = f"{new_rows:,} new rows"
        timings["ingest"] = perf_counter() - t0

        t0 = perf_counter()
        judge_calls = 0
        if is_recorded_judge(judge):
            judges = [judge]
            steps["judge"] = "recorded judgments, no API calls"
        else:
            outcome = judge_missing(db, name, judge, samples_per_order, max_cost, yes)
            judges, judge_calls = [outcome.judge], int(outcome.stats.get("requests", 0))
            steps["judge"] = outcome.message
        timings["judge"] = perf_counter() - t0

        t0 = perf_counter()
        inputs = fingerprint_rate_inputs(db, name, judges, orders)
        parameters = {"dataset": name, "judges": list(inputs.judges), "methods": chosen_methods,
                      "missing": missing, "bootstrap": bootstrap, "seed": 0, "orders": orders}
        rate_run_id = find_current_rate_run(db, inputs.fingerprint, parameters)
        new_rate_run = rate_run_id is None
        if new_rate_run:
            rated = rate_flow(db=db, dataset=name, judges=list(inputs.judges), methods=chosen_methods,
                              missing=missing, bootstrap=bootstrap, orders=orders)
            rate_run_id = rated.run_id
            steps["rate"] = f"new rate run {rate_run_id}"
        else:
            steps["rate"] = f"inputs unchanged since rate run {rate_run_id}"
        timings["rate"] = perf_counter() - t0

        analysed = False
        for kind in chosen_analyses:
            if kind == "risk" and "ne" not in chosen_methods:
                continue
            if not new_rate_run and find_analysis(db, kind, rate_run_id):
                continue
            t0 = perf_counter()
            ANALYSIS_FLOWS[kind](db=db, run_id=rate_run_id)
            timings[f"analyze-{kind}"] = perf_counter() - t0
            analysed = True

        report_path = (Path(out_dir) / f"eqarena-{rate_run_id}.html").resolve()
        if new_rate_run or analysed or not report_path.exists():
            t0 = perf_counter()
            report_path = Path(report_flow(db=db, run_id=rate_run_id, out_dir=out_dir)).resolve()
            timings["report"] = perf_counter() - t0
            steps["report"] = str(report_path)

        summary = RefreshSummary(run_id=run_id, rate_run_id=rate_run_id, new_rate_run=new_rate_run,
                                 judge_calls=judge_calls, new_rows=new_rows, report_path=report_path,
                                 db_path=db_path, steps=steps, model_ratings=read_model_ratings(db, rate_run_id))
        con = warehouse.connect(db)
        try:
            upsert_run(con, RunRecord(
                flow_run_id=current_flow_run_id(), run_id=run_id, kind="refresh", started_at=started,
                finished_at=datetime.now(timezone.utc),
                parameters={"dataset": name, "source": dataset, "judge": judge, "methods": chosen_methods,
                            "missing": missing, "bootstrap": bootstrap, "orders": orders, "out_dir": out_dir,
                            "analyses": chosen_analyses, "rate_run_id": rate_run_id,
                            "new_rate_run": new_rate_run, "judge_calls": judge_calls},
                versions=package_versions(), data_fingerprint=inputs.fingerprint, timings=timings,
                message=refresh_line(summary)))
        finally:
            con.close()
    logger.info(refresh_line(summary))
    return summary


def refresh_line(summary: RefreshSummary) -> str:
    """The one line a refresh reports."""
    if summary.unchanged:
        return (f"refresh: nothing new; 0 judge calls, no new rate run (ratings of {summary.rate_run_id} "
                f"are current); report {summary.report_path}")
    rate = (f"new rate run {summary.rate_run_id}" if summary.new_rate_run
            else f"ratings of {summary.rate_run_id} still current")
    return (f"refresh: {summary.new_rows:,} new rows, {summary.judge_calls:,} judge calls, {rate}; "
            f"report {summary.report_path}")
