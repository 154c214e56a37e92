"""`eqarena generate`, then `eqarena refresh`: a new model's answers asked from a provider (the real openai
and google-genai SDKs over HTTP against the fake server on 127.0.0.1, with injected faults), stored once
each with their usage; a re-run, after a cap, a kill or failures, asks only for what is missing; refresh
then judges only the cells involving the new model and rates it. Also the plan, one-line errors, and a
real local LLM (SmolLM2-135M on llama.cpp) answering."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import query
from fake_llm_server import FakeLLMServer, plant_dataset, planted_prompt, planted_response
from test_refresh import PROMPTS, arena_dir
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.generation.plan import answer_messages
from eqarena.llm.pricing import estimate_message_tokens

REPO_ROOT = Path(__file__).resolve().parents[1]
QUALITY = {"strong-1": 2.0, "late-4": 1.0, "middle-2": 0.0, "weak-3": -2.0}  # late-4 is generated
OLD_MODELS = ["strong-1", "middle-2", "weak-3"]
TOY_PROMPTS = [str(p) for p in range(1, 9)]
FAST = ("--retry-wait", "0.01", "--timeout", "0.5")


def cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def stored_answers(db, model: str) -> dict[str, tuple]:
    """prompt_id -> (text, generator, generation, tokens_in, tokens_out, run_id) of a model's answers."""
    rows = query(
        db,
        "SELECT prompt_id, text, generator, generation, tokens_in, tokens_out, run_id FROM responses "
        "WHERE model_id = ?",
        [model],
    )
    assert len(rows) == len({r[0] for r in rows})
    return {r[0]: r[1:] for r in rows}


@pytest.fixture
def toy_db(db_path):
    con = warehouse.connect(db_path)
    plant_dataset(con, "toy", TOY_PROMPTS, ["m1", "m2"])
    con.close()
    return db_path


