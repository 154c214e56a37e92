"""A flow's side of Prefect: its flow run id (stored in `runs.flow_run_id`), the names flow runs get in
the Prefect UI, and the artifacts runs publish there (a ratings table, a link to the report)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable


def current_flow_run_id() -> str | None:
    """The id of the Prefect flow run this code runs in, or None outside a flow run."""
    from prefect.runtime import flow_run

    run_id = flow_run.id
    return str(run_id) if run_id else None


def dataset_judge_name(judge_parameter: str) -> Callable[[], str]:
    """A flow_run_name callable: '<dataset>-<judge>' from the flow's parameters (`judge_parameter` names
    the one holding the judge, or a list of judges, joined with '+')."""
    def name() -> str:
        from prefect.runtime import flow_run

        parameters = flow_run.parameters
        judges = parameters.get(judge_parameter) or []
        judges = [judges] if isinstance(judges, str) else list(judges)
        names = "+".join(j.split("@")[0] for j in judges)  # openai-compatible:model@URL -> without the URL
        return f"{parameters.get('dataset') or 'dataset'}-{names or 'all-judges'}"
    return name


def artifact_key(kind: str, dataset: str) -> str:
    """A Prefect artifact key (lower-case letters, digits and dashes): 'ratings-arena-hard-v0-1'."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", f"{kind}-{dataset}".lower())).strip("-")


def publish_ratings(run_id: str, dataset: str, rows: list[dict]) -> None:
    """A table artifact of the run's model ratings (one row per model and method), shown with the flow
    run in the Prefect UI, under a key per dataset so the UI tracks it across runs."""
    from prefect.artifacts import create_table_artifact

    create_table_artifact(key=artifact_key("ratings", dataset), table=rows,
                          description=f"eqarena model ratings of rate run {run_id} on {dataset}")


def publish_report_link(run_id: str, dataset: str, path: Path) -> None:
    """A link artifact to the run's HTML report (a file:// link: the report is written where the flow ran)."""
    from prefect.artifacts import create_link_artifact

    create_link_artifact(key=artifact_key("report", dataset), link=path.resolve().as_uri(),
                         link_text=path.name, description=f"eqarena report of rate run {run_id}")
