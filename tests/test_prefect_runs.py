"""Prefect as users see it: named flow runs whose logs and artifacts reach the API, their ids in
`runs.flow_run_id`, and a temporary API server that never outlives a killed command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

import psutil
import pytest
from conftest import query
from typer.testing import CliRunner

from eqarena.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "import"
EQARENA = Path(sys.executable).with_name("eqarena")
runner = CliRunner()


def test_rate_run_is_named_logged_and_publishes_artifacts(tmp_path, prefect_harness):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, LogFilter, LogFilterFlowRunId
    from prefect.settings import get_current_settings

    db = tmp_path / "w.duckdb"
    assert runner.invoke(app, ["import", "pairwise", str(EXAMPLES / "pairwise.csv"), "--db", str(db)]).exit_code == 0
    # As a user runs it (Prefect's default log level INFO), against the session's Prefect API.
    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url), "PREFECT_LOGGING_LEVEL": "INFO"}
    rated = subprocess.run(
        [str(EQARENA), "rate", "-j", "my-judge", "--methods", "bt,ne", "--bootstrap", "10", "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rated.returncode == 0, rated.stderr
    assert "Finished in state" not in rated.stderr and "Flow run" not in rated.stderr  # the console stays quiet
    out = tmp_path / "out"
    assert runner.invoke(app, ["report", "--db", str(db), "--out", str(out)]).exit_code == 0

    ((flow_run_id, run_id),) = query(db, "SELECT flow_run_id, run_id FROM runs WHERE kind = 'rate'")
    assert flow_run_id is not None
    kinds_with_ids = query(
        db,
        "SELECT kind, count(*) FILTER (WHERE flow_run_id IS NOT NULL), count(*) FROM runs GROUP BY kind ORDER BY kind",
    )
    assert all(with_id == total for _, with_id, total in kinds_with_ids), kinds_with_ids
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(UUID(flow_run_id))
        assert flow_run.name == "pairwise-my-judge"
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[UUID(flow_run_id)])))
        messages = [log.message for log in logs]
        assert any("ne: exploitability" in m for m in messages), messages
        by_key = {
            key: client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
            for key in ("ratings-pairwise", "report-pairwise")
        }
        # The session's Prefect API holds other tests' artifacts under the same keys too.
        (ratings,) = [a for a in by_key["ratings-pairwise"] if a.flow_run_id == UUID(flow_run_id)]
        assert ratings.type == "table" and run_id in ratings.description and "cirrus-70b" in str(ratings.data)
        links = [a for a in by_key["report-pairwise"] if f"eqarena-{run_id}.html" in str(a.data)]
        assert len(links) == 1 and links[0].flow_run_id is not None  # Prefect stores a link artifact as markdown


def _server_children(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [c for c in children if "prefect.server.api.server:create_app" in " ".join(c.cmdline())]


@pytest.mark.integration  # a killed eqarena process and its Prefect server
def test_killed_command_leaves_no_prefect_server_behind(tmp_path):
    """A command run as a Prefect flow without a configured API (EQARENA_PREFECT=always) starts a
    temporary API server; SIGKILL of the command stops it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), EQARENA_PREFECT="always")
    db = tmp_path / "w.duckdb"
    command = subprocess.Popen(
        [str(EQARENA), "import", "pairwise", str(EXAMPLES / "pairwise.csv"), "--db", str(db)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        servers: list[psutil.Process] = []
        while time.monotonic() < deadline and not servers and command.poll() is None:
            servers = _server_children(command.pid)
            time.sleep(0.2)
        assert servers, "the command started no temporary Prefect server"
        command.send_signal(signal.SIGKILL)
        command.wait(timeout=10)
        gone, alive = psutil.wait_procs(servers, timeout=20)
        assert not alive, f"temporary Prefect server outlived the killed command: {[p.pid for p in alive]}"
    finally:
        if command.poll() is None:
            command.kill()
        for leftover in _server_children(command.pid):
            leftover.kill()