def test_generate_with_faults_then_refresh_judges_and_rates_only_the_new_model(prefect_harness, tmp_path):
    data = arena_dir(tmp_path / "arena", OLD_MODELS)
    db, out = tmp_path / "w.duckdb", tmp_path / "out"
    with (
        FakeLLMServer(QUALITY, noise=0.1, seed=3) as judge_server,
        FakeLLMServer(fault_first=4, fault_rate=0.2, stall_s=1.0, seed=5) as model_server,
    ):
        refresh = [
            "refresh",
            "--dataset",
            data,
            "--judge",
            f"openai-compatible:judge-model@{judge_server.openai_base_url}",
            "--samples-per-order",
            "1",
            "--methods",
            "bt,ne",
            "--bootstrap",
            "20",
            "--analyses",
            "none",
            "--db",
            db,
            "--out",
            out,
        ]
        first = cli(*refresh)
        assert first.exit_code == 0, first.output + first.stderr
        before = judge_server.snapshot().paid_samples
        assert sum(before.values()) == len(PROMPTS) * 3 * 2

        generate = [
            "generate",
            "--model",
            f"openai-compatible:late-4@{model_server.openai_base_url}",
            "--dataset",
            "arena",
            "--db",
            db,
            "--json",
            *FAST,
        ]
        made = cli(*generate)
        assert made.exit_code == 0, made.output + made.stderr
        outcome = json.loads(made.stdout)
        seen = model_server.snapshot()
        # Each injected fault (429, 500, a stall past the timeout, a reset) cost one retry, nothing else.
        assert set(seen.faults) == {"429", "500", "stall", "reset"}
        assert outcome["stats"]["retries"] == seen.injected_faults
        assert outcome["stats"]["requests"] == seen.generation_requests == len(PROMPTS) + seen.injected_faults
        assert (outcome["stats"]["ok"], outcome["stats"]["failed"], outcome["left"]["calls"]) == (len(PROMPTS), 0, 0)
        assert seen.paid_answers == {("late-4", p): 1 for p in PROMPTS} and not seen.paid_samples
        answers = stored_answers(db, "late-4")
        assert set(answers) == set(PROMPTS)
        for p, (text, generator, generation, tokens_in, tokens_out, run_id) in answers.items():
            assert text == planted_response("late-4", p) and generator == "openai-compatible:late-4"
            assert json.loads(generation) == {"max_tokens": 4096, "temperature": None}
            assert (tokens_in, tokens_out) == seen.answer_usage["late-4", p] and tokens_out > 0
            assert run_id == outcome["run_id"]
        assert sum(a[3] for a in answers.values()) == outcome["stats"]["tokens_in"]
        assert query(db, "SELECT family FROM models WHERE model_id = 'late-4'") == [("late",)]
        assert query(db, "SELECT kind, status FROM runs WHERE run_id = ?", [outcome["run_id"]]) == [("generate", "ok")]

        again = cli(*generate)
        assert again.exit_code == 0 and json.loads(again.stdout)["run_id"] is None
        assert model_server.snapshot().generation_requests == seen.generation_requests  # a no-op: 0 requests

        second = cli(*refresh)
        assert second.exit_code == 0, second.output + second.stderr
        new = judge_server.snapshot().paid_samples - before
    # The judge asked exactly the cells involving late-4, once each: every prompt x 3 rivals x both orders.
    assert new == {
        (p, *pair): 1 for p in PROMPTS for other in OLD_MODELS for pair in (("late-4", other), (other, "late-4"))
    }
    assert f"{len(new)} judge calls, new rate run" in second.output
    rate_runs = query(db, "SELECT run_id FROM runs WHERE kind = 'rate' ORDER BY started_at")
    assert len(rate_runs) == 2
    latest = rate_runs[-1][0]
    rows = query(
        db,
        "SELECT method, model_id, rank, ci_lo, ci_hi FROM latest_model_ratings WHERE run_id = ? ORDER BY method, rank",
        [latest],
    )
    bt = [model for method, model, *_ in rows if method == "bt"]
    assert bt == ["strong-1", "late-4", "middle-2", "weak-3"]  # its planted quality's place
    late = {method: (rank, lo, hi) for method, model, rank, lo, hi in rows if model == "late-4"}
    assert set(late) == {"bt", "ne"} and late["ne"][0] == 2
    assert all(lo is not None and hi is not None and lo <= hi for _, lo, hi in late.values())
    report = out / f"eqarena-{latest}.html"
    assert "late-4" in report.read_text()

    # Style control reads the generated answers' texts like any other.
    styled = cli("rate", "--dataset", "arena", "--methods", "bt", "--style-control", "--bootstrap", "0", "--db", db)
    assert styled.exit_code == 0, styled.output + styled.stderr
    assert query(db, "SELECT count(*) FROM latest_model_ratings WHERE method = 'bt-style' AND model_id = 'late-4'") == [
        (1,)
    ]


def test_a_cap_stops_cleanly_and_a_rerun_asks_only_the_rest(prefect_harness, toy_db):
    with FakeLLMServer(empty_rate=0.3, seed=11) as server:
        generate = [
            "generate",
            "--model",
            f"openai-compatible:new-3@{server.openai_base_url}",
            "--db",
            toy_db,
            "--concurrency",
            "1",
            *FAST,
        ]
        capped = cli(*generate, "--max-calls", "3")
        assert capped.exit_code == 0, capped.output + capped.stderr
        assert "stopped at the --max-calls cap" in capped.output and "run the same command again" in capped.output
        first = server.snapshot()
        assert first.generation_requests == 3
        held = stored_answers(toy_db, "new-3")
        assert len(held) == 3 - first.empty_answers  # an empty answer is a failure, not an answer
        assert f"left: {len(TOY_PROMPTS) - len(held)} prompts" in capped.output

        runs = 1
        while len(stored_answers(toy_db, "new-3")) < len(TOY_PROMPTS):
            asked = server.snapshot().generation_requests
            missing = len(TOY_PROMPTS) - len(stored_answers(toy_db, "new-3"))
            rerun = cli(*generate, "--json")
            assert rerun.exit_code == 0, rerun.output + rerun.stderr
            assert server.snapshot().generation_requests - asked == missing  # only what is missing is asked
            stats = json.loads(rerun.stdout)["stats"]
            assert stats["failed"] == stats["failures"].get("empty answer", 0)
            runs += 1
            assert runs < 20
        seen = server.snapshot()
    assert seen.empty_answers > 0
    # Every prompt paid once for the answer kept, plus once per empty answer asked again.
    assert sum(seen.paid_answers.values()) == len(TOY_PROMPTS) + seen.empty_answers
    assert set(stored_answers(toy_db, "new-3")) == set(TOY_PROMPTS)
    assert all(text.strip() for text, *_ in stored_answers(toy_db, "new-3").values())


