"""The temporary Prefect API a command starts (eqarena/orchestration/prefect_api.py: with
EQARENA_PREFECT=always and no API configured; `eqarena serve` without one) is gone within 2 s of
the command's exit however the command ends: SIGTERM, SIGINT, kill -9, or Ctrl-C in a terminal (SIGINT to
the command's whole process group); and it is the command's own server, not one Prefect started itself.
An interrupted command leaves no "nanobind: leaked" text either. Real `eqarena judge` and `eqarena
refresh` subprocesses, judging against a local fake server that holds every request, so the command is
mid-flow when it is stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from fake_llm_server import FakeLLMServer, plant_dataset

from eqarena import warehouse

EQARENA = Path(sys.executable).with_name("eqarena")
pytestmark = [pytest.mark.slow, pytest.mark.integration]
QUALITY = {"m1": 1.0, "m2": 0.0}


@pytest.fixture
def held_judge():
    """A fake judge server that parks every request: a command judging against it stays mid-flow."""
    with FakeLLMServer(QUALITY, hold_after=0) as server:
        yield server
        server.release(reject=True)


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "EQARENA_PREFECT"}
    env.update(
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        EQARENA_STOP_GRACE_S="1",  # a stopped judge waits no longer for requests the server holds forever
        EQARENA_PREFECT="always",  # flows without a configured API: the command starts its temporary one
    )
    return env


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE  # a zombie has stopped; only its reaping is pending
    except psutil.NoSuchProcess:
        return False


def _api_servers(pid: int) -> list[psutil.Process]:
    servers = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "prefect.server.api.server:create_app" in child.cmdline():
                servers.append(child)
        except psutil.NoSuchProcess:
            pass
    return servers


def _port(server: psutil.Process) -> int:
    args = server.cmdline()
    return int(args[args.index("--port") + 1])


def _answers(server: psutil.Process) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{_port(server)}/api/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _request_in_flight(server: psutil.Process) -> socket.socket:
    """A client in the middle of a request (its body never ends): uvicorn's graceful shutdown waits for it."""
    client = socket.create_connection(("127.0.0.1", _port(server)), timeout=5)
    client.sendall(
        b"POST /api/flow_runs/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    return client


def _judging(command: subprocess.Popen, judge: FakeLLMServer, timeout: float = 240) -> psutil.Process:
    """The command's temporary API server, once it answers and the command's first judge request is held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if command.poll() is not None:
            pytest.fail(f"the command ended before judging (exit {command.returncode})")
        servers = _api_servers(command.pid)
        if servers and judge.snapshot().parked and _answers(servers[0]):
            assert len(servers) == 1, f"more than one Prefect API server: {[s.cmdline()[:3] for s in servers]}"
            assert servers[0].cmdline()[1] == "-c", "Prefect started its own ephemeral API server"
            assert servers[0].ppid() == command.pid
            return servers[0]
        time.sleep(0.2)
    pytest.fail("the command never started its temporary Prefect API and judged")


def _stop_and_measure(command: subprocess.Popen, judge: FakeLLMServer, how: str) -> None:
    """Stop the judging command `how`, with a request to its API in flight; assert that the API server
    and everything else the command started stop within 2 s of the command's exit."""
    server = _judging(command, judge)
    started = psutil.Process(command.pid).children(recursive=True)  # the server and anything else it started
    try:
        with _request_in_flight(server):
            if how == "ctrl-c":
                os.killpg(command.pid, signal.SIGINT)  # what a terminal sends to its foreground process group
            else:
                command.send_signal(getattr(signal, how))
            command.wait(timeout=60)  # before the server had its own session, Ctrl-C took 77 s here
            exited = time.monotonic()
            while any(_running(p) for p in started) and time.monotonic() < exited + 2.0:
                time.sleep(0.02)
            left = [p.pid for p in started if _running(p)]
    finally:
        for process in started:  # a failed check leaves no orphan behind
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert not left, f"still running 2 s after the command's exit ({how}): {left} (API server {server.pid})"
    assert command.returncode != 0


def _start(argv: list[str], tmp_path: Path) -> subprocess.Popen:
    """The command in its own process group (a terminal's foreground job), stderr to tmp_path/stderr."""
    with open(tmp_path / "stderr", "wb") as stderr:
        return subprocess.Popen(
            argv, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
        )


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL", "ctrl-c"])
def test_the_temporary_api_of_a_stopped_judge_command_goes_with_it(tmp_path, held_judge, how):
    db = tmp_path / "w.duckdb"
    con = warehouse.connect(db)
    plant_dataset(con, "toy", ["p1", "p2"], list(QUALITY))
    con.close()
    command = _start(
        [
            str(EQARENA),
            "judge",
            "-j",
            f"openai-compatible:j@{held_judge.openai_base_url}",
            "-d",
            "toy",
            "--db",
            str(db),
        ],
        tmp_path,
    )
    try:
        _stop_and_measure(command, held_judge, how)
    finally:
        if command.poll() is None:
            command.kill()
    assert "nanobind" not in (tmp_path / "stderr").read_text()  # nothing of DuckDB left alive at exit


def test_the_temporary_api_of_a_killed_refresh_goes_with_it(tmp_path, held_judge):
    command = _start(
        [
            str(EQARENA),
            "refresh",
            "-j",
            f"openai-compatible:j@{held_judge.openai_base_url}",
            "-d",
            "vicuna80",
            "--samples-per-order",
            "1",
            "--yes",
            "--db",
            str(tmp_path / "w.duckdb"),
        ],
        tmp_path,
    )
    try:
        _stop_and_measure(command, held_judge, "SIGKILL")
    finally:
        if command.poll() is None:
            command.kill()
