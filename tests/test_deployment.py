"""eqarena as a Prefect deployment, against a real Prefect server started on 127.0.0.1: the
prefect.yaml deployments run by a process worker, and `eqarena serve` running a triggered refresh."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import query

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """A `prefect server start` of its own (temporary home and database); yields the environment
    that points commands at it."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert server.poll() is None, server.stderr.read()
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("prefect server did not start within 180 s")
        yield {**env, "PREFECT_API_URL": url}
    finally:
        stop(server)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()


def prefect(env: dict, *args: str, timeout: float = 300, cwd: Path = REPO_ROOT) -> str:
    done = subprocess.run(
        [str(BIN / "prefect"), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def flow_run_state(env: dict, deployment: str, flow_run_id: str) -> str:
    response = httpx.get(f"{env['PREFECT_API_URL']}/flow_runs/{flow_run_id}", timeout=10)
    response.raise_for_status()
    return response.json()["state"]["type"]


def trigger(env: dict, deployment: str, parameters: dict) -> str:
    """`prefect deployment run` (a manual trigger); returns the new flow run's id."""
    out = prefect(env, "deployment", "run", deployment, "--params", json.dumps(parameters))
    return out.split("/runs/flow-run/")[1].split()[0].strip()


def test_prefect_yaml_deployment_runs_on_a_process_worker(prefect_server, tmp_path):
    env = {**prefect_server, "EQARENA_HOME": str(REPO_ROOT)}
    prefect(env, "work-pool", "create", "eqarena", "--type", "process")
    prefect(env, "deploy", "--all", "--no-prompt")
    db, out = tmp_path / "w.duckdb", tmp_path / "out"
    options = {
        "source": "vicuna80",
        "judge": "prd:gpt4",
        "out_dir": str(out),
        "analyses": {"run": []},
        "rate": {"bootstrap": {"replicates": 20}},
    }
    flow_run_id = trigger(env, "refresh/nightly-refresh", {"db": str(db), "options": options})
    # The worker runs in another directory: the deployment's pull step moves the run to EQARENA_HOME.
    prefect(env, "worker", "start", "--pool", "eqarena", "--run-once", cwd=tmp_path)
    assert flow_run_state(env, "refresh/nightly-refresh", flow_run_id) == "COMPLETED"
    ((rate_run, flow_run),) = query(
        db, "SELECT parameters->>'rate_run_id', flow_run_id FROM runs WHERE kind = 'refresh'"
    )
    assert flow_run == flow_run_id
    assert (out / f"eqarena-{rate_run}.html").is_file()
    assert query(db, "SELECT count(DISTINCT model_id) FROM latest_model_ratings")[0][0] == 5


def test_serve_runs_a_triggered_refresh(prefect_server, tmp_path):
    db, out = tmp_path / "w.duckdb", tmp_path / "out"
    serve = subprocess.Popen(
        [
            str(BIN / "eqarena"),
            "serve",
            "--name",
            "test-serve",
            "--cron",
            "0 3 * * *",
            "--db",
            str(db),
            "--out",
            str(out),
            "--analyses",
            "none",
            "--bootstrap",
            "20",
        ],
        env=prefect_server,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the deployment exists once serve has registered it
            assert serve.poll() is None, serve.stderr.read()
            found = httpx.get(f"{prefect_server['PREFECT_API_URL']}/deployments/name/refresh/test-serve", timeout=10)
            if found.status_code == 200:
                break
            time.sleep(0.5)
        schedules = found.json()["schedules"]
        assert [s["schedule"]["cron"] for s in schedules] == ["0 3 * * *"]
        flow_run_id = trigger(prefect_server, "refresh/test-serve", {})
        deadline = time.monotonic() + 300
        state = "SCHEDULED"
        while time.monotonic() < deadline and state not in ("COMPLETED", "FAILED", "CRASHED"):
            time.sleep(1)
            state = flow_run_state(prefect_server, "refresh/test-serve", flow_run_id)
        assert state == "COMPLETED"
        assert query(db, "SELECT flow_run_id FROM runs WHERE kind = 'refresh'") == [(flow_run_id,)]
    finally:
        stop(serve)


def test_serve_rejects_a_bad_cron(tmp_path):
    done = subprocess.run(
        [str(BIN / "eqarena"), "serve", "--cron", "every night"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "error: --cron 'every night' is not a cron expression (e.g. '0 3 * * *')"
