"""What a user sees while `eqarena rate` works: on a terminal (a real pseudo-terminal here) a progress
bar that counts bootstrap replicates as they finish; in a pipe one line per long step."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

EQARENA = Path(sys.executable).with_name("eqarena")
pytestmark = pytest.mark.integration
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "EQARENA_PROGRESS")}
    return {**env, "EQARENA_PREFECT": "never", "COLUMNS": "120", "TERM": "xterm-256color"}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("progress") / "w.duckdb"
    done = subprocess.run(
        [str(EQARENA), "ingest", "--db", str(db)], env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return db


RATE = ("rate", "--judge", "prd:gpt4", "--methods", "bt,ne", "--bootstrap", "300", "--settle", "0")


def test_a_terminal_shows_the_bootstrap_counting_up(ingested):
    leader, follower = os.openpty()
    rate = subprocess.Popen(
        [str(EQARENA), *RATE, "--db", str(ingested)],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the command has exited
                break
            if not data:
                break
            chunks.append(data.decode(errors="replace"))
        elif rate.poll() is not None:
            break
    os.close(leader)
    assert rate.wait(timeout=60) == 0
    screen = ANSI.sub("", "".join(chunks))
    counts = {int(done) for done in re.findall(r"bootstrap replicates.*?(\d+)/300", screen)}
    assert len(counts) >= 2, screen[-2000:]  # drawn again as replicates finished, not once at the end
    assert "eqarena: " not in screen  # bars, not the lines meant for pipes
    assert "bootstrap: up to 300 replicates of 1 equilibrium method x 2 schemes" in screen  # said before it starts


def test_a_pipe_gets_one_line_per_long_step(ingested):
    rate = subprocess.run(
        [str(EQARENA), *RATE, "--db", str(ingested)], env=_env(), capture_output=True, text=True, timeout=600
    )
    assert rate.returncode == 0, rate.stderr
    lines = [line for line in rate.stderr.splitlines() if line.startswith("eqarena: ")]
    assert any(re.fullmatch(r"eqarena: bootstrap replicates done in \d+\.\d s", line) for line in lines), rate.stderr
    assert "\x1b[" not in rate.stderr and "━" not in rate.stderr  # no bar drawn into the pipe
