"""The command table: every eqarena command's pipeline, and the Prefect flow built from it.

Commands run their pipeline (eqarena/pipelines/) as plain Python unless a Prefect API is configured
(eqarena/orchestration/steps.py); then they run the same pipeline as the flow here, and every `@step`
inside it becomes a Prefect task. `eqarena serve` and prefect.yaml's deployments run these flows
(`refresh_flow`, `run_flow`). A flow takes its pipeline's parameters (Prefect validates a deployment's
parameters against them) and is described by its pipeline's docstring.
"""

from eqarena.options import (
    CloneOptions,
    GenerateOptions,
    ImportOptions,
    IngestOptions,
    JudgeOptions,
    MainJobOptions,
    RateOptions,
    RiskOptions,
)
from eqarena.orchestration.commands import Command, flow_of
from eqarena.orchestration.runtime import generate_run_name, judge_run_name, main_job_run_name, rate_run_name
from eqarena.pipelines.analyze import analyze_clones, analyze_risk
from eqarena.pipelines.generate import generate
from eqarena.pipelines.importing import import_data
from eqarena.pipelines.ingest import ingest
from eqarena.pipelines.judge import judge, judge_adaptive
from eqarena.pipelines.rate import rate
from eqarena.pipelines.refresh import refresh
from eqarena.pipelines.report import report
from eqarena.pipelines.run import main_job

COMMANDS = (
    Command("ingest", IngestOptions, ingest),
    Command("import", ImportOptions, import_data),
    Command("generate", GenerateOptions, generate, generate_run_name),
    Command("judge", JudgeOptions, judge, judge_run_name),
    Command("judge-adaptive", JudgeOptions, judge_adaptive, judge_run_name),
    Command("rate", RateOptions, rate, rate_run_name),
    Command("analyze-clones", CloneOptions, analyze_clones),
    Command("analyze-risk", RiskOptions, analyze_risk),
    Command("report", None, report),
    Command("run", MainJobOptions, main_job, main_job_run_name),
    Command("refresh", MainJobOptions, refresh, main_job_run_name),
)
FLOWS = {command.name: flow_of(command) for command in COMMANDS}
_BY_PIPELINE = {command.pipeline: FLOWS[command.name] for command in COMMANDS}


def flow_for(pipeline):
    """The flow of the command whose pipeline is `pipeline` (KeyError if no command runs it)."""
    return _BY_PIPELINE[pipeline]


ingest_flow = FLOWS["ingest"]
import_flow = FLOWS["import"]
generate_flow = FLOWS["generate"]
judge_flow = FLOWS["judge"]
adaptive_judge_flow = FLOWS["judge-adaptive"]
rate_flow = FLOWS["rate"]
clones_flow = FLOWS["analyze-clones"]
risk_flow = FLOWS["analyze-risk"]
report_flow = FLOWS["report"]
run_flow = FLOWS["run"]
refresh_flow = FLOWS["refresh"]  # the flow `eqarena serve` schedules and prefect.yaml deploys
