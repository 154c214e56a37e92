"""A flow's side of Prefect: its flow run id (stored in `runs.flow_run_id`), the names flow runs get in
the Prefect UI ('<dataset>-<judge>'), and the artifacts runs publish there (a ratings table, a link to
the report)."""

from __future__ import annotations

import re
from pathlib import Path

from eqarena.orchestration.steps import in_flow_run


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in, or None outside a flow run."""
    if not in_flow_run():
        return None
    from prefect.runtime import flow_run

    run_id = flow_run.id
    return str(run_id) if run_id else None


def _option(options, name: str):
    """A field of the flow's options parameter (an options dataclass, or its JSON form)."""
    return options.get(name) if isinstance(options, dict) else getattr(options, name, None)


def _dataset_judge(dataset, judges) -> str:
    judges = [judges] if isinstance(judges, str) else list(judges or [])
    names = "+".join(j.split("@")[0] for j in judges)  # openai-compatible:model@URL -> without the URL
    return f"{dataset or 'dataset'}-{names or 'all-judges'}"


def _options():
    from prefect.runtime import flow_run

    return flow_run.parameters.get("options") or {}


def rate_run_name() -> str:
    """Name of a rate flow run: '<dataset>-<judge>+<judge>' (all-judges when none was named)."""
    options = _options()
    return _dataset_judge(_option(options, "dataset"), _option(options, "judges"))


def judge_run_name() -> str:
    options = _options()
    return _dataset_judge(_option(options, "dataset"), _option(options, "judge"))


def generate_run_name() -> str:
    """Name of a generate flow run: '<dataset>-<model id>' (the spec's model name without --as)."""
    options = _options()
    return _dataset_judge(_option(options, "dataset"), _option(options, "model_id") or _option(options, "model"))


def main_job_run_name() -> str:
    options = _options()
    return _dataset_judge(_option(options, "source"), _option(options, "judge"))


def artifact_key(kind: str, dataset: str) -> str:
    """A Prefect artifact key (lower-case letters, digits and dashes): 'ratings-arena-hard-v0-1'."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", f"{kind}-{dataset}".lower())).strip("-")


def publish_ratings(run_id: str, dataset: str, rows: list[dict]) -> None:
    """A table artifact of the run's model ratings (one row per model and method), shown with the flow
    run in the Prefect UI, under a key per dataset so the UI tracks it across runs."""
    if not in_flow_run():
        return
    from prefect.artifacts import create_table_artifact

    create_table_artifact(
        key=artifact_key("ratings", dataset),
        table=rows,
        description=f"eqarena model ratings of rate run {run_id} on {dataset}",
    )


def publish_report_link(run_id: str, dataset: str, path: Path) -> None:
    """A link artifact to the run's HTML report (a file:// link: the report is written where the flow ran)."""
    if not in_flow_run():
        return
    from prefect.artifacts import create_link_artifact

    create_link_artifact(
        key=artifact_key("report", dataset),
        link=path.resolve().as_uri(),
        link_text=path.name,
        description=f"eqarena report of rate run {run_id}",
    )
