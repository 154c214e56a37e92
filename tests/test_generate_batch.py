"""`eqarena generate --batch`: the prompts go to one OpenAI Batch API job (the real openai SDK over HTTP
against the fake server's Batch API), the answers are stored as live ones are, a re-run sends nothing,
a run killed after submitting is collected by the next run (batch or live) without a second batch, the
plan counts the job's prompts as pending, and a gemini model is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import query
from fake_llm_server import FakeLLMServer, plant_dataset, planted_prompt, planted_response
from test_generate import REPO_ROOT, TOY_PROMPTS, cli, stored_answers

from eqarena import warehouse
from eqarena.generation.plan import answer_messages
from eqarena.llm.pricing import estimate_message_tokens

BATCH = ("--batch", "--batch-poll", "0.02")


@pytest.fixture
def toy_db(db_path):
    con = warehouse.connect(db_path)
    plant_dataset(con, "toy", TOY_PROMPTS, ["m1", "m2"])
    con.close()
    return db_path


def test_batch_stores_every_answer_once_and_a_rerun_sends_nothing(prefect_harness, toy_db):
    with FakeLLMServer(empty_rate=0.3, seed=11) as server:
        generate = [
            "generate",
            "--model",
            f"openai-compatible:new-3@{server.openai_base_url}",
            "--db",
            toy_db,
            *BATCH,
            "--json",
        ]
        first = cli(*generate)
        assert first.exit_code == 0, first.output + first.stderr
        outcome = json.loads(first.stdout)
        seen = server.snapshot()
        assert seen.batch_creates == 1 and seen.generation_requests == 0  # one batch, no live request
        assert seen.paid_answers == {("new-3", p): 1 for p in TOY_PROMPTS}
        answers = stored_answers(toy_db, "new-3")
        # An empty answer is counted as failed and not stored: the next run asks again.
        stats = outcome["stats"]
        assert stats["ok"] == len(answers) == len(TOY_PROMPTS) - seen.empty_answers
        assert stats["failed"] == seen.empty_answers == stats["failures"].get("empty answer", 0)
        assert stats["requests"] == len(TOY_PROMPTS) and outcome["left"]["calls"] == seen.empty_answers
        for p, (text, generator, generation, tokens_in, tokens_out, run_id) in answers.items():
            assert text == planted_response("new-3", p) and generator == "openai-compatible:new-3"
            assert json.loads(generation) == {"max_tokens": 4096, "temperature": None}
            assert (tokens_in, tokens_out) == seen.answer_usage["new-3", p] and tokens_out > 0
            assert run_id == outcome["run_id"]
        assert query(toy_db, "SELECT status FROM generate_batches") == [("imported",)]

        runs = 1
        while len(stored_answers(toy_db, "new-3")) < len(TOY_PROMPTS):
            missing = len(TOY_PROMPTS) - len(stored_answers(toy_db, "new-3"))
            before = server.snapshot()
            again = cli(*generate)
            assert again.exit_code == 0, again.output + again.stderr
            assert sum(server.snapshot().paid_answers.values()) - sum(before.paid_answers.values()) == missing
            runs += 1
            assert runs < 20
        done = server.snapshot()
        for extra in ([], ["--batch"]):  # nothing left: neither a live nor a batch run sends anything
            rerun = cli(
                "generate",
                "--model",
                f"openai-compatible:new-3@{server.openai_base_url}",
                "--db",
                toy_db,
                *extra,
                "--json",
            )
            assert rerun.exit_code == 0 and json.loads(rerun.stdout)["run_id"] is None
        after = server.snapshot()
    assert (after.batch_creates, after.generation_requests) == (done.batch_creates, 0)
    assert sum(after.paid_answers.values()) == len(TOY_PROMPTS) + after.empty_answers
    assert set(stored_answers(toy_db, "new-3")) == set(TOY_PROMPTS)


@pytest.mark.parametrize("collector", [["--batch"], []], ids=["batch-rerun", "live-rerun"])
def test_killed_after_submitting_is_collected_without_a_second_batch(prefect_harness, toy_db, tmp_path, collector):
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    prices = tmp_path / "prices.toml"
    prices.write_text('[openai-compatible."new-3"]\ninput = 1.0\noutput = 2.0\n')
    with FakeLLMServer() as server:
        server.configure(batch_hold=True)  # the provider keeps the batch in progress
        spec = f"openai-compatible:new-3@{server.openai_base_url}"
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "eqarena.cli",
                "generate",
                "--model",
                spec,
                "--db",
                str(toy_db),
                "--batch",
                "--batch-poll",
                "0.05",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 180
        while server.snapshot().batch_retrievals < 2:  # created, recorded, being polled
            assert child.poll() is None, child.stdout.read().decode()
            assert time.monotonic() < deadline, "the generate subprocess never submitted its batch"
            time.sleep(0.05)
        child.kill()  # SIGKILL: no cleanup of any kind
        child.wait()
        assert server.snapshot().batch_creates == 1 and not server.snapshot().paid_answers
        ((job_id, status),) = query(toy_db, "SELECT job_id, status FROM generate_batches")
        assert status == "submitted"

        # The job's prompts are pending, not missing: the plan asks for nothing.
        shown = cli("generate", "--model", spec, "--db", toy_db, "--batch", "--prices", prices, "--plan", "--json")
        assert shown.exit_code == 0, shown.output + shown.stderr
        plan = json.loads(shown.stdout)
        assert (plan["pending"], plan["calls"], plan["answered"], plan["batch"]) == (len(TOY_PROMPTS), 0, 0, True)
        text = cli("generate", "--model", spec, "--db", toy_db, "--plan")
        assert text.stdout.splitlines()[0] == (
            f"new-3 (openai-compatible:new-3) on toy: 0 of {len(TOY_PROMPTS)} "
            f"prompts answered, {len(TOY_PROMPTS)} pending in open batch jobs"
        )

        server.configure(batch_hold=False)
        rerun = cli("generate", "--model", spec, "--db", toy_db, "--batch-poll", "0.02", *collector, "--json")
        assert rerun.exit_code == 0, rerun.output + rerun.stderr
        outcome = json.loads(rerun.stdout)
        seen = server.snapshot()
    assert seen.batch_creates == 1 and seen.generation_requests == 0  # collected, not asked again
    assert seen.paid_answers == {("new-3", p): 1 for p in TOY_PROMPTS}
    assert outcome["stats"]["ok"] == len(TOY_PROMPTS) and outcome["left"]["calls"] == 0
    assert set(stored_answers(toy_db, "new-3")) == set(TOY_PROMPTS)
    assert query(toy_db, "SELECT job_id, status FROM generate_batches") == [(job_id, "imported")]
    statuses = dict(query(toy_db, "SELECT status, count(*) FROM runs WHERE kind = 'generate' GROUP BY status"))
    assert statuses == {"abandoned": 1, "ok": 1}


def test_batch_caps_and_plan_at_the_batch_price(prefect_harness, toy_db, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[openai-compatible."new-3"]\ninput = 1.0\noutput = 2.0\n')
    with FakeLLMServer() as server:
        base = [
            "generate",
            "--model",
            f"openai-compatible:new-3@{server.openai_base_url}",
            "--db",
            toy_db,
            "--max-tokens",
            "100",
            "--prices",
            prices,
        ]
        live = json.loads(cli(*base, "--plan", "--json").stdout)
        batch = json.loads(cli(*base, "--batch", "--plan", "--json").stdout)
        tokens_in = sum(estimate_message_tokens(answer_messages(planted_prompt(p))) for p in TOY_PROMPTS)
        assert batch["cost_usd"] == pytest.approx(live["cost_usd"] / 2)
        assert batch["cost_usd"] == pytest.approx((tokens_in + 200 * len(TOY_PROMPTS)) / 2e6)
        capped = cli(*base, *BATCH, "--max-calls", "3", "--json")
        assert capped.exit_code == 0, capped.output + capped.stderr
        outcome = json.loads(capped.stdout)
        seen = server.snapshot()
    assert seen.batch_creates == 1 and len(seen.paid_answers) == 3  # only what the cap allows is submitted
    assert outcome["stopped_by"] == "max-calls" and outcome["stats"]["skipped"] == len(TOY_PROMPTS) - 3
    usage = query(
        toy_db,
        "SELECT sum(tokens_in) * 1e-6 + sum(tokens_out) * 2e-6 FROM responses WHERE run_id = ?",
        [outcome["run_id"]],
    )[0][0]
    assert outcome["spent_usd"] == pytest.approx(usage / 2)  # billed at the batch price


def test_batch_with_a_gemini_model_is_one_line_and_writes_nothing(prefect_harness, toy_db, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-key")
    before = query(toy_db, "SELECT count(*) FROM responses")
    result = cli("generate", "--model", "gemini:gemini-2.0-flash", "--dataset", "toy", "--batch", "--db", toy_db)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip() == (
        "error: --batch uses the OpenAI Batch API: it needs an openai: or "
        "openai-compatible: model, not gemini:gemini-2.0-flash"
    )
    assert query(toy_db, "SELECT count(*) FROM responses") == before
    assert query(toy_db, "SELECT count(*) FROM runs") == [(0,)]
    assert query(toy_db, "SELECT count(*) FROM generate_batches") == [(0,)]
