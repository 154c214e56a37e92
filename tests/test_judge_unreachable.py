"""A judge that does not answer: `eqarena judge` against a port nothing listens on ends in seconds with
one `error:` line naming the URL (OpenAI, OpenAI-compatible and Gemini providers), where it used to retry
for minutes in silence. A judge that answered and then went away is retried like any network failure:
back within the retries, the run completes; gone for good, the run ends with one line once a request has
used up its retries, keeping what was judged. Real `eqarena` subprocesses, the session's Prefect API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, plant_dataset

from eqarena import warehouse

EQARENA = Path(sys.executable).with_name("eqarena")
QUALITY = {"m1": 1.0, "m2": 0.0, "m3": -1.0}
CALLS = 3 * 6  # 3 prompts x 6 ordered pairs, one sample each
SPECS = {  # case: (spec with the server's {url}, the base URL the error names, environment, options)
    "openai": ("openai:gpt-4o-mini@{url}/v1", "{url}/v1", {"OPENAI_API_KEY": "sk-test-0000000000"}, ()),
    "openai-compatible": ("openai-compatible:judge@{url}/v1", "{url}/v1", {}, ()),
    "gemini": ("gemini:gemini-2.0-flash@{url}", "{url}", {"GEMINI_API_KEY": "test-key-0000000000"}, ()),
    "openai-batch": ("openai:gpt-4o-mini@{url}/v1", "{url}/v1", {"OPENAI_API_KEY": "sk-test-0000000000"}, ("--batch",)),
}


@pytest.fixture
def toy_db(tmp_path, prefect_harness) -> Path:
    db = tmp_path / "w.duckdb"
    con = warehouse.connect(db)
    plant_dataset(con, "toy", ["p1", "p2", "p3"], list(QUALITY))
    con.close()
    return db


def _env(**extra: str) -> dict:
    from prefect.settings import get_current_settings

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env["PREFECT_API_URL"] = str(get_current_settings().api.url)  # the session's API: no start-up per process
    return {**env, **extra}


def _closed_port() -> int:
    """A port nothing listens on (free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _judge(db: Path, spec: str, *options: str) -> list[str]:
    return [str(EQARENA), "judge", "-j", spec, "-d", "toy", "--db", str(db), "--samples-per-order", "1", *options]


def _ok_judgments(db: Path) -> int:
    con = warehouse.connect(db, read_only=True)
    try:
        return con.execute("SELECT count(*) FROM judgments WHERE status = 'ok'").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("case", list(SPECS))
def test_a_judge_nothing_listens_on_ends_the_run_with_one_line(toy_db, case):
    spec, shown, keys, options = SPECS[case]
    url = f"http://127.0.0.1:{_closed_port()}"
    # bounded: with retries on a refused connection, this ran for more than 9 minutes without a word
    result = subprocess.run(
        _judge(toy_db, spec.format(url=url), *options), env=_env(**keys), capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stderr
    shown = shown.format(url=url)
    assert result.stderr.splitlines() == [f"error: cannot reach the judge at {shown}: connection refused"]
    assert result.stdout == ""


def _judged_then_held(command: subprocess.Popen, server: FakeLLMServer, timeout: float = 120) -> int:
    """Wait until the server answered its first requests and holds the next ones; how many it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert command.poll() is None, command.communicate()
        seen = server.snapshot()
        if seen.successes >= server.hold_after and seen.parked:
            time.sleep(0.2)  # every in-flight request parked
            return server.snapshot().parked
        time.sleep(0.05)
    pytest.fail("the judge command never reached the server")


def test_a_judge_that_went_away_and_came_back_is_retried(toy_db):
    with FakeLLMServer(QUALITY, hold_after=4) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        command = subprocess.Popen(
            _judge(
                toy_db, spec, "--concurrency", "2", "--retries", "8", "--retry-wait", "0.2", "--timeout", "10", "--json"
            ),
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        held = _judged_then_held(command, server)
        server.stop()  # the held requests' connections close; new ones are refused
        time.sleep(3.0)  # down for longer than the first backoffs (0.2 to 0.4 s, then twice that)
        server.configure(hold_after=None)
        server.start()  # back at the same address
        out, err = command.communicate(timeout=120)
    assert command.returncode == 0, err
    outcome = json.loads(out)
    assert outcome["left"]["calls"] == 0 and outcome["stats"]["ok"] == CALLS
    assert outcome["stats"]["retries"] > held  # retried after the disconnect, and on refused connections
    assert _ok_judgments(toy_db) == CALLS


def test_a_judge_gone_for_good_ends_the_run_with_one_line_and_keeps_the_judgments(toy_db):
    with FakeLLMServer(QUALITY, hold_after=4) as server:
        url = server.openai_base_url
        command = subprocess.Popen(
            _judge(
                toy_db,
                f"openai-compatible:judge@{url}",
                "--concurrency",
                "2",
                "--retries",
                "3",
                "--retry-wait",
                "0.05",
                "--timeout",
                "10",
            ),
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _judged_then_held(command, server)
        server.stop()
        out, err = command.communicate(timeout=120)
    assert command.returncode == 1, err
    assert err.splitlines() == [
        f"error: the judge at {url} stopped answering: connection refused after 3 attempts; "
        "the judgments made are stored, run the same command again to continue"
    ]
    assert _ok_judgments(toy_db) == 4


def test_a_run_where_every_call_failed_exits_1_with_one_line_and_a_rerun_asks_again(toy_db):
    with FakeLLMServer(QUALITY, fault_rate=1.0, fault_kinds=("500",)) as server:
        url = server.openai_base_url
        failing = subprocess.run(
            _judge(toy_db, f"openai-compatible:judge@{url}", "--retries", "2", "--retry-wait", "0.01"),
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        server.configure(fault_rate=0.0)
        rerun = subprocess.run(
            _judge(toy_db, f"openai-compatible:judge@{url}", "--retry-wait", "0.01"),
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    assert failing.stderr.splitlines() == [
        f"error: every judge call failed ({CALLS} samples from {2 * CALLS} requests; retried for HTTP 500 x{CALLS}); "
        "the failures are stored as `error` judgments, and a re-run asks for them again"
    ]
    assert rerun.returncode == 0, rerun.stderr
    assert _ok_judgments(toy_db) == CALLS


def test_without_a_prefect_api_judge_starts_none(toy_db, tmp_path):
    """No Prefect API configured: `judge` runs its pipeline as plain Python, as rate and import do. A
    refused connection is one line, and a run against a live judge stores its judgments; neither starts
    a temporary Prefect API (no flow run recorded, no server database in PREFECT_HOME)."""
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in _env().items() if not k.startswith("PREFECT_API") and k != "EQARENA_PREFECT"}
    env["PREFECT_HOME"] = str(home)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    refused = subprocess.run(
        _judge(toy_db, f"openai-compatible:judge@{url}"), env=env, capture_output=True, text=True, timeout=60
    )
    assert (refused.returncode, refused.stderr) == (1, f"error: cannot reach the judge at {url}: connection refused\n")
    with FakeLLMServer(QUALITY) as server:
        done = subprocess.run(
            _judge(toy_db, f"openai-compatible:judge@{server.openai_base_url}"),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert _ok_judgments(toy_db) == CALLS
    con = warehouse.connect(toy_db, read_only=True)
    try:
        runs = con.execute("SELECT status, flow_run_id FROM runs WHERE kind = 'judge' ORDER BY started_at").fetchall()
    finally:
        con.close()
    assert runs[-1] == ("ok", None)
    assert not (home / "prefect.db").exists()
