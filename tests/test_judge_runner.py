"""The judge runner through the real openai and google-genai SDKs over real HTTP against the local
fake server (tests/fake_llm_server.py): injected faults, multi-sample fallbacks, Retry-After, caps,
fatal errors. No Prefect here (the steps' plain functions are called); flows are in test_judge_flow.py."""

from __future__ import annotations

import asyncio
import collections
import io
import math
import time

import pytest
from fake_llm_server import FakeLLMServer, plant_dataset
from rich.console import Console

from eqarena import warehouse
from eqarena.judge.inputs import read_inputs
from eqarena.judge.plan import plan_missing
from eqarena.judge.runner import JudgeRunner
from eqarena.judge.templates import load_template
from eqarena.llm.budget import Budget
from eqarena.llm.progress import JudgeProgress, WaitColumn
from eqarena.llm.providers import FatalProviderError, make_provider
from eqarena.options import RetryPolicy, RunLimits
from eqarena.warehouse.judgments import JudgmentWriter

QUALITY = {"m1": 1.0, "m2": 0.4, "m3": -0.2, "m4": -0.8}
FAST_RETRY = RetryPolicy(attempts=12, initial_wait_s=0.01, max_wait_s=0.05, timeout_s=0.5)
TEMPLATE = load_template("pairwise5")


@pytest.fixture
def con(db_path):
    con = warehouse.connect(db_path)
    plant_dataset(con, "toy", [str(p) for p in range(1, 5)], list(QUALITY))
    yield con
    con.close()


def plan_for(con, judge_id, *, samples=2, multi=True, max_unparsed=None, prompts=None, models=None):
    inputs = read_inputs(con, "toy", models, prompts)
    plan = plan_missing(
        con,
        judge_id,
        TEMPLATE,
        inputs,
        samples_per_order=samples,
        max_unparsed=max_unparsed,
        multi_sample=multi,
        batch=False,
        price=None,
    )
    return plan, inputs


def run(con, spec, plan, inputs, *, retry=FAST_RETRY, limits=RunLimits(concurrency=8), budget=None, multi=True):
    async def go():
        provider = make_provider(spec, timeout_s=retry.timeout_s)
        try:
            async with JudgeRunner(
                provider=provider,
                template=TEMPLATE,
                dataset="toy",
                prompts=inputs.prompts,
                responses=inputs.responses,
                writer=JudgmentWriter(con),
                run_id="test",
                retry=retry,
                limits=limits,
                budget=budget,
                multi_sample=multi,
            ) as runner:
                await runner.judge(plan.requests)
            return runner
        finally:
            await provider.aclose()

    return asyncio.run(go())


def stored(con, judge_id):
    rows = con.execute(
        "SELECT prompt_id, model_a, model_b, sample_index, status FROM judgments WHERE judge = ?", [judge_id]
    ).fetchall()
    assert len(rows) == len({r[:4] for r in rows}), "duplicate judgment keys"
    return rows


def per_cell(rows, statuses=("ok", "unparsed")):
    return collections.Counter((p, a, b) for p, a, b, _, s in rows if s in statuses)


@pytest.mark.parametrize("multi", [True, False], ids=["multi-sample", "single-sample"])
def test_thirty_percent_faults_complete_with_exact_request_accounting(con, multi):
    with FakeLLMServer(QUALITY, seed=1, fault_rate=0.3, malformed_rate=0.1, stall_s=1.0) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, multi=multi, max_unparsed=50)
        runner = run(con, f"{judge_id}@{server.openai_base_url}", plan, inputs, multi=multi)
        seen = server.snapshot()

    assert set(seen.faults) == {"429", "500", "stall", "reset"}
    # A Binomial(requests, 0.3) count of faults: within 4 standard deviations of its mean.
    assert abs(seen.injected_faults - 0.3 * seen.requests) < 4 * math.sqrt(0.21 * seen.requests)
    # Every request is a planned one, a retry of an injected fault, or a re-ask after an unparseable verdict.
    assert seen.requests == plan.request_count + seen.injected_faults + seen.malformed_responses
    assert runner.stats.requests == seen.requests and runner.stats.retries == seen.injected_faults
    rows = stored(con, judge_id)
    assert per_cell(rows, ("ok",)) == {r.cell: 2 for r in plan.requests}  # 0 missing cells
    assert sum(1 for r in rows if r[4] == "unparsed") == seen.malformed_samples > 0
    assert per_cell(rows) == seen.paid_samples  # every paid sample is stored, none paid twice
    after, _ = plan_for(con, judge_id, multi=multi, max_unparsed=50)
    assert after.samples == 0


