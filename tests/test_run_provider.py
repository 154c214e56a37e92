"""`eqarena run` with a provider judge: ingest an arena-hard directory, judge it through the real
OpenAI SDK against a local OpenAI-compatible server (127.0.0.1) with planted model qualities, rate,
report; a second run makes no new call."""

from __future__ import annotations

import json

import pytest

from eqarena import warehouse
from tests.fake_llm_server import FakeLLMServer, planted_prompt, planted_response
from tests.ingest_inputs import write_jsonl

QUALITY = {"strong-1": 2.0, "middle-2": 0.0, "weak-3": -2.0}
PROMPTS = [f"q{k}" for k in range(4)]


def _arena_dir(root):
    (root / "model_answer").mkdir(parents=True)
    write_jsonl(
        root / "question.jsonl",
        [{"uid": p, "category": "test", "cluster": "t", "prompt": planted_prompt(p)} for p in PROMPTS],
    )
    for model in QUALITY:
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
    return root


@pytest.fixture
def server():
    with FakeLLMServer(QUALITY, noise=0.1, seed=3) as s:
        yield s


def test_run_judges_rates_and_reports_with_a_provider(prefect_harness, tmp_path, server):
    from eqarena.flows import run_flow
    from eqarena.options import BootstrapOptions, MainJobOptions, RateOptions

    data = _arena_dir(tmp_path / "tiny-arena")
    db, out = str(tmp_path / "w.duckdb"), str(tmp_path / "out")
    spec = f"openai-compatible:judge-model@{server.openai_base_url}"

    def options(methods: tuple[str, ...], bootstrap: int) -> MainJobOptions:
        return MainJobOptions(
            source=str(data),
            judge=spec,
            out_dir=out,
            samples_per_order=1,
            rate=RateOptions(methods=methods, bootstrap=BootstrapOptions(replicates=bootstrap)),
        )

    summary = run_flow(options(("bt", "ne", "cce"), 20), db)
    calls = sum(server.counters.paid_samples.values())
    assert calls == len(PROMPTS) * 3 * 2  # every prompt x ordered pair, one sample each

    con = warehouse.connect(db, read_only=True)
    try:
        judges = json.loads(
            con.execute("SELECT parameters FROM runs WHERE run_id = ?", [summary.rate_run_id]).fetchone()[0]
        )["judges"]
        bt = con.execute("SELECT model_id FROM latest_model_ratings WHERE method = 'bt' ORDER BY rank").fetchall()
        ne = dict(con.execute("SELECT model_id, mass FROM latest_model_ratings WHERE method = 'ne'").fetchall())
        shape = con.execute(
            "SELECT count(DISTINCT prompt_id), count(DISTINCT king) FROM payoffs WHERE run_id = ?",
            [summary.rate_run_id],
        ).fetchone()
        exploitability = dict(
            con.execute(
                "SELECT method, exploitability FROM equilibria WHERE run_id = ?", [summary.rate_run_id]
            ).fetchall()
        )
    finally:
        con.close()
    assert judges == ["openai-compatible:judge-model"]
    assert [m for (m,) in bt] == ["strong-1", "middle-2", "weak-3"]
    assert ne["strong-1"] == pytest.approx(1.0, abs=1e-6)  # the dominant model is the NE king
    assert shape == (len(PROMPTS), 3)
    assert set(exploitability) == {"ne", "cce"} and max(exploitability.values()) <= 1e-5
    assert summary.report_path.is_file()
    # The judge ran as the judge flow, a subflow of the main job's flow run.
    from uuid import UUID

    from prefect.client.orchestration import get_client

    con = warehouse.connect(db, read_only=True)
    try:
        flow_ids = dict(con.execute("SELECT kind, flow_run_id FROM runs WHERE kind IN ('judge', 'run')").fetchall())
    finally:
        con.close()
    with get_client(sync_client=True) as client:
        judge_run = client.read_flow_run(UUID(flow_ids["judge"]))
        assert judge_run.parent_task_run_id is not None
        parent = client.read_task_run(judge_run.parent_task_run_id)
        assert str(parent.flow_run_id) == flow_ids["run"]

    again = run_flow(options(("bt",), 10), db)
    assert sum(server.counters.paid_samples.values()) == calls  # nothing judged twice
    assert again.rate_run_id != summary.rate_run_id
    assert again.analyses["risk"] == ["risk analysis skipped: it starts from the run's NE (rate with --methods ne)"]
    (clones,) = again.analyses["clones"]  # one sentence: the BT ranking under copies of prompts
    assert clones.startswith("Robustness: the BT ranking ") and "strong-1 is weakest on" in clones
