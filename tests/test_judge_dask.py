"""`judge_flow(runner="dask")` end to end against the local fake server: calls made on a 2-worker Dask
cluster, one shared rate limit across the workers, every planned judgment stored exactly once by the flow
process, and caps, retries, unparseable re-asks and keys working as with the default runner."""

from __future__ import annotations

import bisect
import os
from itertools import permutations

import pytest
from fake_llm_server import FakeLLMServer, plant_dataset
from judging import judge_options

from eqarena import warehouse
from eqarena.flows import judge_flow
from eqarena.options import RetryPolicy, RunnerOptions

QUALITY = {"m1": 0.9, "m2": 0.3, "m3": 0.0, "m4": -0.3, "m5": -0.9}
PROMPTS = [str(p) for p in range(1, 6)]
SAMPLES = 2  # 5 prompts x 20 ordered pairs x 2 samples = 200 single-sample calls
RPM = 720.0  # 12 calls/s: 200 calls take about 16 s
RETRY = RetryPolicy(attempts=20, initial_wait_s=0.05, max_wait_s=60.0, timeout_s=10.0)


def dask_judge(spec: str, **fields):
    """The test's JudgeOptions: patient retries, one sample per request."""
    return judge_options(spec, retry=RETRY, multi_sample=False, **fields)


@pytest.fixture
def toy_db(db_path):
    con = warehouse.connect(db_path)
    plant_dataset(con, "toy", PROMPTS, list(QUALITY))
    con.close()
    return db_path


def stored(db_path, judge: str) -> list[tuple]:
    con = warehouse.connect(db_path, read_only=True)
    try:
        return con.execute(
            "SELECT prompt_id, model_a, model_b, sample_index, status, raw_text, error FROM judgments WHERE judge = ?",
            [judge],
        ).fetchall()
    finally:
        con.close()


def max_in_window(times: list[float], window_s: float) -> int:
    """The most events in any interval of `window_s` seconds (sliding, starting at an event)."""
    times = sorted(times)
    return max((bisect.bisect_right(times, t + window_s) - i for i, t in enumerate(times)), default=0)


def test_dask_runner_judges_every_cell_once_within_one_shared_rate_limit(prefect_harness, toy_db):
    planned = {(p, a, b, s) for p in PROMPTS for a, b in permutations(QUALITY, 2) for s in range(SAMPLES)}
    assert len(planned) == 200
    with FakeLLMServer(QUALITY, latency_s=0.1, rpm_limit=RPM, record_times=True) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        options = dask_judge(
            spec,
            samples_per_order=SAMPLES,
            rpm=RPM,
            concurrency=16,
            runner=RunnerOptions(runner="dask", dask_workers=2),
        )
        out = judge_flow(options, str(toy_db), progress=False)
        seen = server.snapshot()
        again = judge_flow(options, str(toy_db), progress=False)
        assert server.snapshot().requests == seen.requests  # the re-run plans nothing and sends nothing
    assert out.plan.calls == 200 and out.left.calls == 0 and out.message.startswith("done"), out.message
    assert "nothing to do" in again.message

    rows = stored(toy_db, "openai-compatible:judge")
    keys = [r[:4] for r in rows]
    lost, duplicates = planned - set(keys), len(keys) - len(set(keys))
    assert (len(lost), duplicates, len(rows)) == (0, 0, 200)
    assert {r[4] for r in rows} == {"ok"}
    # no call was paid twice: the server answered every ordered cell exactly SAMPLES times
    assert seen.successes == 200 and set(seen.paid_samples.values()) == {SAMPLES}

    # Achieved rate of successful calls, from the server's own log: within 10% of the limit.
    ok = sorted(seen.success_times)
    achieved = 60.0 * (len(ok) - 1) / (ok[-1] - ok[0])
    assert 0.9 * RPM <= achieved <= 1.1 * RPM, f"{achieved:.0f}/min for a limit of {RPM:.0f}/min"

    # Shared limit: every request the server received (429s included) counts. The run is shorter than a
    # minute, so the minute window is also checked scaled down to 10 s: in any window of w seconds the
    # server saw at most 10% more than the limit allows in w seconds plus its one-second burst. Limits
    # per worker (2 x RPM in all) would break this.
    rate, burst = RPM / 60.0, max(1.0, RPM / 60.0)
    for w in (10.0, 60.0):
        most = max_in_window(seen.request_times, w)
        assert most <= 1.1 * (rate * w + burst), f"{most} requests in {w:.0f} s"
    assert seen.rate_limited <= 0.1 * 200  # retries went through the same limiter: few 429s


