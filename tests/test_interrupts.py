"""Stopping a command mid-bootstrap (SIGINT, SIGTERM, kill -9) stops its worker processes within 2 s and
leaves no rate run behind; real `eqarena` subprocesses."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from eqarena.cli.main_job import KEPT_ON_INTERRUPT

EQARENA = Path(sys.executable).parent / "eqarena"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("interrupts") / "w.duckdb"
    done = subprocess.run(
        [str(EQARENA), "ingest", "--db", str(db)], env=_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return db


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return {**env, "EQARENA_PREFECT": "never"}


def _workers_started(process: subprocess.Popen, timeout: float = 240) -> list[psutil.Process]:
    """The command's child processes once its bootstrap is under way: a worker has used 3 s of CPU (its
    imports take about 1 s; workers started ahead of the bootstrap then wait for its data)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        children = psutil.Process(process.pid).children(recursive=True)
        try:
            if any(sum(child.cpu_times()[:2]) >= 3.0 for child in children):
                return children
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.2)
    pytest.fail("the bootstrap never started its worker processes")


def _described(processes: list[psutil.Process]) -> list[str]:
    """pid, state and command line of each process, for a failure message."""
    out = []
    for p in processes:
        try:
            out.append(f"{p.pid} {p.status()} {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            out.append(f"{p.pid} gone")
    return out


def _eqarena(args: list[str], **popen) -> subprocess.Popen:
    """The `eqarena` command with `args`, in its own process: stdout discarded, stderr kept as text."""
    return subprocess.Popen(
        [str(EQARENA), *args], env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **popen
    )


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "kill-9"])
def test_a_stopped_bootstrap_leaves_no_worker_and_no_run(warehouse, how):
    rate = _eqarena(["rate", "--judge", "prd:gpt4", "--bootstrap", "5000", "--db", str(warehouse)])
    try:
        workers = _workers_started(rate)
        rate.send_signal(how)
        gone, alive = psutil.wait_procs(workers, timeout=2.0)
        alive = [p for p in alive if _running(p)]  # a zombie has stopped, its parent just has not reaped it
        assert not alive, f"still running 2 s after {how.name}: {_described(alive)}"
        assert rate.wait(timeout=10) != 0
        if how != signal.SIGKILL:  # it says what it kept (kill -9 leaves it no word)
            assert "rate interrupted: nothing written" in rate.stderr.read()
    finally:
        if rate.poll() is None:
            rate.kill()
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs WHERE kind = 'rate'").fetchone()[0] == 0


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_main_job_ends_at_once_with_its_analyses_still_computing(warehouse, how):
    """`eqarena run` computes its analyses on a thread while the bootstrap's workers run: stopped then,
    it exits 130 at once (no abort from the thread's native code) and writes no run."""
    run = _eqarena(["run", "--db", str(warehouse), "--out", str(warehouse.parent / "out")])
    try:
        children = _workers_started(run)  # the analyses (about 5 s) started with the bootstrap
        # The bootstrap's two workers, and the risk analysis's one-core process once it has started (it may
        # start before or after a worker has used 3 s of CPU); the resource tracker leaves with `run`.
        workers = [p for p in children if "resource_tracker" not in " ".join(p.cmdline())]
        run.send_signal(how)
        gone, alive = psutil.wait_procs(workers, timeout=2.0)
        assert len(workers) in (2, 3), _described(workers)
        assert not [p for p in alive if _running(p)], _described(alive)
        assert run.wait(timeout=10) == 130
        psutil.wait_procs(children, timeout=2.0)
        assert not [p for p in children if _running(p)]
        stderr = run.stderr.read()
        # No abort from native code, no traceback (multiprocessing's resource tracker may still warn
        # about a semaphore of the stopped pool that was already removed).
        assert "terminate called" not in stderr and "Fatal" not in stderr and "Traceback" not in stderr, stderr
        assert "run interrupted: no rate run written" in stderr and "the judgments made so far are kept" in stderr
    finally:
        if run.poll() is None:
            run.kill()
    with duckdb.connect(str(warehouse), read_only=True) as con:
        kinds = {k for (k,) in con.execute("SELECT kind FROM runs WHERE kind IN ('rate', 'clones', 'risk')").fetchall()}
    assert not kinds


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_simulation_stops_its_trials_at_once_and_says_what_it_kept(tmp_path, how):
    """`simulate improvement-path` stopped while its workers run trials: the workers stop within 2 s (the
    pool is terminated, not waited for: before, the command waited minutes for the running trials), the
    command exits 130, says how many trials were done and that none is stored, and records `interrupted`."""
    db = tmp_path / "sim.duckdb"
    sim = _eqarena(["simulate", "improvement-path", "--trials", "8", "--db", str(db), "--out", str(tmp_path)])
    try:
        children = _workers_started(sim)
        workers = [p for p in children if "resource_tracker" not in " ".join(p.cmdline())]
        sim.send_signal(how)
        gone, alive = psutil.wait_procs(workers, timeout=2.0)
        assert len(workers) == 2 and not [p for p in alive if _running(p)], _described(alive)
        assert sim.wait(timeout=10) == 130
        stderr = sim.stderr.read()
        assert re.search(r"simulate interrupted after \d+ of 32 trials: none stored", stderr), stderr
        assert "Traceback" not in stderr, stderr
    finally:
        if sim.poll() is None:
            sim.kill()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT kind, status FROM runs").fetchall() == [("simulate", "interrupted")]
        assert con.execute("SELECT count(*) FROM simulation_runs").fetchone()[0] == 0


