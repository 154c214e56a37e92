"""A real LLM (SmolLM2-135M on llama.cpp, 127.0.0.1) behind the judge's `openai-compatible` path.

The model is far too small to judge well and rarely writes a verdict label, so these tests check
what the path guarantees whatever the model says: the calls reach the server over HTTP, every
answer is stored once with its raw text and usage, unparseable ones are asked again up to the limit,
and a re-run asks nothing.
"""

from __future__ import annotations

import json
from itertools import groupby

import pytest
from local_llm import LocalLLMServer, serve_local_llm
from openai import OpenAI
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.judge.templates import load_template
from eqarena.judge.verdict import parse_verdict

pytestmark = [pytest.mark.local_llm, pytest.mark.integration]

DATASET = "vicuna80"
MODELS = ("gpt35", "vicuna-13b")
PROMPTS = ("1", "2")  # the judge takes the first N prompts in natural order
MAX_TOKENS = 128
MAX_UNPARSED = 1  # the default for one sample per order, spelled out


@pytest.fixture(scope="module")
def local_llm(tmp_path_factory) -> LocalLLMServer:
    with serve_local_llm(tmp_path_factory.mktemp("local-llm") / "server.log") as server:
        yield server


def served(server: LocalLLMServer) -> tuple[int, int, int]:
    """(finished generations, prompt tokens, generated tokens) the server has counted so far."""
    return server.completions_served(), server.prompt_tokens_seen(), int(server.metrics()["tokens_predicted_total"])


def test_openai_sdk_chats_with_the_local_model(local_llm: LocalLLMServer):
    before = served(local_llm)
    client = OpenAI(base_url=local_llm.base_url, api_key="unused", max_retries=0)

    reply = client.chat.completions.create(
        model=local_llm.model,
        messages=[{"role": "user", "content": "Name one colour of the rainbow."}],
        max_tokens=8,
    )

    assert reply.choices[0].message.content.strip()
    assert 0 < reply.usage.completion_tokens <= 8
    after = served(local_llm)
    assert after[0] - before[0] == 1
    assert after[1] - before[1] == reply.usage.prompt_tokens
    assert after[2] - before[2] == reply.usage.completion_tokens
    assert [m.id for m in client.models.list().data] == [local_llm.model]


@pytest.mark.timeout(900)
def test_judge_cli_with_a_real_local_llm(local_llm: LocalLLMServer, db_path, prefect_harness):
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", "--dataset", DATASET, "--db", str(db_path)])
    assert ingested.exit_code == 0, ingested.output

    judge = [
        "judge",
        "--judge",
        f"openai-compatible:{local_llm.model}@{local_llm.base_url}",
        "--dataset",
        DATASET,
        "--models",
        ",".join(MODELS),
        "--prompts",
        str(len(PROMPTS)),
        "--samples-per-order",
        "1",
        "--max-unparsed",
        str(MAX_UNPARSED),
        "--max-tokens",
        str(MAX_TOKENS),
        "--concurrency",
        "1",
        "--timeout",
        "600",
        "--db",
        str(db_path),
        "--json",
    ]
    cells = {(p, a, b) for p in PROMPTS for a, b in (MODELS, MODELS[::-1])}

    start = served(local_llm)
    planned = runner.invoke(app, [*judge, "--plan"])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.output)
    assert (plan["calls"], plan["requests"], plan["wanted_samples"], plan["done_samples"]) == (4, 4, 4, 0)
    assert served(local_llm) == start  # a plan sends nothing

    ran = runner.invoke(app, judge)
    assert ran.exit_code == 0, ran.output
    outcome = json.loads(ran.output)
    stats = outcome["stats"]
    after = served(local_llm)

    rows = query(
        db_path,
        """
        SELECT prompt_id, model_a, model_b, sample_index, status, verdict, score, raw_text, error,
               tokens_in, tokens_out, latency_s, template_hash, run_id
        FROM judgments WHERE judge = ? AND dataset = ? ORDER BY prompt_id, model_a, model_b, sample_index
        """,
        [f"openai-compatible:{local_llm.model}", DATASET],
    )
    template = load_template("pairwise5")

    # Every call reached the real server and came back as exactly one stored row, with its usage.
    assert stats["errors"] == 0 and stats["retries"] == 0
    assert stats["requests"] == len(rows) == stats["ok"] + stats["unparsed"] == after[0] - start[0]
    assert sum(r[9] for r in rows) == stats["tokens_in"] == after[1] - start[1]
    assert sum(r[10] for r in rows) == stats["tokens_out"] == after[2] - start[2]
    assert len({r[:4] for r in rows}) == len(rows)  # no duplicate (cell, sample)

    # Each planned cell was asked once, and asked again (a new sample) after each unparseable answer
    # while the allowance lasted.
    by_cell = {cell: [r for r in group] for cell, group in groupby(rows, key=lambda r: r[:3])}
    assert set(by_cell) == cells
    for cell, samples in by_cell.items():
        statuses = [r[4] for r in samples]
        assert [r[3] for r in samples] == list(range(len(samples))), cell
        assert statuses in (
            ["ok"],
            *(["unparsed"] * k + ["ok"] for k in range(1, MAX_UNPARSED + 1)),
            ["unparsed"] * (MAX_UNPARSED + 1),
        ), (cell, statuses)

    for (
        _prompt_id,
        _a,
        _b,
        _index,
        status,
        verdict,
        score,
        raw_text,
        error,
        tokens_in,
        tokens_out,
        latency_s,
        template_hash,
        run_id,
    ) in rows:
        assert raw_text and raw_text.strip() and error is None
        assert 0 < tokens_out <= MAX_TOKENS and tokens_in > 0 and latency_s > 0
        assert template_hash == template.hash and run_id == outcome["run_id"]
        parsed = parse_verdict(raw_text, template)
        if status == "ok":
            assert (verdict, score) == (parsed.label, parsed.score)
        else:
            assert parsed is None and verdict is None and score is None

    assert outcome["left"]["calls"] == 0
    assert query(db_path, "SELECT kind, status FROM runs WHERE run_id = ?", [outcome["run_id"]]) == [("judge", "ok")]

    # Nothing is missing any more: the same command again asks nothing and stores nothing.
    again = runner.invoke(app, judge)
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["run_id"] is None
    assert served(local_llm) == after
    assert query(
        db_path, "SELECT count(*) FROM judgments WHERE judge = ?", [f"openai-compatible:{local_llm.model}"]
    ) == [(len(rows),)]


def query(db_path, sql: str, params: list) -> list[tuple]:
    con = warehouse.connect(db_path, read_only=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()
