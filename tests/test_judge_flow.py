"""The judge flow and `eqarena judge` end to end against the local fake server: the plan equals the calls
made, position bias cancels in u_king, caps stop cleanly and say what is left, re-runs pay nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fake_llm_server import FakeLLMServer, plant_dataset
from judging import judge_options
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.flows import judge_flow
from eqarena.options import RunnerOptions
from eqarena.tasks.judge_plan import plan_judge_run
from eqarena.warehouse.tensor import assemble_tensor

QUALITY = {"m1": 0.9, "m2": 0.3, "m3": -0.3, "m4": -0.9}


@pytest.fixture
def toy_db(db_path):
    con = warehouse.connect(db_path)
    plant_dataset(con, "toy", [str(p) for p in range(1, 6)], list(QUALITY))
    con.close()
    return db_path


def judgments(db_path, judge):
    con = warehouse.connect(db_path)
    try:
        return con.execute(
            "SELECT prompt_id, model_a, model_b, sample_index, status, score FROM judgments WHERE judge = ?", [judge]
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("multi", [True, False], ids=["multi-sample", "single-sample"])
def test_plan_equals_the_calls_made_and_a_rerun_pays_nothing(prefect_harness, toy_db, multi):
    with FakeLLMServer(QUALITY) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        options = judge_options(spec, multi_sample=multi)
        planned = plan_judge_run(options, str(toy_db))
        assert server.snapshot().requests == 0
        assert planned.plan.calls == 5 * 6 * 2 * 4 and planned.run_id is None
        done = judge_flow(options, str(toy_db), progress=False)
        seen = server.snapshot()
        assert seen.requests == planned.plan.requests == (60 if multi else 240)
        assert sum(seen.paid_samples.values()) == planned.plan.calls
        again = judge_flow(options, str(toy_db), progress=False)
        assert server.snapshot().requests == seen.requests
    rows = judgments(toy_db, "openai-compatible:judge")
    assert len(rows) == planned.plan.calls and {r[4] for r in rows} == {"ok"}
    assert done.left.calls == 0 and done.stopped_by is None and done.message.startswith("done")
    assert again.run_id is None and "nothing to do" in again.message
    con = warehouse.connect(toy_db)
    run = con.execute("SELECT kind, status, parameters FROM runs WHERE run_id = ?", [done.run_id]).fetchone()
    assert run[:2] == ("judge", "ok") and json.loads(run[2])["samples_per_order"] == 4
    assert {r[0] for r in con.execute("SELECT DISTINCT run_id FROM judgments").fetchall()} == {done.run_id}


def test_a_judge_always_preferring_position_a_gives_zero_u_king(prefect_harness, toy_db):
    with FakeLLMServer(QUALITY, always_a=True) as server:
        judge_flow(
            judge_options(f"openai-compatible:biased@{server.openai_base_url}", samples_per_order=2),
            str(toy_db),
            progress=False,
        )
    rows = judgments(toy_db, "openai-compatible:biased")
    assert {r[5] for r in rows} == {1.0}  # raw: A always wins clearly
    con = warehouse.connect(toy_db)
    tensor = assemble_tensor(con, "toy", ["openai-compatible:biased"])
    assert tensor.complete and tensor.shape == (5, 4, 4)
    np.testing.assert_array_equal(tensor.u_king, 0.0)  # balanced over both orders


def test_three_class_template_recovers_the_planted_order(prefect_harness, toy_db):
    with FakeLLMServer(QUALITY, seed=5) as server:
        out = judge_flow(
            judge_options(
                f"openai-compatible:judge@{server.openai_base_url}",
                template="pairwise3",
                samples_per_order=2,
                multi_sample=True,
            ),
            str(toy_db),
            progress=False,
        )
    assert out.plan.template == "pairwise3"
    con = warehouse.connect(toy_db)
    assert {r[0] for r in con.execute("SELECT DISTINCT score FROM judgments").fetchall()} <= {-1.0, 0.0, 1.0}
    tensor = assemble_tensor(con, "toy", ["openai-compatible:judge"], template_hash=out.plan.template_hash)
    strength = tensor.u_king.mean(axis=(0, 2))  # mean payoff of each model as king
    assert list(np.argsort(-strength)) == [tensor.models.index(m) for m in QUALITY]


def test_cli_plan_json_then_max_cost_stop_and_resume(prefect_harness, toy_db, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[openai-compatible."judge"]\ninput = 100.0\noutput = 200.0\n')
    cli = CliRunner()
    with FakeLLMServer(QUALITY) as server:
        base = [
            "judge",
            "--judge",
            f"openai-compatible:judge@{server.openai_base_url}",
            "--dataset",
            "toy",
            "--db",
            str(toy_db),
            "--prompts",
            "2",
            "--models",
            "m1,m2,m3",
            "--samples-per-order",
            "2",
            "--prices",
            str(prices),
            "--retry-wait",
            "0.01",
            "--timeout",
            "1",
        ]
        shown = cli.invoke(app, [*base, "--plan", "--json"])
        assert shown.exit_code == 0, shown.output
        plan = json.loads(shown.output)
        assert (plan["calls"], plan["requests"], plan["prompts"], plan["models"]) == (24, 24, 2, ["m1", "m2", "m3"])
        per_call = plan["cost_usd"] / plan["calls"]
        cap = 4.5 * per_call
        stopped = cli.invoke(app, [*base, "--max-cost", f"{cap:.8f}", "--concurrency", "1"])
        assert stopped.exit_code == 0, stopped.output
        assert "stopped at the --max-cost cap" in stopped.output and "run the same command again" in stopped.output
        made = server.snapshot().requests
        assert 4 <= made < 24  # the cap admits 4 calls at the estimated price, more at the real one
        left = int(stopped.output.split("left: ")[1].split(" calls")[0])
        assert left == 24 - made
        finished = cli.invoke(app, [*base, "--json"])
        outcome = json.loads(finished.output)
        assert outcome["left"]["calls"] == 0 and outcome["stats"]["samples"] == left
        assert server.snapshot().requests == 24
    con = warehouse.connect(toy_db)
    cost_by_run = dict(
        con.execute(
            "SELECT run_id, sum(tokens_in) * 100e-6 + sum(tokens_out) * 200e-6 FROM judgments GROUP BY run_id"
        ).fetchall()
    )
    assert cost_by_run[outcome["run_id"]] == pytest.approx(outcome["spent_usd"])  # spend = the usage's price
    (capped_run_cost,) = [c for run, c in cost_by_run.items() if run != outcome["run_id"]]
    assert capped_run_cost <= cap


def test_cli_errors_are_one_line(prefect_harness, toy_db):
    cli = CliRunner()
    result = cli.invoke(
        app, ["judge", "--judge", "openai-compatible:j@http://127.0.0.1:9/v1", "--dataset", "nope", "--db", str(toy_db)]
    )
    assert result.exit_code == 1
    assert result.output.strip() == (
        "error: dataset 'nope' has no prompts in the warehouse (datasets: toy); "
        "run `eqarena ingest --dataset nope` first"
    )
    result = cli.invoke(app, ["judge", "--judge", "mystery", "--db", str(toy_db)])
    assert result.exit_code == 1 and result.output.startswith("error: --judge 'mystery': expected openai:MODEL")
    result = cli.invoke(
        app, ["judge", "--judge", "openai:unlisted-model", "--dataset", "toy", "--db", str(toy_db), "--max-cost", "1"]
    )
    assert result.exit_code == 1 and "no price for openai:unlisted-model" in result.output


def test_batch_mode_judges_everything_at_batch_price_and_reasks_unparsed(prefect_harness, toy_db, tmp_path):
    prices = tmp_path / "prices.toml"
    prices.write_text('[openai-compatible."judge"]\ninput = 1.0\noutput = 2.0\n')
    with FakeLLMServer(QUALITY, malformed_rate=0.1, seed=7) as server:
        spec = f"openai-compatible:judge@{server.openai_base_url}"
        common = dict(samples_per_order=2, multi_sample=True, max_unparsed=10, prices=str(prices))
        live_plan = plan_judge_run(judge_options(spec, **common), str(toy_db)).plan
        batch = RunnerOptions(batch=True, batch_poll_s=0.02)
        out = judge_flow(judge_options(spec, runner=batch, **common), str(toy_db), progress=False)
        seen = server.snapshot()
    assert out.plan.cost_usd == pytest.approx(0.5 * live_plan.cost_usd)
    # later batches (rounds) re-ask the unparseable samples of the earlier ones
    assert seen.requests == 0 and 2 <= seen.batch_creates == len(out.batch_jobs) <= 3
    assert out.left.calls == 0
    rows = judgments(toy_db, "openai-compatible:judge")
    ok = {}
    for p, a, b, _, status, _ in rows:
        ok[(p, a, b)] = ok.get((p, a, b), 0) + (status == "ok")
    assert set(ok.values()) == {2} and len(ok) == 5 * 12
    assert sum(r[4] == "unparsed" for r in rows) == seen.malformed_samples > 0
    assert len(rows) == sum(seen.paid_samples.values())
    con = warehouse.connect(toy_db)
    usage = con.execute("SELECT sum(tokens_in) * 0.5e-6 + sum(tokens_out) * 1e-6 FROM judgments").fetchone()[0]
    assert out.spent_usd == pytest.approx(usage)
    assert {r[0] for r in con.execute("SELECT status FROM judge_batches").fetchall()} == {"imported"}


def test_batch_mode_needs_an_openai_style_judge(prefect_harness, toy_db):
    result = CliRunner().invoke(
        app, ["judge", "--judge", "gemini:gemini-2.0-flash", "--dataset", "toy", "--batch", "--db", str(toy_db)]
    )
    assert result.exit_code == 1
    assert result.output.startswith(
        "error: --batch uses the OpenAI Batch API: it needs an openai: or "
        "openai-compatible: judge, not gemini:gemini-2.0-flash"
    )