def _workers_importing(process: subprocess.Popen, timeout: float = 240) -> list[psutil.Process]:
    """The command's two worker processes while they still import (started ahead of the bootstrap)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()
        children = psutil.Process(process.pid).children(recursive=True)
        workers = [c for c in children if "resource_tracker" not in " ".join(_cmdline(c))]
        if len(workers) == 2:
            time.sleep(0.3)  # into their imports
            return children
        time.sleep(0.02)
    pytest.fail("the main job never started its worker processes")


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


@pytest.mark.parametrize("moment", ["workers importing", "bootstrap"])
def test_ctrl_c_at_a_terminal_stops_the_main_job_quietly(warehouse, moment):
    """Ctrl-C at a terminal sends SIGINT to the whole process group, workers included: the command still
    exits 130, its stderr holds only its one line on what it kept (no worker's KeyboardInterrupt
    traceback), and no process of the group keeps running."""
    run = _eqarena(["run", "--db", str(warehouse), "--out", str(warehouse.parent / "out")], start_new_session=True)
    try:
        children = _workers_importing(run) if moment == "workers importing" else _workers_started(run)
        os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=10) == 130
        psutil.wait_procs(children, timeout=2.0)
        assert not [p.pid for p in children if _running(p)]
        stderr = run.stderr.read()
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
        said = [line for line in stderr.splitlines() if not line.startswith("eqarena: ")]  # progress lines
        assert said == [f"run {KEPT_ON_INTERRUPT}"], stderr
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


STARTING_WORKER = """
import signal, time
# Python's own SIGINT handler, as an interpreter started with SIGINT at its default has it (one started by
# a test runner that ignores SIGINT would inherit the ignoring, and the unheld case would test nothing)
signal.signal(signal.SIGINT, signal.default_int_handler)
time.sleep(1.0)  # a worker's interpreter still starting, before its first import of eqarena
import eqarena
print(
    signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set()),
    signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
)
"""


@pytest.mark.parametrize("held", [True, False])
def test_a_ctrl_c_before_a_workers_first_import_waits_and_is_dropped(held):
    """A worker started inside `holding_interrupts` inherits SIGINT blocked: a SIGINT sent while its
    interpreter starts waits, and is dropped once `eqarena` is imported (SIGINT then ignored, unblocked).
    Started outside it, the same SIGINT kills the worker with a KeyboardInterrupt traceback."""
    from eqarena.runtime.lifeline import WORKER_OF_ENV, expect_workers, holding_interrupts

    expect_workers()
    try:
        if held:
            with holding_interrupts():
                worker = subprocess.Popen(
                    [sys.executable, "-c", STARTING_WORKER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
        else:
            worker = subprocess.Popen(
                [sys.executable, "-c", STARTING_WORKER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        time.sleep(0.3)
        worker.send_signal(signal.SIGINT)
        out, err = worker.communicate(timeout=120)
    finally:
        os.environ.pop(WORKER_OF_ENV, None)
    if held:
        assert (worker.returncode, err) == (0, ""), err
        assert out.split() == ["False", "True"]  # unblocked, and ignored
    else:
        assert worker.returncode != 0 and "KeyboardInterrupt" in err
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # this process's mask is back


SPAWNED_IN_THE_BLOCK = """
import concurrent.futures, multiprocessing, signal
def blocked():
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
if __name__ == "__main__":
    from eqarena.runtime.lifeline import holding_interrupts
    with holding_interrupts():  # the first spawn of this process: multiprocessing starts its resource tracker
        pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        pool.submit(int).result()
    print(pool.submit(blocked).result(), blocked())
    pool.shutdown()
"""


def test_a_spawned_worker_inherits_sigint_blocked_even_when_it_is_the_first(tmp_path):
    """multiprocessing's resource tracker unblocks SIGINT in the thread that starts it: `holding_interrupts`
    starts it first, so the process's first spawned worker still starts with SIGINT blocked."""
    script = tmp_path / "spawn_first.py"
    script.write_text(SPAWNED_IN_THE_BLOCK)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]  # blocked in the worker; unblocked again in the parent