def test_killed_mid_run_keeps_the_answers_and_a_rerun_pays_nothing_twice(prefect_harness, toy_db):
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    with FakeLLMServer(hold_after=3) as server:
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
                "--concurrency",
                "2",
                "--timeout",
                "60",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        # 3 answers given, both request slots wait at the gate: every answer given has been read. Killed at
        # once, within the write buffer's commit delay: the last answers are in its journal only.
        wait_until_both_slots_wait(server, child)
        child.kill()  # SIGKILL: no cleanup of any kind
        child.wait()
        paid = server.snapshot().paid_answers
        server.release(reject=True)  # the parked requests were never answered: not paid
        warehouse.connect(toy_db).close()  # the next writer, any command, commits what the journal kept
        assert set(stored_answers(toy_db, "new-3")) == {p for _, p in paid} and sum(paid.values()) == 3

        server.configure(hold_after=None)
        rerun = cli("generate", "--model", spec, "--db", toy_db, *FAST)
        assert rerun.exit_code == 0, rerun.output + rerun.stderr
        seen = server.snapshot()
    assert seen.paid_answers == {("new-3", p): 1 for p in TOY_PROMPTS}  # no prompt paid twice
    assert set(stored_answers(toy_db, "new-3")) == set(TOY_PROMPTS)
    statuses = dict(query(toy_db, "SELECT status, count(*) FROM runs WHERE kind = 'generate' GROUP BY status"))
    assert statuses == {"abandoned": 1, "ok": 1}  # the killed run is recognised as such


