"""Pipeline `refresh`: the main job made incremental, for scheduled and manual runs.

ingest → judge → rate → analyses → report, each done only when its inputs changed:
ingest writes only new rows; the judge asks only for missing cells (new prompts, new models, unjudged
samples); a new rate run is made only when no finished rate run has the same data fingerprint (the
content hash of the judgments, prompts and models it reads) and parameters; analyses and the report
only for a new rate run, or when they are missing. The whole refresh holds the warehouse's writer
lock (eqarena/warehouse/writer_lock.py): a second refresh waits up to `wait_s` seconds, then stops
with "warehouse busy".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from eqarena.methods import parse_methods
from eqarena.options import IngestOptions, MainJobOptions, as_parameters
from eqarena.orchestration.steps import run_logger
from eqarena.pipelines.ingest import ingest
from eqarena.pipelines.rate import rate as rate_pipeline
from eqarena.pipelines.report import report
from eqarena.pipelines.run import judge_missing, run_analyses
from eqarena.report.directory import report_dir
from eqarena.tasks.rate import rate_parameters
from eqarena.tasks.refresh import (
    current_analyses,
    find_current_rate_run,
    fingerprint_rate_inputs,
    writing_the_warehouse,
)
from eqarena.tasks.runs import RunLog, warehouse_path


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

    @property
    def unchanged(self) -> bool:
        return not self.new_rate_run and self.judge_calls == 0 and self.new_rows == 0

    def line(self) -> str:
        """The one line a refresh reports."""
        if self.unchanged:
            return (
                f"refresh: nothing new; 0 judge calls, no new rate run (ratings of {self.rate_run_id} "
                f"are current); report {self.report_path}"
            )
        rate = (
            f"new rate run {self.rate_run_id}" if self.new_rate_run else f"ratings of {self.rate_run_id} still current"
        )
        return (
            f"refresh: {self.new_rows:,} new rows, {self.judge_calls:,} judge calls, {rate}; report {self.report_path}"
        )


def refresh(
    options: MainJobOptions = MainJobOptions(),
    db: str | None = None,
    wait_s: float | None = None,
) -> RefreshSummary:
    """Bring the ratings of `options.source` by `options.judge` up to date, doing only what new data
    requires (module docstring); `wait_s` bounds the wait for a refresh already writing the warehouse
    (default: $EQARENA_WAIT, else 60 s)."""
    methods = parse_methods(options.rate.methods)
    report_dir(options.out_dir)  # a file in the way of the report is said before any work
    steps: dict[str, str] = {}
    log = RunLog(db, "refresh", {}, start=False)
    with writing_the_warehouse(db, log.run_id, wait_s):
        with log.timed("ingest"):
            ingested = ingest(IngestOptions(source=options.source), db)
        dataset, new_rows = ingested.dataset, ingested.new
        steps["ingest"] = f"{new_rows:,} new rows"

        with log.timed("judge"):
            judges, judge_calls, steps["judge"] = judge_missing(options, dataset, db)

        with log.timed("rate"):
            rate = replace(options.rate, dataset=dataset, judges=tuple(judges))
            inputs = fingerprint_rate_inputs(db, rate)
            rate = replace(rate, judges=inputs.judges)
            rate_run_id = find_current_rate_run(db, inputs.fingerprint, rate_parameters(rate, methods, inputs.judges))
            new_rate_run = rate_run_id is None
            if new_rate_run:
                rate_run_id = rate_pipeline(rate, db).run_id
                steps["rate"] = f"new rate run {rate_run_id}"
            else:
                steps["rate"] = f"inputs unchanged since rate run {rate_run_id}"

        with log.timed("analyses"):
            kinds = tuple(a.value for a in options.analyses.run)
            done = () if new_rate_run else current_analyses(db, rate_run_id, kinds)
            summaries = run_analyses(options.analyses, rate_run_id, methods, db, skip=done)
        analysed = any(
            kind not in done and not lines[0].startswith("risk analysis skipped") for kind, lines in summaries.items()
        )

        report_path = (Path(options.out_dir) / f"eqarena-{rate_run_id}.html").resolve()
        if new_rate_run or analysed or not report_path.exists():
            with log.timed("report"):
                report_path = Path(report(rate_run_id, options.out_dir, db)).resolve()
            steps["report"] = str(report_path)

        summary = RefreshSummary(
            run_id=log.run_id,
            rate_run_id=rate_run_id,
            new_rate_run=new_rate_run,
            judge_calls=judge_calls,
            new_rows=new_rows,
            report_path=report_path,
            db_path=warehouse_path(db),
            steps=steps,
        )
        parameters = {
            **as_parameters(options),
            "dataset": dataset,
            "rate_run_id": rate_run_id,
            "new_rate_run": new_rate_run,
            "judge_calls": judge_calls,
        }
        log.finish(parameters=parameters, data_fingerprint=inputs.fingerprint, message=summary.line())
    run_logger().info(summary.line())
    return summary
