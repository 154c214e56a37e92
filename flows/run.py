"""Flow `run`, the main job: ingest (idempotent) → judge → rate → analyses → report.

With a recorded judge (`prd:<name>` or `all-prd`, the PRD judgments bundled with vicuna80) the judge
step makes no API call: ingest already imported those judgments. With a provider spec
(`openai:MODEL`, `gemini:MODEL`, an OpenAI-compatible server) the judge flow fills the missing cells.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter

from prefect import flow, get_run_logger

import warehouse
from flows.analyze import clones_flow, parse_analyses, risk_flow
from flows.judge_plan import JudgeOutcome, confirm_spend, plan_judge_run, plan_line
from flows.rate import new_run_id, rate_flow
from flows.report import DEFAULT_OUT_DIR, report_flow
from flows.run_context import current_flow_run_id, dataset_judge_name
from tasks.assemble import ALL_PRD, PRD_PREFIX
from tasks.rate import package_versions, parse_methods
from warehouse.runs import RunRecord, upsert_run

DEFAULT_DATASET = "vicuna80"
DEFAULT_JUDGE = "prd:gpt4"
DEFAULT_ANALYSES = ("clones", "risk")  # both add ~10 s to the bundled demo


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    rate_run_id: str
    db_path: Path
    report_path: Path
    timings: dict[str, float]
    dropped: str = ""
    analyses: dict[str, list[str]] = field(default_factory=dict)  # kind -> its summary lines


ANALYSIS_FLOWS = {"clones": clones_flow, "risk": risk_flow}


def is_recorded_judge(judge: str) -> bool:
    """Recorded judgments are imported by ingest; they need no judging."""
    return judge == ALL_PRD or judge.startswith(PRD_PREFIX)


def _ingest(db: str | None, dataset: str) -> str:
    """Ingest `dataset` (idempotent: a second run writes nothing); returns its name in the warehouse."""
    from flows.ingest import ingest_flow

    summary = ingest_flow(dataset=dataset, db=db)
    get_run_logger().info(f"ingest {summary.dataset}: {summary.new:,} new, {summary.unchanged:,} unchanged")
    return summary.dataset


def judge_missing(db: str | None, dataset: str, judge: str, samples_per_order: int, max_cost: float | None,
                  yes: bool) -> JudgeOutcome:
    """Judge the missing cells with a provider, after printing the plan (calls, tokens, cost) on stderr;
    a plan estimated above SPEND_CONFIRM_USD needs `max_cost` or `yes` (SpendNotConfirmed otherwise)."""
    from flows.judge import judge_flow

    plan = plan_judge_run(judge, dataset, samples_per_order=samples_per_order, db=db, max_cost=max_cost).plan
    print(plan_line(plan), file=sys.stderr, flush=True)
    get_run_logger().info(plan_line(plan))
    confirm_spend(plan, max_cost, yes)
    outcome = judge_flow(judge=judge, dataset=dataset, db=db, samples_per_order=samples_per_order,
                         max_cost=max_cost, progress=False)
    get_run_logger().info(f"judge {outcome.judge}: {outcome.message}")
    return outcome


@flow(name="run", flow_run_name=dataset_judge_name("judge"))
def run_flow(
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
    yes: bool = False,
) -> RunSummary:
    """The main job on `dataset` with `judge`; returns where the warehouse and the report are.
    `samples_per_order` and `max_cost` (USD) apply to a provider judge only, which judges after printing
    its plan, and only if the plan's estimated cost is at most SPEND_CONFIRM_USD, or `max_cost` caps it,
    or `yes` confirms it; `analyses` (clones, risk) run on the new rate run with their defaults and appear
    in its report."""
    chosen_analyses = parse_analyses(analyses)
    run_id = new_run_id("run")
    started = datetime.now(timezone.utc)
    timings: dict[str, float] = {}

    t0 = perf_counter()
    name = _ingest(db, dataset)
    timings["ingest"] = perf_counter() - t0

    t0 = perf_counter()
    if is_recorded_judge(judge):
        judges = [judge]
        get_run_logger().info(f"judge {judge}: recorded judgments, no API calls")
    else:
        judges = [judge_missing(db, name, judge, samples_per_order, max_cost, yes).judge]
    timings["judge"] = perf_counter() - t0

    t0 = perf_counter()
    rated = rate_flow(db=db, dataset=name, judges=judges, methods=methods, missing=missing, bootstrap=bootstrap)
    timings["rate"] = perf_counter() - t0

    summaries = {}
    for kind in chosen_analyses:
        if kind == "risk" and "ne" not in parse_methods(methods):
            summaries[kind] = ["risk analysis skipped: it starts from the run's NE (rate with --methods ne)"]
            get_run_logger().info(summaries[kind][0])
            continue
        t0 = perf_counter()
        analysed = ANALYSIS_FLOWS[kind](db=db, run_id=rated.run_id)
        summaries[kind] = analysed.summary
        timings[f"analyze-{kind}"] = perf_counter() - t0

    t0 = perf_counter()
    report = report_flow(db=db, run_id=rated.run_id, out_dir=out_dir)
    timings["report"] = perf_counter() - t0

    db_path = warehouse.resolve_db_path(db).resolve()
    con = warehouse.connect(db)
    try:
        upsert_run(con, RunRecord(
            flow_run_id=current_flow_run_id(),
            run_id=run_id, kind="run", started_at=started, finished_at=datetime.now(timezone.utc),
            parameters={"dataset": name, "source": dataset, "judge": judge, "methods": methods, "missing": missing,
                        "bootstrap": bootstrap, "out_dir": out_dir, "rate_run_id": rated.run_id,
                        "analyses": chosen_analyses},
            versions=package_versions(), timings=timings,
            message=f"ratings in run {rated.run_id}; report {Path(report).resolve()}"))
    finally:
        con.close()
    return RunSummary(run_id=run_id, rate_run_id=rated.run_id, db_path=db_path,
                      report_path=Path(report).resolve(), timings=timings, dropped=rated.dropped,
                      analyses=summaries)