def start_generate(server: FakeLLMServer, db) -> subprocess.Popen:
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    spec = f"openai-compatible:new-3@{server.openai_base_url}"
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eqarena.cli",
            "generate",
            "--model",
            spec,
            "--db",
            str(db),
            "--concurrency",
            "2",
            "--timeout",
            "60",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def wait_until_both_slots_wait(server: FakeLLMServer, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 180
    while server.snapshot().parked < 2:
        assert child.poll() is None, child.stdout.read().decode()
        assert time.monotonic() < deadline, "the generate subprocess never got going"
        time.sleep(0.005)


def test_ctrl_c_mid_run_stores_the_answers_in_flight_and_a_rerun_pays_nothing_twice(prefect_harness, toy_db):
    with FakeLLMServer(hold_after=3) as server:
        child = start_generate(server, toy_db)
        wait_until_both_slots_wait(server, child)
        child.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert child.poll() is None, child.stdout.read().decode()  # waiting for the 2 answers in flight
        server.release()
        output = child.communicate(timeout=120)[0].decode()
        assert child.returncode == 130, output
        paid = server.snapshot().paid_answers
        assert sum(paid.values()) == 5  # 3 before the stop, the 2 in flight, nothing after
        assert set(stored_answers(toy_db, "new-3")) == {p for _, p in paid}

        server.configure(hold_after=None)
        rerun = cli("generate", "--model", f"openai-compatible:new-3@{server.openai_base_url}", "--db", toy_db, *FAST)
        assert rerun.exit_code == 0, rerun.output + rerun.stderr
        seen = server.snapshot()
    assert seen.paid_answers == {("new-3", p): 1 for p in TOY_PROMPTS}  # no prompt paid twice
    statuses = dict(query(toy_db, "SELECT status, count(*) FROM runs WHERE kind = 'generate' GROUP BY status"))
    assert statuses == {"interrupted": 1, "ok": 1}


def test_plan_numbers_and_json(prefect_harness, toy_db, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[openai-compatible."new-3"]\ninput = 1.0\noutput = 2.0\n')
    with FakeLLMServer() as server:
        base = [
            "generate",
            "--model",
            f"openai-compatible:new-3@{server.openai_base_url}",
            "--db",
            toy_db,
            "--prompts",
            "5",
            "--max-tokens",
            "100",
            "--prices",
            prices,
            *FAST,
        ]
        shown = cli(*base, "--plan", "--json")
        assert shown.exit_code == 0, shown.output
        plan = json.loads(shown.stdout)
        tokens_in = sum(estimate_message_tokens(answer_messages(planted_prompt(p))) for p in TOY_PROMPTS[:5])
        assert plan == {
            "model": "new-3",
            "generator": "openai-compatible:new-3",
            "dataset": "toy",
            "prompts": 5,
            "answered": 0,
            "pending": 0,
            "calls": 5,
            "unanswerable": 0,
            "tokens_in": tokens_in,
            "tokens_out": 500,
            "max_tokens": 100,
            "cost_usd": pytest.approx((tokens_in * 1.0 + 500 * 2.0) / 1e6),
            "batch": False,
        }
        assert cli(*base, "--max-calls", "2").exit_code == 0
        text = cli(*base, "--plan")
        assert text.exit_code == 0
        left_in = sum(estimate_message_tokens(answer_messages(planted_prompt(p))) for p in TOY_PROMPTS[2:5])
        assert text.stdout.splitlines() == [
            "new-3 (openai-compatible:new-3) on toy: 2 of 5 prompts answered",
            f"plan: 3 calls, ~{left_in} input + at most 300 output tokens (100 per answer), "
            f"${(left_in + 600) / 1e6:,.4f} at most",
        ]
        assert server.snapshot().generation_requests == 2  # plans send nothing
    # --max-cost reserves each answer at --max-tokens and settles it at its usage: it stops before the cap.
    cap = 2.5 * plan["cost_usd"] / 5
    with FakeLLMServer() as server:
        capped = cli(
            "generate",
            "--model",
            f"openai-compatible:new-3@{server.openai_base_url}",
            "--db",
            toy_db,
            "--max-tokens",
            "100",
            "--prices",
            prices,
            "--max-cost",
            f"{cap:.8f}",
            "--concurrency",
            "1",
            "--json",
            *FAST,
        )
        assert capped.exit_code == 0, capped.output + capped.stderr
        outcome = json.loads(capped.stdout)
        asked = server.snapshot().paid_answers
    assert outcome["stopped_by"] == "max-cost" and "stopped at the --max-cost cap" in outcome["message"]
    assert 2 <= len(asked) == outcome["stats"]["ok"] < len(TOY_PROMPTS) - 2
    usage = query(
        toy_db,
        "SELECT sum(tokens_in) * 1e-6 + sum(tokens_out) * 2e-6 FROM responses WHERE run_id = ?",
        [outcome["run_id"]],
    )[0][0]
    assert outcome["spent_usd"] == pytest.approx(usage) and usage <= cap


def test_a_refused_key_stops_the_run_in_one_line_without_the_key(prefect_harness, toy_db, monkeypatch):
    secret = "sk-test-SECRET-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with FakeLLMServer(require_key="the-right-key") as server:
        result = cli(
            "generate",
            "--model",
            f"openai:gpt-4o-mini@{server.openai_base_url}",
            "--dataset",
            "toy",
            "--db",
            toy_db,
            "--concurrency",
            "2",
            *FAST,
        )
        requests = server.snapshot().generation_requests
    assert result.exit_code == 1 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: model openai:gpt-4o-mini refused the request: AuthenticationError (HTTP 401)")
    assert secret not in result.output + result.stderr and "***" in line
    assert 1 <= requests <= 2  # the ones in flight; nothing new started after the refusal
    assert query(toy_db, "SELECT count(*) FROM responses WHERE model_id = 'gpt-4o-mini'") == [(0,)]
    ((status, message),) = query(toy_db, "SELECT status, message FROM runs WHERE kind = 'generate'")
    assert status == "failed" and "HTTP 401" in message
    assert secret.encode() not in toy_db.read_bytes()

    unreachable = cli(
        "generate",
        "--model",
        "openai-compatible:new-3@http://127.0.0.1:9/v1",
        "--dataset",
        "toy",
        "--db",
        toy_db,
        *FAST,
    )
    assert unreachable.exit_code == 1
    assert unreachable.stderr.strip() == "error: cannot reach the model at http://127.0.0.1:9/v1: connection refused"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--model", "openai-compatible:x@http://127.0.0.1:9/v1", "--dataset", "nope"],
            "error: dataset 'nope' has no prompts in the warehouse (datasets: toy); "
            "run `eqarena ingest --dataset nope` first",
        ),
        (
            ["--model", "mystery"],
            "error: --model 'mystery': expected openai:MODEL, gemini:MODEL or openai-compatible:MODEL@BASE_URL",
        ),
        (
            ["--model", "recorded:prd:gpt4"],
            "error: --model 'recorded:prd:gpt4': expected openai:MODEL, gemini:MODEL "
            "or openai-compatible:MODEL@BASE_URL",
        ),
        (
            ["--model", "openai-compatible:llama"],
            "error: --model 'openai-compatible:llama': an openai-compatible model needs the server, e.g. "
            "openai-compatible:llama@http://127.0.0.1:8000/v1",
        ),
        (["--model", "openai:gpt-4o"], "error: --model openai:gpt-4o: set OPENAI_API_KEY in the environment"),
        (
            ["--model", "openai-compatible:x@http://127.0.0.1:9/v1", "--as", "a,b"],
            "error: --as 'a,b': a model id must be non-empty, without a comma and without leading or trailing spaces",
        ),
        (
            ["--model", "openai:unlisted-model", "--max-cost", "1"],
            "error: --max-cost: no price for openai:unlisted-model",
        ),
    ],
    ids=["unknown-dataset", "bad-spec", "recorded", "no-url", "no-key", "bad-as", "no-price"],
)
def test_bad_input_is_one_line_and_writes_nothing(prefect_harness, toy_db, monkeypatch, args, message):
    if "unlisted" in message:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000")
    before = query(toy_db, "SELECT count(*) FROM responses")
    dataset = [] if "--dataset" in args else ["--dataset", "toy"]
    result = cli("generate", *args, *dataset, "--db", toy_db)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.strip().startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1
    assert query(toy_db, "SELECT count(*) FROM responses") == before
    assert query(toy_db, "SELECT count(*) FROM runs") == [(0,)]


