"""Pipeline `run`, the main job: ingest (idempotent) → judge → rate → analyses → report.

Outside a Prefect flow run the analyses are computed on a background thread from the rate run's
full-data solves while its bootstrap's worker processes run (the main process only waits for them
then), and written once the rate run is (eqarena/pipelines/rate.py `on_solved`).

With a recorded judge (`prd:<name>` or `all-prd`, the PRD judgments bundled with vicuna80) the judge
step makes no API call: ingest already imported those judgments. With a provider spec
(`openai:MODEL`, `gemini:MODEL`, an OpenAI-compatible server) the judge flow fills the missing cells,
after the plan is printed and its cost confirmed.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import Callable, Mapping

from eqarena import options as opts
from eqarena.methods import SELECTED_NE, parse_methods
from eqarena.options import Analysis, IngestOptions, MainJobOptions, as_parameters, is_recorded_judge
from eqarena.orchestration.progress import stage
from eqarena.orchestration.steps import in_flow_run, run_logger
from eqarena.pipelines.analyze import ComputedAnalysis, analyze_clones, analyze_risk, clones_of, risk_of, write_computed
from eqarena.pipelines.ingest import ingest
from eqarena.pipelines.rate import SolvedRun, rate
from eqarena.report.directory import report_dir
from eqarena.runtime.background import in_background
from eqarena.runtime.worker_count import planned_main_job_workers
from eqarena.runtime.worker_pool import kept_workers, prewarm_workers, release_prewarmed
from eqarena.tasks.analysis_io import best_king, king_rows, unwritten_marginals, unwritten_rate_game
from eqarena.tasks.main_job import check_judge_plan, main_job_judge
from eqarena.tasks.runs import RunLog, warehouse_path


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    rate_run_id: str
    db_path: Path
    report_path: Path
    timings: dict[str, float]
    dropped: str = ""
    analyses: dict[str, list[str]] = field(default_factory=dict)  # kind -> its summary lines


def judge_missing(options: MainJobOptions, dataset: str, db: str | None = None) -> tuple[list[str], int, str]:
    """The main job's judge step: no calls for a recorded judge; with a provider, the plan (printed,
    its spend confirmed), then every missing cell by the judge pipeline (inside a flow run, the judge
    flow as a subflow: `orchestration.commands.subflow`). Returns (judges to rate, judge calls, what
    it did)."""
    if is_recorded_judge(options.judge):
        return [options.judge], 0, "recorded judgments, no API calls"
    judge = main_job_judge(options, dataset)
    check_judge_plan(options, judge, db)
    from eqarena.pipelines.judge import judge as judge_pipeline

    outcome = judge_pipeline(judge, db=db, progress=False)
    run_logger().info(f"judge {outcome.judge}: {outcome.message}")
    return [outcome.judge], outcome.stats.requests, outcome.message


def run_analyses(
    options: opts.AnalysesOptions,
    rate_run_id: str,
    methods: tuple[str, ...],
    db: str | None = None,
    skip: tuple[str, ...] = (),
    computed: Mapping[str, ComputedAnalysis] | None = None,
) -> dict[str, list[str]]:
    """The chosen robustness analyses of a rate run (those in `skip` are current already), each summed
    up in one plain sentence; risk needs the run's NE and is skipped, with a line saying so, without it.
    `computed`: analyses already computed (`analyses_of`), written here instead of computed again."""
    summaries = {}
    for kind in options.run:
        if kind is Analysis.RISK and SELECTED_NE not in methods:
            summaries[kind.value] = [
                f"risk analysis skipped: it starts from the run's NE (rate with --methods {SELECTED_NE})"
            ]
            run_logger().info(summaries[kind.value][0])
        elif kind.value not in skip:
            if computed is not None and kind.value in computed:
                analyse = write_computed(db, computed[kind.value])
            elif kind is Analysis.CLONES:
                analyse = analyze_clones(options.clones, rate_run_id, db)
            else:
                analyse = analyze_risk(options.risk, rate_run_id, db)
            summaries[kind.value] = [analyse.headline]
    return summaries


def analyses_of(options: opts.AnalysesOptions, run: SolvedRun, db: str | None = None) -> dict[str, ComputedAnalysis]:
    """The chosen analyses of a rate run computed from its full-data solves, before the run is written:
    the same game, selected NE and target that `analyze_clones` and `analyze_risk` read back after."""
    game = unwritten_rate_game(run.run_id, run.tensor, run.methods)
    out = {}
    for kind in options.run:
        if kind is Analysis.CLONES:
            top = None
            if options.clones.target is None:
                top = best_king(king_rows([r for s in run.solved for r in s.ratings]), run.run_id)
            out[kind.value] = clones_of(game, options.clones, top, db)
        elif kind is Analysis.RISK and SELECTED_NE in run.methods:
            ne = next(s for s in run.solved if s.method == SELECTED_NE)
            out[kind.value] = risk_of(game, unwritten_marginals(game, run.tensor, ne.equilibrium), options.risk, db)
    return out


# The modules of the report's figures (matplotlib with them): the bootstrap's workers, kept to draw them,
# import them as soon as the bootstrap is done.
_FIGURE_MODULES = ("eqarena.report.figures", "eqarena.report.analysis_figures")
_REPORT_PIPELINE = "eqarena.pipelines.report"  # imported alongside the bootstrap (`_main_job`)


def main_job(options: MainJobOptions = MainJobOptions(), db: str | None = None) -> RunSummary:
    """The main job on `options.source` with `options.judge`: ingest, judge, rate, analyses, report;
    returns where the warehouse and the report are."""
    report_dir(options.out_dir)  # a file in the way of the report is said before any work
    prewarm_workers(planned_main_job_workers(options))  # while ingest and rate prepare (if no judge must judge first)
    try:
        # The bootstrap's workers, idle once it ends, then draw the report's figures beside this process.
        with kept_workers(imports=_FIGURE_MODULES) as idle_workers:
            return _main_job(options, db, idle_workers)
    finally:
        release_prewarmed()


def _main_job(
    options: MainJobOptions,
    db: str | None,
    idle_workers: Callable[[], Executor | None],
) -> RunSummary:
    with RunLog(db, "run", as_parameters(options), start=False) as log:
        with log.timed("ingest"):
            dataset = ingest(IngestOptions(source=options.source), db).dataset
        with log.timed("judge"):
            judges, _, _ = judge_missing(options, dataset, db)
        alongside: dict[str, Future] = {}

        def start_analyses(solved: SolvedRun) -> None:  # on the core the main process leaves idle
            alongside["analyses"] = in_background("eqarena-analyses", analyses_of, options.analyses, solved, db)
            # The report's modules load meanwhile too, not before the bootstrap (its workers would wait) nor
            # after it (the report would): matplotlib with them takes ~0.5 s.
            alongside["report modules"] = in_background("eqarena-report-modules", import_module, _REPORT_PIPELINE)

        with log.timed("rate"):
            rated = rate(
                replace(options.rate, dataset=dataset, judges=tuple(judges)),
                db,
                on_solved=None if in_flow_run() else start_analyses,
            )
        with log.timed("analyses"), stage("robustness analyses"):
            computed = alongside["analyses"].result() if alongside else None
            summaries = run_analyses(
                options.analyses, rated.run_id, parse_methods(options.rate.methods), db, computed=computed
            )
        with log.timed("report"), stage("writing the report"):
            report = import_module(_REPORT_PIPELINE).report  # loaded alongside the bootstrap, or now
            drawing = None if in_flow_run() else idle_workers()
            report_path = Path(report(rated.run_id, options.out_dir, db, drawing)).resolve()
        parameters = {**as_parameters(options), "dataset": dataset, "rate_run_id": rated.run_id}
        log.finish(parameters=parameters, message=f"ratings in run {rated.run_id}; report {report_path}")
    return RunSummary(
        run_id=log.run_id,
        rate_run_id=rated.run_id,
        db_path=warehouse_path(db),
        report_path=report_path,
        timings=log.timings,
        dropped=rated.dropped,
        analyses=summaries,
    )
