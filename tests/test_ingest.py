"""The ingest flow on the bundled datasets and on arena-hard directories: counts, content equal to
the sources, recorded judgments, idempotency, changed content, and the runs table."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json

import pytest
from ingest_inputs import answer_record, read_lines, snapshot, write_arena_dir, write_jsonl

from eqarena import warehouse
from eqarena.datasets.bundled import SEEDS_DIR
from eqarena.flows import ingest_flow
from eqarena.options import IngestOptions

pytestmark = pytest.mark.unit

PRD_JUDGES = ("gpt4", "claude", "gpt35", "bard", "vicuna-13b")
PRD_MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")


def query(db_path, sql, params=None):
    con = warehouse.connect(db_path, read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def changes(summary) -> dict[str, tuple[int, int, int, int]]:
    return {t.table: (t.new, t.unchanged, t.changed, t.replaced) for t in summary.tables}


@pytest.fixture(scope="module")
def prd(source_data):
    """The original PRD Vicuna-80 files."""
    return source_data / "prd_vicuna80"


@pytest.fixture(scope="module")
def vicuna_db(tmp_path_factory, prefect_harness):
    db_path = tmp_path_factory.mktemp("vicuna") / "eqarena.duckdb"
    summary = ingest_flow(IngestOptions(source="vicuna80"), str(db_path))
    return db_path, summary


def test_vicuna80_counts(vicuna_db):
    db_path, summary = vicuna_db
    assert changes(summary) == {
        "prompts": (80, 0, 0, 0),
        "models": (5, 0, 0, 0),
        "responses": (400, 0, 0, 0),
        "judgments": (8000, 0, 0, 0),
    }
    assert query(db_path, "SELECT count(*) FROM prompts WHERE dataset = 'vicuna80'") == [(80,)]
    assert query(db_path, "SELECT model_id, family FROM models ORDER BY 1") == [
        ("bard", "bard"),
        ("claude", "claude"),
        ("gpt35", "gpt"),
        ("gpt4", "gpt"),
        ("vicuna-13b", "vicuna"),
    ]
    assert query(db_path, "SELECT judge, count(*) FROM judgments GROUP BY judge ORDER BY judge") == [
        (f"prd:{j}", 1600) for j in sorted(PRD_JUDGES)
    ]


def test_vicuna80_prompts_and_answers_equal_the_source(vicuna_db, prd):
    db_path, _ = vicuna_db
    questions = {
        str(q["question_id"]): (q["text"], q["category"])
        for q in map(json.loads, read_lines(prd / "prompts" / "vicuna_questions.jsonl"))
    }
    assert (
        dict(
            (p, (t, c))
            for p, t, c in query(db_path, "SELECT prompt_id, text, category FROM prompts WHERE dataset = 'vicuna80'")
        )
        == questions
    )
    answers = {}
    for model in PRD_MODELS:
        for row in map(json.loads, read_lines(prd / "generations" / f"answer_{model}.jsonl")):
            answers[(str(row["question_id"]), model)] = (
                row["answer_id"],
                row["text"],
                hashlib.sha256(row["text"].encode()).hexdigest(),
            )
    stored = query(db_path, "SELECT prompt_id, model_id, response_id, text, text_sha256 FROM responses")
    assert {(p, m): (i, t, h) for p, m, i, t, h in stored} == answers


def test_vicuna80_judgments_equal_the_recorded_ratings(vicuna_db, prd):
    """Checked against judgments_long.csv, a separately derived table of the same PRD ratings."""
    db_path, _ = vicuna_db
    expected = {}
    with open(prd / "judgments_long.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["judge"] not in PRD_JUDGES or row["source_file"].startswith("answer-"):
                continue  # human votes; the duplicate gpt35 run
            key = (f"prd:{row['judge']}", row["question_id"], row["model_pos1"], row["model_pos2"])
            assert key not in expected
            expected[key] = {"1": 1.0, "2": -1.0, "3": 0.0}[row["score"]]
    assert len(expected) == 8000
    stored = query(
        db_path, "SELECT judge, prompt_id, model_a, model_b, score, verdict, status, sample_index FROM judgments"
    )
    assert {(j, p, a, b): s for j, p, a, b, s, *_ in stored} == expected
    verdicts = {1.0: "A>B", 0.0: "A=B", -1.0: "B>A"}
    assert all(v == verdicts[s] and st == "ok" and i == 0 for *_, s, v, st, i in stored)


def test_vicuna80_judgments_are_position_balanced(vicuna_db):
    db_path, _ = vicuna_db
    per_cell = query(
        db_path,
        """
        SELECT judge, prompt_id, least(model_a, model_b), greatest(model_a, model_b),
               count(*), count(DISTINCT model_a)
        FROM judgments GROUP BY ALL""",
    )
    assert len(per_cell) == 5 * 80 * 10  # judges x prompts x unordered pairs
    assert all(n == 2 and firsts == 2 for *_, n, firsts in per_cell)


def test_vicuna80_raw_text_and_template_hash(vicuna_db, prd):
    db_path, _ = vicuna_db
    template = (SEEDS_DIR / "vicuna80" / "judge_template.prd-threeclass.jsonl").read_bytes()
    assert template == (prd / "prompts" / "vicuna_prompt_threeclass.jsonl").read_bytes()
    assert query(db_path, "SELECT DISTINCT template_hash FROM judgments") == [(hashlib.sha256(template).hexdigest(),)]
    source = prd / "ratings-bard" / "answer_gpt4-vs-answer_claude-bard-reviewer_threeclass.jsonl"
    texts = {str(r["question_id"]): r["text"] for r in map(json.loads, read_lines(source))}
    stored = query(
        db_path,
        "SELECT prompt_id, raw_text FROM judgments WHERE judge = 'prd:bard' "
        "AND model_a = 'gpt4' AND model_b = 'claude'",
    )
    assert dict(stored) == texts


def test_ingest_run_is_recorded(vicuna_db):
    db_path, summary = vicuna_db
    [(kind, status, parameters, versions, fingerprint, timings, message, finished)] = query(
        db_path,
        "SELECT kind, status, parameters, versions, data_fingerprint, timings, message, finished_at "
        "FROM runs WHERE run_id = ?",
        [summary.run_id],
    )
    assert (kind, status) == ("ingest", "ok")
    assert json.loads(parameters)["dataset"] == "vicuna80"
    assert {"duckdb", "prefect", "python"} <= set(json.loads(versions))
    assert set(json.loads(timings)) == {"read", "write"} and finished is not None
    assert len(fingerprint) == 64 and message.startswith("vicuna80: 8485 new")
    assert query(db_path, "SELECT DISTINCT run_id FROM judgments") == [(summary.run_id,)]


def test_second_identical_ingest_writes_nothing(vicuna_db):
    db_path, first = vicuna_db
    before = snapshot(db_path)
    again = ingest_flow(IngestOptions(source="vicuna80"), str(db_path))
    assert again.new == 0 and again.changed == 0 and again.unchanged == 8485
    assert snapshot(db_path) == before  # not even created_at or run_id moved
    assert again.run_id != first.run_id
    assert query(db_path, "SELECT status FROM runs WHERE run_id = ?", [again.run_id]) == [("ok",)]


def test_arena_hard_seed(db_path, prefect_harness):
    summary = ingest_flow(IngestOptions(source="arena-hard-v0.1"), str(db_path))
    assert changes(summary) == {
        "prompts": (500, 0, 0, 0),
        "models": (8, 0, 0, 0),
        "responses": (4000, 0, 0, 0),
        "judgments": (0, 0, 0, 0),
    }
    assert query(
        db_path, "SELECT count(*), count(DISTINCT model_id) FROM responses WHERE dataset = 'arena-hard-v0.1'"
    ) == [(4000, 8)]
    again = ingest_flow(IngestOptions(source="arena-hard-v0.1"), str(db_path))
    assert again.new == 0 and again.unchanged == 4508


def test_both_layouts_merge_into_one_dataset(db_path, prefect_harness, source_data):
    """The two copies of arena-hard-v0.1 ingested under one name: identical prompts and identical
    gpt-4-0314 answers are recognised as such, and the bundled seed then adds nothing."""
    arena = source_data / "arena_hard_v0.1"
    first = ingest_flow(IngestOptions(source=str(arena / "new_format"), name="arena-hard-v0.1"), str(db_path))
    assert changes(first)["responses"] == (1500, 0, 0, 0)
    second = ingest_flow(IngestOptions(source=str(arena / "old_format"), name="arena-hard-v0.1"), str(db_path))
    assert changes(second) == {
        "prompts": (0, 500, 0, 0),
        "models": (5, 1, 0, 0),
        "responses": (2500, 500, 0, 0),
        "judgments": (0, 0, 0, 0),
    }
    seed = ingest_flow(IngestOptions(source="arena-hard-v0.1"), str(db_path))
    assert seed.new == 0 and seed.changed == 0
    assert query(db_path, "SELECT count(*) FROM responses") == [(4000,)]


def test_directory_name_is_the_default_dataset_name(tmp_path, db_path, prefect_harness):
    directory = write_arena_dir(tmp_path / "my-arena")
    summary = ingest_flow(IngestOptions(source=str(directory)), str(db_path))
    assert summary.dataset == "my-arena"
    assert changes(summary) == {
        "prompts": (5, 0, 0, 0),
        "models": (2, 0, 0, 0),
        "responses": (10, 0, 0, 0),
        "judgments": (0, 0, 0, 0),
    }
    assert query(db_path, "SELECT DISTINCT dataset FROM responses") == [("my-arena",)]


def test_changed_answer_is_reported_and_replaced_only_when_asked(tmp_path, db_path, prefect_harness):
    directory = write_arena_dir(tmp_path / "arena")
    ingest_flow(IngestOptions(source=str(directory)), str(db_path))
    edited = answer_record("old", "p3", "m-old", "a better answer")
    lines = read_lines(directory / "model_answer" / "m-old.jsonl")
    lines[3] = json.dumps(edited) + "\n"
    (directory / "model_answer" / "m-old.jsonl").write_text("".join(lines))
    stored = "SELECT text, text_sha256 FROM responses WHERE prompt_id = 'p3' AND model_id = 'm-old'"
    old = query(db_path, stored)

    kept = ingest_flow(IngestOptions(source=str(directory)), str(db_path))
    [responses] = [t for t in kept.tables if t.table == "responses"]
    assert (responses.new, responses.unchanged, responses.changed, responses.replaced) == (0, 9, 1, 0)
    assert responses.changed_keys == (("arena", "p3", "m-old"),)
    assert query(db_path, stored) == old

    replaced = ingest_flow(IngestOptions(source=str(directory), replace=True), str(db_path))
    assert changes(replaced)["responses"] == (0, 9, 1, 1)
    assert query(db_path, stored) == [("a better answer", hashlib.sha256(b"a better answer").hexdigest())]
    assert ingest_flow(IngestOptions(source=str(directory)), str(db_path)).changed == 0


def test_invalid_input_writes_nothing_and_records_a_failed_run(tmp_path, db_path, prefect_harness):
    from eqarena.datasets.records import DatasetError

    ingest_flow(IngestOptions(source=str(write_arena_dir(tmp_path / "good"))), str(db_path))
    before = snapshot(db_path)
    bad = write_arena_dir(tmp_path / "bad", n_prompts=8)
    lines = read_lines(bad / "model_answer" / "m-new.jsonl")
    lines[6] = lines[6][:40] + "\n"
    write_jsonl(bad / "model_answer" / "extra.jsonl", [])
    (bad / "model_answer" / "m-new.jsonl").write_text("".join(lines))
    with pytest.raises(DatasetError, match=r"m-new\.jsonl:7: malformed JSON"):
        ingest_flow(IngestOptions(source=str(bad)), str(db_path))
    assert snapshot(db_path) == before
    [(message,)] = query(db_path, "SELECT message FROM runs WHERE status = 'failed'")
    assert "m-new.jsonl:7: malformed JSON" in message


def test_changed_recorded_judgment_from_a_bundle_directory(tmp_path, db_path, prefect_harness):
    """A bundle given by path (its dataset.json names it): a re-scored judgment is a changed row."""
    seed = tmp_path / "seed"
    seed.mkdir()
    for file in (SEEDS_DIR / "vicuna80").iterdir():
        (seed / file.name).write_bytes(file.read_bytes())
    ingest_flow(IngestOptions(source=str(seed)), str(db_path))
    with gzip.open(seed / "judgments.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    first = json.loads(lines[0])
    flipped = {"A>B": ("B>A", -1.0), "B>A": ("A>B", 1.0), "A=B": ("A>B", 1.0)}[first["verdict"]]
    lines[0] = json.dumps(first | {"verdict": flipped[0], "score": flipped[1], "raw_text": "second opinion"})
    with gzip.open(seed / "judgments.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    stored = (
        "SELECT verdict, score, raw_text FROM judgments WHERE judge = ? AND prompt_id = ? "
        "AND model_a = ? AND model_b = ?"
    )
    key = [first["judge"], first["prompt_id"], first["model_a"], first["model_b"]]

    kept = ingest_flow(IngestOptions(source=str(seed)), str(db_path))
    assert kept.dataset == "vicuna80" and changes(kept)["judgments"] == (0, 7999, 1, 0)
    assert query(db_path, stored, key) == [(first["verdict"], first["score"], first["raw_text"])]
    replaced = ingest_flow(IngestOptions(source=str(seed), replace=True), str(db_path))
    assert changes(replaced)["judgments"] == (0, 7999, 1, 1)
    assert query(db_path, stored, key) == [(flipped[0], flipped[1], "second opinion")]
    assert query(db_path, "SELECT count(*) FROM judgments") == [(8000,)]


def test_large_inputs_show_a_progress_bar(tmp_path, monkeypatch, capsys):
    from eqarena.tasks.ingest import read_dataset

    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then treats stderr as a terminal
    read_dataset.fn("arena-hard-v0.1")
    shown = capsys.readouterr().err
    assert "reading arena-hard-v0.1" in shown and "3.0/3.0 MB" in shown
    read_dataset.fn(str(write_arena_dir(tmp_path / "small")))
    assert capsys.readouterr().err == ""