def test_a_gemini_model_answers_through_generate_content(prefect_harness, toy_db, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-test-key")
    with FakeLLMServer(require_key="gemini-test-key", fault_first=2, seed=2) as server:
        result = cli(
            "generate",
            "--model",
            f"gemini:gemini-test@{server.url}",
            "--as",
            "gem-1",
            "--db",
            toy_db,
            "--prompts",
            "3",
            "--temperature",
            "0.5",
            "--max-tokens",
            "64",
            "--json",
            *FAST,
        )
        seen = server.snapshot()
    assert result.exit_code == 0, result.output + result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["stats"]["retries"] == 2 and outcome["stats"]["ok"] == 3
    assert seen.paid_answers == {("gemini-test", p): 1 for p in TOY_PROMPTS[:3]}
    answers = stored_answers(toy_db, "gem-1")
    assert set(answers) == set(TOY_PROMPTS[:3])
    for p, (text, generator, generation, tokens_in, tokens_out, _) in answers.items():
        assert text == planted_response("gemini-test", p) and generator == "gemini:gemini-test"
        assert json.loads(generation) == {"max_tokens": 64, "temperature": 0.5}
        assert (tokens_in, tokens_out) == seen.answer_usage["gemini-test", p]


@pytest.mark.local_llm
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_a_real_local_llm_answers(prefect_harness, tmp_path):
    from local_llm import serve_local_llm

    db = tmp_path / "w.duckdb"
    assert cli("ingest", "--dataset", "vicuna80", "--db", db).exit_code == 0
    with serve_local_llm(tmp_path / "server.log") as server:
        start = server.metrics()
        result = cli(
            "generate",
            "--model",
            f"openai-compatible:{server.model}@{server.base_url}",
            "--dataset",
            "vicuna80",
            "--prompts",
            "3",
            "--max-tokens",
            "16",
            "--concurrency",
            "1",
            "--timeout",
            "600",
            "--db",
            db,
            "--json",
        )
        end = server.metrics()
    assert result.exit_code == 0, result.output + result.stderr
    outcome = json.loads(result.stdout)
    answers = stored_answers(db, server.model)
    assert set(answers) == {"1", "2", "3"} and outcome["stats"]["ok"] == 3
    for text, generator, _, tokens_in, tokens_out, _ in answers.values():
        assert text.strip() and generator == f"openai-compatible:{server.model}"
        assert tokens_in > 0 and 0 < tokens_out <= 16
    assert sum(a[4] for a in answers.values()) == end["tokens_predicted_total"] - start["tokens_predicted_total"]