def test_gemini_sdk_against_the_local_server(con, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-key")
    with FakeLLMServer(
        QUALITY, seed=2, fault_rate=0.3, malformed_rate=0.05, stall_s=1.0, require_key="gemini-test-key"
    ) as server:
        judge_id = "gemini:gemini-2.0-flash"
        plan, inputs = plan_for(con, judge_id, prompts=2, max_unparsed=50)
        runner = run(con, f"{judge_id}@{server.url}", plan, inputs)
        seen = server.snapshot()
    assert seen.requests == plan.request_count + seen.injected_faults + seen.malformed_responses
    assert runner.stats.multi_sample_refusals == 0
    rows = stored(con, judge_id)
    assert per_cell(rows, ("ok",)) == {r.cell: 2 for r in plan.requests}
    assert per_cell(rows) == seen.paid_samples
    # candidate_count carried the samples: one request per cell when nothing failed
    assert seen.successes == plan.request_count + seen.malformed_responses


def test_verdicts_follow_the_planted_quality(con):
    with FakeLLMServer(QUALITY, seed=3) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=3)
        # no faults and a generous timeout: every cell gets exactly its first three draws
        runner = run(
            con,
            f"{judge_id}@{server.openai_base_url}",
            plan,
            inputs,
            retry=RetryPolicy(attempts=3, initial_wait_s=0.01, max_wait_s=0.05, timeout_s=30),
        )
    assert runner.stats.retries == 0
    means = dict(
        con.execute(
            "SELECT model_a || '>' || model_b, avg(score) FROM judgments WHERE status = 'ok' GROUP BY ALL"
        ).fetchall()
    )
    models = list(QUALITY)
    for i, better in enumerate(models):
        for worse in models[i + 1 :]:
            # the decoy label comes first in every output: reading the first label would invert these
            assert means[f"{better}>{worse}"] > 0.3 and means[f"{worse}>{better}"] < -0.3


def test_refused_multi_sample_falls_back_to_one_request_per_sample(con):
    with FakeLLMServer(QUALITY, multi_sample="reject") as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=3, prompts=2)
        runner = run(con, f"{judge_id}@{server.openai_base_url}", plan, inputs, limits=RunLimits(concurrency=2))
        seen = server.snapshot()
    # at most the requests already in flight when the first refusal came back (concurrency 2)
    assert 1 <= runner.stats.multi_sample_refusals == seen.multi_sample_rejections <= 2
    assert seen.requests == seen.multi_sample_rejections + plan.samples
    assert per_cell(stored(con, judge_id)) == seen.paid_samples == {r.cell: 3 for r in plan.requests}


def test_ignored_n_is_detected_and_nothing_is_paid_twice(con):
    with FakeLLMServer(QUALITY, multi_sample="ignore") as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=3, prompts=2)
        runner = run(con, f"{judge_id}@{server.openai_base_url}", plan, inputs, limits=RunLimits(concurrency=1))
        seen = server.snapshot()
    assert not runner.multi_sample
    assert seen.requests == plan.samples  # each answered request returned exactly one billable sample
    assert per_cell(stored(con, judge_id)) == seen.paid_samples == {r.cell: 3 for r in plan.requests}


@pytest.mark.parametrize("kind, floor, ceiling", [("429", 0.8, 3.0), ("500", 0.0, 0.5)])
def test_retry_after_is_honoured(con, kind, floor, ceiling):
    with FakeLLMServer(QUALITY, fault_first=1, fault_kinds=(kind,), retry_after_s=0.8, record_times=True) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=1, prompts=1, models=["m1", "m2"])
        run(con, f"{judge_id}@{server.openai_base_url}", plan, inputs, limits=RunLimits(concurrency=1))
        times = server.snapshot().request_times
    assert len(times) == plan.request_count + 1
    assert floor <= times[1] - times[0] < ceiling  # 429 carries Retry-After 0.8 s; 500 none (backoff 0.01 s)


@pytest.mark.parametrize("asked, cap, floor, ceiling", [(30.0, 0.5, 0.5, 3.0), (5.0, 5.0, 5.0, 8.0)])
def test_a_long_retry_after_is_capped_and_announced(con, capsys, asked, cap, floor, ceiling):
    with FakeLLMServer(QUALITY, fault_first=1, fault_kinds=("429",), retry_after_s=asked, record_times=True) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=1, prompts=1, models=["m1", "m2"])
        retry = RetryPolicy(attempts=3, initial_wait_s=0.0, max_wait_s=0.0, max_retry_after_s=cap, timeout_s=5.0)
        run(con, f"{judge_id}@{server.openai_base_url}", plan, inputs, retry=retry, limits=RunLimits(concurrency=1))
        times = server.snapshot().request_times
    assert floor <= times[1] - times[0] < ceiling  # the server asked for `asked` s; the cap holds
    shown = capsys.readouterr().err
    if cap >= 5.0:  # a wait of 5 s or more is announced, with the time it ends
        assert "eqarena: HTTP 429: waiting 5 s (the cap, --max-retry-after) before retrying, until " in shown
    else:
        assert "waiting" not in shown