@pytest.fixture(scope="module")
def keyed_cluster():
    """A 2-worker LocalCluster started with OPENAI_API_KEY in its workers' environment only (the test
    process drops it again), reached by address as an existing cluster would be."""
    from distributed import LocalCluster

    key = "workers-only-test-key"
    os.environ["OPENAI_API_KEY"] = key
    try:
        cluster = LocalCluster(n_workers=2, threads_per_worker=8, processes=True, dashboard_address=":0")
    finally:
        del os.environ["OPENAI_API_KEY"]
    with cluster:
        yield cluster.scheduler_address, key


def test_dask_runner_caps_retries_and_keys_as_the_default_runner(prefect_harness, toy_db, keyed_cluster):
    address, key = keyed_cluster
    with FakeLLMServer(
        QUALITY, fault_rate=0.15, fault_kinds=("429", "500"), malformed_rate=0.1, seed=3, require_key=key
    ) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        common = dict(
            samples_per_order=1, prompts=2, max_unparsed=10, runner=RunnerOptions(runner="dask", dask_address=address)
        )
        capped = judge_flow(dask_judge(spec, max_calls=15, concurrency=4, **common), str(toy_db), progress=False)
        assert capped.stopped_by == "max-calls" and "stopped at the --max-calls cap" in capped.message
        assert 0 < capped.stats.samples <= 15 and capped.left.calls > 0
        done = judge_flow(dask_judge(spec, **common), str(toy_db), progress=False)
        seen = server.snapshot()
    assert done.left.calls == 0 and done.stopped_by is None, done.message
    assert seen.injected_faults > 0 and done.stats.retries + capped.stats.retries >= seen.injected_faults
    rows = stored(toy_db, "openai-compatible:judge")
    ok = {r[:3] for r in rows if r[4] == "ok"}
    assert ok == {(p, a, b) for p in PROMPTS[:2] for a, b in permutations(QUALITY, 2)}
    unparsed = [r for r in rows if r[4] == "unparsed"]
    assert len(unparsed) == seen.malformed_samples and len(rows) == len(ok) + len(unparsed)
    # the key reached the server from the workers' environment, and is nowhere in the warehouse
    con = warehouse.connect(toy_db, read_only=True)
    dump = str(rows) + str(con.execute("SELECT * FROM runs").fetchall())
    con.close()
    assert key not in dump


def test_a_missing_key_on_the_workers_stops_the_run(prefect_harness, toy_db, keyed_cluster):
    address, _ = keyed_cluster
    with FakeLLMServer(QUALITY) as server:
        with pytest.raises(Exception, match="set GEMINI_API_KEY"):  # the workers have none
            judge_flow(
                dask_judge(
                    f"gemini:gemini-2.0-flash@{server.url}",
                    prompts=1,
                    runner=RunnerOptions(runner="dask", dask_address=address),
                ),
                str(toy_db),
                progress=False,
            )
        assert server.snapshot().requests == 0
    assert stored(toy_db, "gemini:gemini-2.0-flash") == []


def test_gemini_calls_run_on_the_workers_through_the_google_genai_sdk(prefect_harness, toy_db, monkeypatch):
    """Gemini's async SDK client, made once per worker at warm-up, serves calls from every worker thread."""
    key = "gemini-test-key"
    monkeypatch.setenv("GEMINI_API_KEY", key)  # the LocalCluster's workers inherit it
    with FakeLLMServer(QUALITY, require_key=key) as server:
        out = judge_flow(
            dask_judge(
                f"gemini:gemini-2.0-flash@{server.url}",
                prompts=2,
                samples_per_order=1,
                concurrency=8,
                runner=RunnerOptions(runner="dask", dask_workers=2),
            ),
            str(toy_db),
            progress=False,
        )
        seen = server.snapshot()
    assert out.left.calls == 0 and out.message.startswith("done"), out.message
    rows = stored(toy_db, "gemini:gemini-2.0-flash")
    assert {r[:3] for r in rows} == {(p, a, b) for p in PROMPTS[:2] for a, b in permutations(QUALITY, 2)}
    assert {r[4] for r in rows} == {"ok"} and seen.successes == len(rows) == 40
