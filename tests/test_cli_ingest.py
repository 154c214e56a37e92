"""`eqarena ingest` and `eqarena status` from the command line: summaries, "0 new", JSON status,
one-line errors naming file:line with the warehouse unchanged, and a second writer refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from ingest_inputs import answer_record, question_record, read_lines, snapshot, write_arena_dir
from typer.testing import CliRunner

from eqarena.cli.app import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "import"
EQARENA = Path(sys.executable).with_name("eqarena")


def cli(*args: str):
    return runner.invoke(app, list(args))


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_ingest_then_status(db_path, prefect_harness):
    first = cli("ingest", "--dataset", "vicuna80", "--db", str(db_path))
    assert first.exit_code == 0, first.output
    assert re.search(r"vicuna80: 8,485 new, 0 unchanged, 0 changed", first.stdout)
    again = cli("ingest", "--dataset", "vicuna80", "--db", str(db_path))
    assert again.exit_code == 0, again.output
    assert re.search(r"vicuna80: 0 new, 8,485 unchanged, 0 changed", again.stdout)

    status = cli("status", "--json", "--db", str(db_path))
    assert status.exit_code == 0, status.output
    judges = ["prd:bard", "prd:claude", "prd:gpt35", "prd:gpt4", "prd:vicuna-13b"]
    assert json.loads(status.stdout) == {
        "prompts": 80,
        "models": 5,
        "responses": 400,
        "judgments": {j: 1600 for j in judges},
        "coverage": {j: 1.0 for j in judges},
        "unfinished_runs": [],
    }
    table = cli("status", "--db", str(db_path))
    assert table.exit_code == 0, table.output
    for judge in judges:
        assert re.search(rf"{re.escape(judge)}\s*│\s*1,600\s*│\s*1,600\s*│\s*1,600 / 1,600\s*│\s*100\.0%", table.stdout)


def test_status_shows_each_run_whole_at_80_columns(db_path, prefect_harness):
    """Status, run id and start are never squeezed out (they were below ~220 columns); the message
    is cut to the width left, and no line is wider than the terminal."""
    for args in (("ingest",), ("import", "pairwise", str(EXAMPLES / "pairwise.csv"))):
        done = cli(*args, "--db", str(db_path))
        assert done.exit_code == 0, done.output
    con = duckdb.connect(str(db_path), read_only=True)
    runs = con.execute("SELECT run_id, status, strftime(started_at, '%Y-%m-%d %H:%M') FROM runs").fetchall()
    con.close()
    shown = runner.invoke(app, ["status", "--db", str(db_path)], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for run_id, status, started in runs:
        assert any(run_id in line and f" {status} " in line and started in line for line in lines), (run_id, lines)


def test_changed_content_is_reported(tmp_path, db_path, prefect_harness):
    directory = write_arena_dir(tmp_path / "arena")
    assert cli("ingest", "-d", str(directory), "--db", str(db_path)).exit_code == 0
    lines = read_lines(directory / "question.jsonl")
    lines[1] = json.dumps(question_record("new", "p1", "a reworded prompt")) + "\n"
    (directory / "question.jsonl").write_text("".join(lines))
    kept = cli("ingest", "-d", str(directory), "--db", str(db_path))
    assert kept.exit_code == 0, kept.output
    assert "prompts: 1 changed, kept the stored version (use --replace to overwrite): arena/p1" in kept.stdout
    assert "arena: 0 new, 16 unchanged, 1 changed" in kept.stdout
    replaced = cli("ingest", "-d", str(directory), "--db", str(db_path), "--replace")
    assert "prompts: 1 changed, replaced: arena/p1" in replaced.stdout
    assert "arena: 0 new, 16 unchanged, 1 changed" in replaced.stdout
    final = cli("ingest", "-d", str(directory), "--db", str(db_path))
    assert "arena: 0 new, 17 unchanged, 0 changed" in final.stdout


def _edit(path: Path, index: int, text: str) -> None:
    lines = read_lines(path)
    lines[index] = text + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def _edit_bytes(path: Path, index: int, data: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[index] = data + b"\n"
    path.write_bytes(b"".join(lines))


def _json_line(record: dict) -> str:
    return json.dumps(record)


def _without(record: dict, *steps) -> dict:
    node = record
    for step in steps[:-1]:
        node = node[step]
    del node[steps[-1]]
    return record


BAD_INPUTS = {
    "malformed JSON in questions": (
        lambda d: _edit(d / "question.jsonl", 1, '{"uid": "p1", "prompt": "unterminated'),
        r"question\.jsonl:2: malformed JSON",
    ),
    "malformed JSON in answers": (
        lambda d: _edit(d / "model_answer" / "m-old.jsonl", 3, "{not json}"),
        r"m-old\.jsonl:4: malformed JSON",
    ),
    "not an object": (
        lambda d: _edit(d / "model_answer" / "m-old.jsonl", 0, "[1, 2]"),
        r"m-old\.jsonl:1: expected a JSON object, got list",
    ),
    "not UTF-8": (
        lambda d: _edit_bytes(d / "question.jsonl", 2, b'{"uid": "p2", "prompt": "caf\xe9"}'),
        r"question\.jsonl:3: not UTF-8 text",
    ),
    "missing prompt text": (
        lambda d: _edit(d / "question.jsonl", 0, _json_line(_without(question_record("new", "p0", "x"), "prompt"))),
        r"question\.jsonl:1: missing field prompt",
    ),
    "missing answer (new layout)": (
        lambda d: _edit(
            d / "model_answer" / "m-new.jsonl",
            2,
            _json_line(_without(answer_record("new", "p2", "m-new", "x"), "messages", 1, "content", "answer")),
        ),
        r"m-new\.jsonl:3: missing field messages\[-1\]\.content\.answer",
    ),
    "missing answer (old layout)": (
        lambda d: _edit(
            d / "model_answer" / "m-old.jsonl",
            4,
            _json_line(_without(answer_record("old", "p4", "m-old", "x"), "choices")),
        ),
        r"m-old\.jsonl:5: missing field choices\[0\]\.turns\[0\]\.content",
    ),
    "missing model": (
        lambda d: _edit(
            d / "model_answer" / "m-new.jsonl",
            1,
            _json_line(_without(answer_record("new", "p1", "m-new", "x"), "model")),
        ),
        r"m-new\.jsonl:2: missing field model",
    ),
    "answer of the wrong type": (
        lambda d: _edit(
            d / "model_answer" / "m-new.jsonl",
            0,
            _json_line(answer_record("new", "p0", "m-new", "x") | {"messages": [{"content": {"answer": 42}}]}),
        ),
        r"m-new\.jsonl:1: field messages\[-1\]\.content\.answer must be a string, got int",
    ),
    "duplicate prompt": (
        lambda d: _edit(d / "question.jsonl", 3, _json_line(question_record("new", "p1", "again"))),
        r"question\.jsonl:4: duplicate prompt 'p1' \(first at line 2\)",
    ),
    "duplicate answer": (
        lambda d: _edit(d / "model_answer" / "m-new.jsonl", 4, _json_line(answer_record("new", "p0", "m-new", "x"))),
        r"m-new\.jsonl:5: duplicate answer of model 'm-new' to prompt 'p0' \(first at line 1\)",
    ),
    "answer for an unknown prompt": (
        lambda d: _edit(d / "model_answer" / "m-old.jsonl", 1, _json_line(answer_record("old", "p99", "m-old", "x"))),
        r"m-old\.jsonl:2: answer for unknown prompt 'p99' \(not in .*question\.jsonl\)",
    ),
    "two files disagree": (
        lambda d: (d / "model_answer" / "z-copy.jsonl").write_text(
            "\n".join(
                _json_line(
                    answer_record("new", p, "m-new", "different" if p == "p2" else f"answer of m-new to {p}: ünïcode ✓")
                )
                for p in ("p0", "p1", "p2")
            )
        ),
        r"z-copy\.jsonl:3: answer of model 'm-new' to prompt 'p2' differs from the one at .*m-new\.jsonl:3",
    ),
    "no question file": (
        lambda d: (d / "question.jsonl").unlink(),
        r"bad: not an arena-hard directory \(no question\.jsonl\)",
    ),
}


@pytest.fixture(scope="module")
def populated(tmp_path_factory, prefect_harness):
    """A warehouse holding one good dataset, and its contents."""
    root = tmp_path_factory.mktemp("populated")
    db_path = root / "eqarena.duckdb"
    result = cli("ingest", "-d", str(write_arena_dir(root / "good")), "--db", str(db_path))
    assert result.exit_code == 0, result.output
    return db_path, snapshot(db_path)


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_clear_error_and_writes_nothing(case, tmp_path, populated):
    db_path, before = populated
    damage, message = BAD_INPUTS[case]
    directory = write_arena_dir(tmp_path / "bad")
    damage(directory)
    error = one_line_error(cli("ingest", "-d", str(directory), "--db", str(db_path)))
    assert re.search(message, error), error
    assert snapshot(db_path) == before


def test_unknown_dataset_is_named(populated):
    db_path, before = populated
    error = one_line_error(cli("ingest", "-d", "no-such-dataset", "--db", str(db_path)))
    assert "dataset 'no-such-dataset' is neither a bundled dataset (arena-hard-v0.1, vicuna80) nor a directory" in error
    assert snapshot(db_path) == before


def test_status_of_a_missing_warehouse(tmp_path):
    error = one_line_error(cli("status", "--db", str(tmp_path / "none.duckdb")))
    assert "does not exist yet" in error


def test_second_writer_is_refused_in_one_line(held_warehouse, prefect_harness, monkeypatch):
    db_path, pid, release = held_warehouse
    monkeypatch.setenv("EQARENA_WAIT", "0")  # what --wait 0 sets: give up at once
    expected = f"error: database {db_path} is in use by process {pid} ("  # then the holder's command line
    assert one_line_error(cli("ingest", "-d", "vicuna80", "--db", str(db_path))).startswith(expected)
    assert one_line_error(cli("status", "--json", "--db", str(db_path))).startswith(expected)
    release()
    assert cli("ingest", "-d", "vicuna80", "--db", str(db_path)).exit_code == 0


def test_console_script_broken_line(tmp_path, db_path, prefect_harness):
    """The installed `eqarena` command in its own process: a file with one broken line."""
    from prefect.settings import get_current_settings

    env = dict(os.environ, PREFECT_API_URL=str(get_current_settings().api.url))

    def run(*args):
        return subprocess.run(
            [str(EQARENA), *args, "--db", str(db_path)], capture_output=True, text=True, env=env, timeout=600
        )

    good = cli("ingest", "--dataset", str(write_arena_dir(tmp_path / "arena")), "--db", str(db_path))
    assert good.exit_code == 0 and "arena: 17 new, 0 unchanged, 0 changed" in good.stdout, good.output
    status_before = cli("status", "--json", "--db", str(db_path)).stdout
    _edit(tmp_path / "arena" / "model_answer" / "m-new.jsonl", 2, '{"uid": "p2", "model": "m-new", "messages": [')
    _edit(
        tmp_path / "arena" / "model_answer" / "m-old.jsonl", 2, _json_line(answer_record("old", "p2", "m-old", "new"))
    )
    broken = run("ingest", "--dataset", str(tmp_path / "arena"))
    assert broken.returncode == 1
    assert broken.stderr.splitlines() == [
        f"error: {tmp_path / 'arena' / 'model_answer' / 'm-new.jsonl'}:3: malformed JSON (Expecting value at column 46)"
    ]
    assert broken.stdout == ""
    status_after = run("status", "--json")
    assert status_after.returncode == 0 and json.loads(status_after.stdout) == json.loads(status_before)
    assert json.loads(status_after.stdout)["responses"] == 10