def test_exhausted_retries_store_errors_that_are_planned_again(con):
    with FakeLLMServer(QUALITY, fault_rate=1.0, fault_kinds=("500",)) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=1, prompts=1)
        runner = run(
            con,
            f"{judge_id}@{server.openai_base_url}",
            plan,
            inputs,
            retry=RetryPolicy(attempts=3, initial_wait_s=0.0, max_wait_s=0.0, timeout_s=1.0),
        )
        assert server.snapshot().requests == 3 * plan.request_count
        rows = stored(con, judge_id)
        assert runner.stats.errors == len(rows) == plan.samples and {r[4] for r in rows} == {"error"}
        message = con.execute("SELECT any_value(error) FROM judgments").fetchone()[0]
        assert message.startswith("InternalServerError (HTTP 500)")
        again, _ = plan_for(con, judge_id, samples=1, prompts=1)
        assert again.samples == plan.samples and all(r.sample_indices == (1,) for r in again.requests)
        server.configure(fault_rate=0.0)
        run(con, f"{judge_id}@{server.openai_base_url}", again, inputs)
    assert per_cell(stored(con, judge_id), ("ok",)) == {r.cell: 1 for r in plan.requests}


def test_rejected_key_stops_the_run_without_rows_or_leaks(con, monkeypatch, db_path):
    secret = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with FakeLLMServer(QUALITY, require_key="the-right-key") as server:
        plan, inputs = plan_for(con, "openai:gpt-4o-mini")
        with pytest.raises(FatalProviderError) as err:
            run(con, f"openai:gpt-4o-mini@{server.openai_base_url}", plan, inputs, limits=RunLimits(concurrency=4))
        requests = server.snapshot().requests
    assert "HTTP 401" in str(err.value) and secret not in str(err.value) and "***" in str(err.value)
    assert requests <= 4  # the in-flight ones; nothing new started after the refusal
    assert con.execute("SELECT count(*) FROM judgments").fetchone()[0] == 0
    con.close()
    assert secret.encode() not in db_path.read_bytes()


def test_max_calls_stops_cleanly(con):
    with FakeLLMServer(QUALITY) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=1, multi=False)
        runner = run(
            con, f"{judge_id}@{server.openai_base_url}", plan, inputs, budget=Budget(max_samples=10), multi=False
        )
        assert server.snapshot().requests == 10
    assert len(stored(con, judge_id)) == 10
    assert runner.budget.exhausted_by == "max-calls"
    assert runner.stats.skipped_samples == plan.samples - 10
    left, _ = plan_for(con, judge_id, samples=1, multi=False)
    assert left.samples == plan.samples - 10


@pytest.mark.parametrize("limit", ["rpm", "tpm"])
def test_rate_limits_space_the_requests(con, limit):
    with FakeLLMServer(QUALITY, record_times=True) as server:
        judge_id = "openai-compatible:judge"
        plan, inputs = plan_for(con, judge_id, samples=1, prompts=2, multi=False)  # 24 single-sample requests
        tokens = max(r.tokens_in for r in plan.requests) + TEMPLATE.expected_output_tokens
        # Both: one second's worth (10 of the largest requests) at once, then one request per 0.1 s.
        limits = (
            RunLimits(concurrency=24, rpm=600)
            if limit == "rpm"
            else RunLimits(concurrency=24, tpm=tokens * 600, tpm_burst_s=1.0)
        )
        started = time.monotonic()
        run(con, f"{judge_id}@{server.openai_base_url}", plan, inputs, limits=limits, multi=False)
        times = sorted(server.snapshot().request_times)
    burst = 10
    assert len(times) == 24
    # no request can arrive before the bucket lets it go: the last one after (24 - burst) drips
    assert times[-1] - started >= (24 - burst) * 0.1 - 0.01


def test_the_bar_counts_down_to_the_latest_long_retry():
    out = io.StringIO()
    with JudgeProgress(4, console=Console(file=out, force_terminal=True, width=160)) as bar:
        bar.waiting(90.0, "HTTP 429", cap_s=300.0)
        bar.waiting(30.0, "HTTP 429", cap_s=300.0)  # ends before the running wait: nothing new
        task = bar._progress.tasks[0]
        assert str(WaitColumn().render(task)) in ("retry in 1:30 (HTTP 429)", "retry in 1:29 (HTTP 429)")
        task.fields["wait_until"] = time.monotonic() - 1.0
        assert str(WaitColumn().render(task)) == ""
    assert out.getvalue().count("eqarena: HTTP 429: waiting 90 s before retrying, until ") == 1
