"""Durability: `eqarena judge` killed with SIGKILL mid-run (live and Batch API modes), then re-run, pays
for no completed call twice and loses nothing already paid. The judge runs in a subprocess; the fake
server (in this process) counts every sample it returned."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, plant_dataset
from judging import judge_options

from eqarena import warehouse
from eqarena.flows import judge_flow
from eqarena.judge.batch import BatchJudge
from eqarena.judge.inputs import read_inputs
from eqarena.judge.plan import plan_missing
from eqarena.judge.templates import load_template
from eqarena.llm.providers import make_provider
from eqarena.options import RetryPolicy, RunnerOptions
from eqarena.tasks.judge_plan import plan_judge_run
from eqarena.warehouse.judge_batches import update_job

REPO_ROOT = Path(__file__).resolve().parents[1]
QUALITY = {"m1": 0.9, "m2": 0.3, "m3": -0.3, "m4": -0.9}
PROMPTS = [str(p) for p in range(1, 6)]
SAMPLES = 2
TEMPLATE = load_template("pairwise5")
ALL_CELLS = {(p, a, b): SAMPLES for p in PROMPTS for a in QUALITY for b in QUALITY if a != b}


@pytest.fixture
def toy_db(db_path):
    con = warehouse.connect(db_path)
    plant_dataset(con, "toy", PROMPTS, list(QUALITY))
    con.close()
    return db_path


def start_judge(spec: str, db: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    """`eqarena judge` in a child process using this session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), **(env or {})}
    command = [
        sys.executable,
        "-m",
        "eqarena.cli",
        "judge",
        "--judge",
        spec,
        "--dataset",
        "toy",
        "--db",
        str(db),
        "--samples-per-order",
        str(SAMPLES),
        "--retry-wait",
        "0.01",
        *extra,
    ]
    return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(condition, process: subprocess.Popen, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"judge exited early:\n{process.stdout.read().decode()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("timed out waiting for the judge subprocess")
        time.sleep(0.005)


CONCURRENCY = 4


def all_workers_waiting(server: FakeLLMServer) -> bool:
    """Every request slot holds a parked request: each answer given so far has been read by the judge,
    which then sent its next request. Killed now, nothing is in transit."""
    return server.snapshot().parked >= CONCURRENCY


def stored_cells(db: Path) -> tuple[dict, int]:
    con = warehouse.connect(db)
    try:
        rows = con.execute("SELECT prompt_id, model_a, model_b, sample_index, status FROM judgments").fetchall()
    finally:
        con.close()
    assert len(rows) == len({r[:4] for r in rows})
    cells: dict = {}
    for p, a, b, _, status in rows:
        if status in ("ok", "unparsed"):
            cells[p, a, b] = cells.get((p, a, b), 0) + 1
    return cells, len(rows)


def test_kill_9_mid_run_then_rerun_repeats_no_paid_call(prefect_harness, toy_db):
    with FakeLLMServer(QUALITY, latency_s=0.01, hold_after=50) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        judge = start_judge(spec, toy_db, "--concurrency", str(CONCURRENCY), "--timeout", "60")
        # The server answers 50 requests, then parks the next ones: the judge is mid-run, waiting. It is
        # killed at once, within the write buffer's commit delay: the last answers are in its journal only.
        wait_for(lambda: all_workers_waiting(server), judge)
        judge.kill()  # SIGKILL: no cleanup of any kind
        judge.wait()
        paid_before_kill = server.snapshot().paid_samples
        server.release(reject=True)  # the parked requests were never answered: not paid

        held, rows = stored_cells(toy_db)
        assert held == paid_before_kill and sum(held.values()) >= 50  # nothing paid was lost

        server.configure(hold_after=None)
        retry = RetryPolicy(initial_wait_s=0.01)
        outcome = judge_flow(judge_options(spec, samples_per_order=SAMPLES, retry=retry), str(toy_db), progress=False)
        seen = server.snapshot()
    assert outcome.left.calls == 0
    assert seen.paid_samples == ALL_CELLS  # every sample paid exactly once over both runs
    held, rows = stored_cells(toy_db)
    assert held == ALL_CELLS and rows == sum(ALL_CELLS.values())


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_stop_mid_run_stores_the_answers_in_flight_and_a_rerun_pays_only_the_rest(prefect_harness, toy_db, stop):
    with FakeLLMServer(QUALITY, latency_s=0.01, hold_after=50) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        judge = start_judge(spec, toy_db, "--concurrency", str(CONCURRENCY), "--timeout", "60")
        wait_for(lambda: all_workers_waiting(server), judge)
        judge.send_signal(stop)  # the requests in flight are paid for once the server answers them
        time.sleep(1.0)
        assert judge.poll() is None, judge.stdout.read().decode()  # still waiting for its answers
        sent = server.snapshot().requests
        server.release()  # the parked requests are answered (and paid)
        output = judge.communicate(timeout=120)[0].decode()
        seen = server.snapshot()
        assert judge.returncode == 130, output
        assert f"waiting up to 30 s for the {CONCURRENCY} requests in flight" in output
        assert seen.requests == sent == seen.successes  # nothing sent after the stop, every request answered
        held, _ = stored_cells(toy_db)
        assert held == seen.paid_samples  # ... and every answer stored, those of the requests in flight too

        server.configure(hold_after=None)
        retry = RetryPolicy(initial_wait_s=0.01)
        judge_flow(judge_options(spec, samples_per_order=SAMPLES, retry=retry), str(toy_db), progress=False)
        seen = server.snapshot()
    assert seen.paid_samples == ALL_CELLS  # every sample paid exactly once over both runs
    con = warehouse.connect(toy_db)
    try:
        runs = con.execute("SELECT status, message FROM runs WHERE kind = 'judge' ORDER BY started_at").fetchall()
    finally:
        con.close()
    assert [status for status, _ in runs] == ["interrupted", "ok"]
    assert runs[0][1].startswith("interrupted") and f"from {sent} requests" in runs[0][1]


def test_a_stop_waits_for_the_requests_in_flight_no_longer_than_its_grace_period(prefect_harness, toy_db):
    with FakeLLMServer(QUALITY, latency_s=0.01, hold_after=10) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        judge = start_judge(
            spec, toy_db, "--concurrency", str(CONCURRENCY), "--timeout", "600", env={"EQARENA_STOP_GRACE_S": "2"}
        )
        wait_for(lambda: all_workers_waiting(server), judge)
        judge.send_signal(signal.SIGINT)  # the server never answers the parked requests
        output = judge.communicate(timeout=120)[0].decode()
        server.release(reject=True)
    assert judge.returncode == 130, output
    assert f"waiting up to 2 s for the {CONCURRENCY} requests in flight" in output
    assert f"stopping after 2 s; the {CONCURRENCY} requests in flight are given up" in output
    held, _ = stored_cells(toy_db)
    assert held == server.snapshot().paid_samples  # what was answered before the stop is stored


def test_batch_mode_resumes_after_kill_without_a_second_batch(prefect_harness, toy_db):
    with FakeLLMServer(QUALITY) as server:
        server.configure(batch_hold=True)  # the provider keeps the batch in progress
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        judge = start_judge(spec, toy_db, "--batch", "--batch-poll", "0.05")
        wait_for(lambda: server.snapshot().batch_retrievals >= 3, judge)  # created, recorded, being polled
        judge.kill()
        judge.wait()
        assert server.snapshot().batch_creates == 1 and not server.snapshot().paid_samples

        con = warehouse.connect(toy_db)
        (job,) = con.execute("SELECT job_id, status, batch_id FROM judge_batches").fetchall()
        con.close()
        assert job[1] == "submitted" and job[2]
        batch = judge_options(
            spec, samples_per_order=SAMPLES, retry=RetryPolicy(), runner=RunnerOptions(batch=True, batch_poll_s=0.05)
        )
        planned = plan_judge_run(batch, str(toy_db))
        assert planned.plan.calls == 0 and planned.plan.pending_samples == sum(ALL_CELLS.values())

        server.configure(batch_hold=False)
        outcome = judge_flow(batch, str(toy_db), progress=False)
        seen = server.snapshot()
    assert seen.batch_creates == 1 and outcome.batch_jobs == (job[0],)
    assert seen.paid_samples == ALL_CELLS
    held, rows = stored_cells(toy_db)
    assert held == ALL_CELLS and rows == sum(ALL_CELLS.values())
    con = warehouse.connect(toy_db)
    assert con.execute("SELECT status, batch_id FROM judge_batches").fetchall() == [("imported", job[2])]


def test_a_batch_created_but_not_recorded_is_found_not_recreated(prefect_harness, toy_db):
    with FakeLLMServer(QUALITY) as server:
        server.configure(batch_hold=True)
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        con = warehouse.connect(toy_db)
        inputs = read_inputs(con, "toy", None, None)
        plan = plan_missing(
            con,
            "openai-compatible:judge",
            TEMPLATE,
            inputs,
            samples_per_order=SAMPLES,
            max_unparsed=None,
            multi_sample=True,
            batch=True,
            price=None,
        )

        async def upload_and_create() -> str:
            provider = make_provider(spec)
            try:
                batch = BatchJudge(
                    provider=provider,
                    template=TEMPLATE,
                    dataset="toy",
                    prompts=inputs.prompts,
                    responses=inputs.responses,
                    con=con,
                )
                (job_id,) = batch.prepare(plan.requests)
                await batch.submit(job_id)
                return job_id
            finally:
                await provider.aclose()

        job_id = asyncio.run(upload_and_create())
        # As if the process died after the provider created the batch but before DuckDB recorded it.
        update_job(con, job_id, status="uploaded", batch_id=None)
        con.close()
        server.configure(batch_hold=False)
        outcome = judge_flow(
            judge_options(
                spec,
                samples_per_order=SAMPLES,
                retry=RetryPolicy(),
                runner=RunnerOptions(batch=True, batch_poll_s=0.05),
            ),
            str(toy_db),
            progress=False,
        )
        seen = server.snapshot()
    assert seen.batch_creates == 1 and outcome.batch_jobs == (job_id,)
    assert seen.paid_samples == ALL_CELLS
    held, _ = stored_cells(toy_db)
    assert held == ALL_CELLS
