"""`eqarena refresh`: incremental (a second refresh makes 0 judge calls and no rate run; a new model's
answers are judged alone), and safe when two refreshes hit one warehouse at once (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import query

from tests.fake_llm_server import FakeLLMServer, planted_prompt, planted_response
from tests.ingest_inputs import write_jsonl

QUALITY = {"strong-1": 2.0, "middle-2": 0.0, "weak-3": -2.0, "late-4": 1.0}
PROMPTS = [f"q{k}" for k in range(4)]
EQARENA = Path(sys.executable).with_name("eqarena")


def add_answers(root: Path, model: str) -> None:
    write_jsonl(
        root / "model_answer" / f"{model}.jsonl",
        [
            {
                "uid": p,
                "ans_id": f"{model}-{p}",
                "model": model,
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "assistant", "content": {"answer": planted_response(model, p)}},
                ],
            }
            for p in PROMPTS
        ],
    )


def arena_dir(root: Path, models: list[str]) -> Path:
    (root / "model_answer").mkdir(parents=True)
    write_jsonl(
        root / "question.jsonl",
        [{"uid": p, "category": "test", "cluster": "t", "prompt": planted_prompt(p)} for p in PROMPTS],
    )
    for model in models:
        add_answers(root, model)
    return root


def test_refresh_judges_only_what_is_new(prefect_harness, tmp_path):
    from eqarena.flows import refresh_flow
    from eqarena.options import AnalysesOptions, BootstrapOptions, MainJobOptions, RateOptions

    data = arena_dir(tmp_path / "arena", ["strong-1", "middle-2", "weak-3"])
    db, out = str(tmp_path / "w.duckdb"), str(tmp_path / "out")
    with FakeLLMServer(QUALITY, noise=0.1, seed=3) as server:
        spec = f"openai-compatible:judge-model@{server.openai_base_url}"
        options = MainJobOptions(
            source=str(data),
            judge=spec,
            out_dir=out,
            samples_per_order=1,
            rate=RateOptions(methods=("bt", "ne"), bootstrap=BootstrapOptions(replicates=10)),
            analyses=AnalysesOptions(run=()),
        )
        first = refresh_flow(options, db)
        calls = sum(server.counters.paid_samples.values())
        assert calls == len(PROMPTS) * 3 * 2 and first.new_rate_run and first.report_path.is_file()

        second = refresh_flow(options, db)
        assert sum(server.counters.paid_samples.values()) == calls  # 0 judge calls
        assert second.unchanged and second.rate_run_id == first.rate_run_id
        assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'")[0][0] == 1  # no new rate run
        assert second.line().startswith("refresh: nothing new; 0 judge calls, no new rate run")

        add_answers(data, "late-4")
        third = refresh_flow(options, db)
        new_calls = sum(server.counters.paid_samples.values()) - calls
        assert new_calls == len(PROMPTS) * 3 * 2  # late-4 against each of the 3 others, both orders
        assert third.new_rate_run and third.rate_run_id != first.rate_run_id
    newest = query(
        db,
        "SELECT model_a, model_b FROM judgments WHERE run_id = (SELECT run_id FROM runs "
        "WHERE kind = 'judge' ORDER BY started_at DESC LIMIT 1)",
    )
    assert len(newest) == new_calls and all("late-4" in pair for pair in newest)
    stored = json.loads(query(db, "SELECT parameters FROM runs WHERE run_id = ?", [third.run_id])[0][0])
    assert stored["new_rate_run"] is True and stored["judge_calls"] == new_calls


def _refresh(db: Path, out: Path, env: dict, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(EQARENA),
            "refresh",
            "--db",
            str(db),
            "--out",
            str(out),
            "--methods",
            "bt,ne",
            "--analyses",
            "none",
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_concurrent_refreshes_never_interleave(prefect_harness, tmp_path):
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    db, out = tmp_path / "w.duckdb", tmp_path / "out"
    first = _refresh(db, out, env)
    # Start the others once the first holds the writer lock.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (Path(f"{db}.lock").exists() and Path(f"{db}.lock").read_text()):
        time.sleep(0.1)
    impatient = _refresh(db, out, env, "--wait", "0")
    patient = _refresh(db, out, env, "--wait", "600")
    results = {
        name: (p.wait(timeout=600), *p.communicate())
        for name, p in (("first", first), ("impatient", impatient), ("patient", patient))
    }

    code, stdout, stderr = results["first"]
    assert code == 0, stderr
    assert "new rate run" in stdout
    code, stdout, stderr = results["impatient"]
    assert code == 1 and stdout == ""
    assert stderr.strip().startswith("error: warehouse busy: run refresh-") and "is writing" in stderr, stderr
    code, stdout, stderr = results["patient"]
    assert code == 0, stderr
    assert "refresh: nothing new; 0 judge calls, no new rate run" in stdout  # it ran after the first

    single = tmp_path / "single.duckdb"
    alone = _refresh(single, tmp_path / "out-single", env, "--bootstrap", "0")  # compared by status only
    assert alone.wait(timeout=600) == 0
    status = [
        subprocess.run(
            [str(EQARENA), "status", "--json", "--db", str(path)], env=env, capture_output=True, text=True, check=True
        ).stdout
        for path in (db, single)
    ]
    assert json.loads(status[0]) == json.loads(status[1])
    assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'")[0][0] == 1
    assert query(db, "SELECT kind, status FROM runs WHERE kind = 'refresh' ORDER BY started_at") == [
        ("refresh", "ok"),
        ("refresh", "ok"),
    ]


def test_run_prints_the_plan_and_refuses_unconfirmed_spend(prefect_harness, tmp_path, monkeypatch):
    """A provider judge whose plan is estimated above $1 needs --max-cost or --yes; nothing is sent."""
    from typer.testing import CliRunner

    from eqarena.cli.app import app

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # a closed port: any call would fail
    data = tmp_path / "arena"
    (data / "model_answer").mkdir(parents=True)
    write_jsonl(data / "question.jsonl", [{"uid": p, "category": "t", "prompt": planted_prompt(p)} for p in PROMPTS])
    for model in ("strong-1", "middle-2", "weak-3"):  # long answers: ~10k tokens per call
        write_jsonl(
            data / "model_answer" / f"{model}.jsonl",
            [
                {
                    "uid": p,
                    "ans_id": f"{model}-{p}",
                    "model": model,
                    "messages": [
                        {"role": "user", "content": "q"},
                        {"role": "assistant", "content": {"answer": planted_response(model, p) + " x" * 20000}},
                    ],
                }
                for p in PROMPTS
            ],
        )
    db = tmp_path / "w.duckdb"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--db",
            str(db),
            "--out",
            str(tmp_path / "out"),
            "--dataset",
            str(data),
            "--judge",
            "openai:gpt-4o",
            "--analyses",
            "none",
        ],
    )
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("judge plan for openai:gpt-4o on arena: 96 calls, ~")
    cost = float(lines[0].rsplit("~$", 1)[1])
    assert cost > 1.0
    assert lines[-1] == (
        f"error: {lines[0]}: more than $1.00, so nothing was sent; cap the spend with --max-cost USD "
        "or confirm it with --yes"
    )
    assert query(db, "SELECT count(*) FROM judgments")[0][0] == 0
    assert query(db, "SELECT count(*) FROM runs WHERE kind IN ('judge', 'rate')")[0][0] == 0
