"""The replay judge `recorded:<judge>`: a replayed plan reproduces the recorded scores exactly, under its
own judge id; --max-calls caps it; calls and tokens are counted; cells the recording lacks are errors."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from conftest import query
from judging import judge_options

from eqarena import warehouse
from eqarena.flows import judge_flow
from eqarena.judge.judges import make_judge_provider
from eqarena.judge.replay import RecordingMissing, ReplayProvider
from eqarena.judge.templates import load_template
from eqarena.llm.providers import (
    JudgeSpecError,
    parse_judge_spec,
)
from eqarena.options import GenerationOptions, RetryPolicy, RunnerOptions
from eqarena.tasks import ingest
from eqarena.warehouse.tensor import assemble_tensor

RETRY = RetryPolicy(attempts=2, initial_wait_s=0.01, max_wait_s=60.0, timeout_s=1.0)


def replay(db, judge: str, **fields):
    """Run the judge flow with the replay judge `recorded:<judge>` reading `db`."""
    return judge_flow(
        judge_options(f"recorded:{judge}@{db}", "vicuna80", retry=RETRY, **fields), str(db), progress=False
    )


@pytest.fixture(scope="module")
def prd_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay") / "prd.duckdb"
    ingest.write_dataset.fn(str(path), ingest.read_dataset.fn("vicuna80"), False, "ingest-test")
    return path


@pytest.fixture
def db(prd_db, tmp_path):
    copy = tmp_path / "prd.duckdb"
    copy.write_bytes(prd_db.read_bytes())
    return copy


def rows(db, judge):
    con = warehouse.connect(db)
    try:
        return con.execute(
            "SELECT prompt_id, model_a, model_b, sample_index, status, score, error FROM judgments "
            "WHERE judge = ? ORDER BY ALL",
            [judge],
        ).fetchall()
    finally:
        con.close()


def test_spec_parses_and_keeps_the_db_out_of_the_judge_id():
    spec = parse_judge_spec("recorded:prd:gpt4@/tmp/x.duckdb")
    assert (spec.provider, spec.model, spec.base_url, spec.judge_id) == (
        "recorded",
        "prd:gpt4",
        "/tmp/x.duckdb",
        "recorded:prd:gpt4",
    )
    with pytest.raises(JudgeSpecError):
        parse_judge_spec("recorded:")


def test_replaying_a_full_plan_reproduces_the_recorded_scores(prefect_harness, db):
    out = replay(db, "prd:gpt4", samples_per_order=1, prompts=20)
    assert out.judge == "recorded:prd:gpt4" and out.left.calls == 0 and out.spent_usd == 0.0
    assert out.stats.ok == out.plan.calls == 20 * 20 and out.stats.errors == 0
    replayed = rows(db, "recorded:prd:gpt4")
    original = {(p, a, b, k): s for p, a, b, k, _, s, _ in rows(db, "prd:gpt4")}
    assert len(replayed) == 400 and all(original[p, a, b, k] == s for p, a, b, k, _, s, _ in replayed)
    con = warehouse.connect(db)
    mine = assemble_tensor(con, "vicuna80", ["recorded:prd:gpt4"])
    theirs = assemble_tensor(con, "vicuna80", ["prd:gpt4"])
    con.close()
    judged = mine.covered[:, 0, 1]
    assert judged.sum() == 20 and mine.prompts == theirs.prompts and mine.models == theirs.models
    np.testing.assert_array_equal(mine.u_king[judged], theirs.u_king[judged])
    assert len(rows(db, "prd:gpt4")) == 1600  # the originals are untouched


def test_max_calls_caps_and_a_rerun_continues(prefect_harness, db):
    first = replay(db, "prd:claude", samples_per_order=1, prompts=5, max_calls=37)
    assert first.stopped_by == "max-calls" and first.stats.ok == 37 and len(rows(db, "recorded:prd:claude")) == 37
    second = replay(db, "prd:claude", samples_per_order=1, prompts=5)
    assert second.stats.ok == 100 - 37 and second.left.calls == 0
    original = {(p, a, b, k): s for p, a, b, k, _, s, _ in rows(db, "prd:claude")}
    assert all(original[p, a, b, k] == s for p, a, b, k, _, s, _ in rows(db, "recorded:prd:claude"))


def test_missing_recorded_samples_are_errors_not_ties(prefect_harness, db):
    out = replay(db, "prd:gpt4", samples_per_order=2, prompts=1)
    got = rows(db, "recorded:prd:gpt4")
    assert out.stats.ok == 20 and out.stats.errors == 20  # sample 1 was never recorded
    errors = [r for r in got if r[4] == "error"]
    assert {r[3] for r in errors} == {1} and all(r[5] is None and "recorded 1 sample" in r[6] for r in errors)


def test_accounting_counts_calls_and_tokens(db):
    provider = make_judge_provider(f"recorded:prd:gpt4@{db}")
    assert isinstance(provider, ReplayProvider)
    template = load_template("pairwise3")
    con = warehouse.connect(db)
    q = con.execute("SELECT text FROM prompts WHERE dataset = 'vicuna80' AND prompt_id = '1'").fetchone()[0]
    a, b = (
        con.execute(
            "SELECT text FROM responses WHERE dataset = 'vicuna80' AND prompt_id = '1' AND model_id = ?", [m]
        ).fetchone()[0]
        for m in ("bard", "gpt35")
    )
    recorded = con.execute(
        "SELECT score FROM judgments WHERE judge = 'prd:gpt4' AND prompt_id = '1' "
        "AND model_a = 'bard' AND model_b = 'gpt35'"
    ).fetchone()[0]
    con.close()
    done = asyncio.run(provider.complete(template.messages(q, a, b), 1, GenerationOptions()))
    label_of_score = {score: label for label, score in template.labels}
    assert done.texts[0].endswith(f"[[{label_of_score[recorded]}]]")
    assert provider.calls == 1 and provider.tokens_in == done.tokens_in > 0 and provider.tokens_out > 0
    with pytest.raises(RecordingMissing, match="asked for sample 1"):
        asyncio.run(provider.complete(template.messages(q, a, b), 1, GenerationOptions()))
    with pytest.raises(RecordingMissing, match="not in the recording"):
        asyncio.run(provider.complete(template.messages(q, b, "another answer"), 1, GenerationOptions()))
    assert provider.calls == 3


@pytest.mark.parametrize("runner", [RunnerOptions(batch=True), RunnerOptions(runner="dask")])
def test_replay_refuses_batch_and_dask(prefect_harness, db, runner):
    with pytest.raises(ValueError, match="replays stored judgments from this process; it cannot be combined"):
        replay(db, "prd:gpt4", runner=runner)
    assert query(db, "SELECT count(*) FROM judgments WHERE judge LIKE 'recorded:%'") == [(0,)]
