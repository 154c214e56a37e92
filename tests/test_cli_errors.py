"""Every documented error path of the `eqarena` console script, each in its own process: exit code 1,
stderr exactly one `error: ...` line (no traceback, no DuckDB "nanobind: leaked instance" noise at
interpreter exit, no Prefect shutdown message), nothing on stdout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer
from ingest_inputs import write_arena_dir
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments

EQARENA = Path(sys.executable).with_name("eqarena")


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory, prefect_harness):
    """`one`: the dataset `arena` (5 prompts, 2 models) and one recorded judgment (an incomplete
    tensor); `two`: the datasets `arena` and `other`."""
    root = tmp_path_factory.mktemp("errors")
    one, two = root / "one.duckdb", root / "two.duckdb"
    arena, other = write_arena_dir(root / "arena"), write_arena_dir(root / "other", n_prompts=2)
    runner = CliRunner()
    for db, folders in ((one, [arena]), (two, [arena, other])):
        for folder in folders:
            result = runner.invoke(app, ["ingest", "-d", str(folder), "--db", str(db)])
            assert result.exit_code == 0, result.output
    con = warehouse.connect(one)
    try:
        insert_judgments(con, [JudgmentRow("prd:x", "t", "arena", "p0", "m-new", "m-old", 0, "ok", score=1.0)])
    finally:
        con.close()
    return {"one": one, "two": two, "root": root}


def _broken_dir(root: Path) -> Path:
    folder = write_arena_dir(root / "broken")
    answers = folder / "model_answer" / "m-new.jsonl"
    lines = answers.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = '{"uid": "p1", "model": "m-new", "messages": [\n'
    answers.write_text("".join(lines), encoding="utf-8")
    return folder


# (name, arguments with {one} / {two} / {root} placeholders, a part of the expected message)
CASES = [
    ("status-missing-db", ["status", "--db", "{root}/none.duckdb"], "does not exist yet"),
    ("ingest-unknown-dataset", ["ingest", "-d", "no-such-dataset", "--db", "{one}"], "neither a bundled dataset"),
    ("ingest-broken-line", ["ingest", "-d", "{root}/broken", "--db", "{one}"], "m-new.jsonl:2: malformed JSON"),
    (
        "judge-unknown-dataset",
        ["judge", "-j", "openai:gpt-4o-mini", "-d", "nope", "--db", "{one}"],
        "dataset 'nope' has no prompts in the warehouse (datasets: arena)",
    ),
    (
        "judge-which-dataset",
        ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--db", "{two}"],
        "the warehouse holds 2 datasets (arena, other): choose one with --dataset",
    ),
    (
        "judge-bad-spec",
        ["judge", "-j", "mystery", "-d", "arena", "--db", "{one}"],
        "--judge 'mystery': expected openai:MODEL",
    ),
    ("judge-missing-key", ["judge", "-j", "openai:gpt-4o-mini", "-d", "arena", "--db", "{one}"], "OPENAI_API_KEY"),
    (
        "judge-plan-unknown-template",
        ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--template", "nope", "-d", "arena", "--db", "{one}"],
        "template",
    ),
    (
        "judge-plan-unknown-model",
        ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--models", "m-new,zz", "-d", "arena", "--db", "{one}"],
        "--models: no responses of zz",
    ),
    ("rate-bad-methods", ["rate", "--methods", "ne,elo", "-d", "arena", "--db", "{one}"], "elo"),
    ("rate-unknown-judge", ["rate", "-j", "prd:nobody", "-d", "arena", "--db", "{one}"], "prd:nobody"),
    (
        "rate-incomplete",
        ["rate", "-j", "prd:x", "-d", "arena", "--db", "{one}"],
        "cover 0 of 5 (prompt, model pair) cells",
    ),
    (  # the one judgment is in one order: --orders any would count its cell
        "rate-one-order",
        ["rate", "-j", "prd:x", "-d", "arena", "--db", "{one}"],
        "drop-models; 1 of the missing cells are judged in one order only, which --orders any counts",
    ),
    ("rate-which-dataset", ["rate", "--db", "{two}"], "choose one with --dataset"),
    ("report-unknown-run", ["report", "--run", "rate-nope", "--db", "{one}"], "rate-nope"),
    ("run-unknown-dataset", ["run", "-d", "no-such-dataset", "--db", "{one}"], "neither a bundled dataset"),
    ("run-unknown-analysis", ["run", "--analyses", "clones,bogus", "--db", "{one}"], "unknown analysis bogus"),
    (
        "analyze-unknown-run",
        ["analyze", "clones", "--run", "rate-nope", "--db", "{one}"],
        "no finished rate run 'rate-nope'",
    ),
    ("analyze-bad-counts", ["analyze", "clones", "--n", "0,-5", "--db", "{one}"], "--n takes comma-separated"),
]


def _run(args: list[str], places: dict, env: dict) -> subprocess.CompletedProcess:
    argv = [str(EQARENA)] + [a.format(**places) for a in args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)


def _assert_one_line_error(result: subprocess.CompletedProcess, expected: str) -> None:
    lines = result.stderr.splitlines()
    assert "nanobind" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert expected in lines[0], lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("name, args, expected", CASES, ids=[c[0] for c in CASES])
def test_error_path_prints_its_message_and_nothing_else(name, args, expected, warehouses):
    from prefect.settings import get_current_settings

    _broken_dir(warehouses["root"])
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env["PREFECT_API_URL"] = str(get_current_settings().api.url)  # the session's API: no start-up per process
    before = warehouse_state(warehouses)
    _assert_one_line_error(_run(args, warehouses, env), expected)
    assert warehouse_state(warehouses) == before


def test_error_after_a_temporary_prefect_server_is_still_one_line(warehouses):
    """Without PREFECT_API_URL the command starts (and at exit stops) its own temporary Prefect API."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    result = _run(["rate", "-j", "prd:nobody", "-d", "arena", "--db", "{one}"], warehouses, env)
    _assert_one_line_error(result, "prd:nobody")


@pytest.mark.parametrize(
    "spec, keys",
    [
        ("openai-compatible:judge@{url}/v1", {}),
        ("gemini:gemini-2.0-flash@{url}", {"GEMINI_API_KEY": "wrong-key-000000"}),
    ],
    ids=["openai-compatible", "gemini"],
)
@pytest.mark.parametrize("prefect_logging", ["INFO", "WARNING"])
def test_a_refused_key_is_one_line(warehouses, tmp_path, spec, keys, prefect_logging):
    """HTTP 401 from the provider inside the judge flow. Prefect kept the failed run's context (its
    parameters, the judge runner and its DuckDB connection; the exception and its frames) until the
    interpreter tore down its modules, which printed ~40 lines of "nanobind: leaked ..."; where the run's
    context was kept depends on what Prefect logged first, hence both logging levels."""
    from prefect.settings import get_current_settings

    db = shutil.copy(warehouses["one"], tmp_path / "one.duckdb")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")}
    env.update(keys, PREFECT_API_URL=str(get_current_settings().api.url), PREFECT_LOGGING_LEVEL=prefect_logging)
    with FakeLLMServer(require_key="the-right-key") as server:
        result = _run(["judge", "-j", spec.format(url=server.url), "-d", "arena", "--db", str(db)], warehouses, env)
        assert server.snapshot().requests >= 1
    _assert_one_line_error(result, "refused the request")
    assert "(HTTP 401)" in result.stderr


def test_a_refused_key_in_the_main_job_is_one_line(warehouses, tmp_path):
    """`eqarena run` with a provider judge runs its judge flow from a plain pipeline: Prefect's logs and
    the failed task's traceback stay off the terminal, the error is one line."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "PREFECT_API_URL")}
    env["EQARENA_PROGRESS"] = "0"
    with FakeLLMServer(require_key="the-right-key") as server:
        result = _run(
            [
                "run",
                "-d",
                "{root}/arena",
                "-j",
                f"openai-compatible:judge@{server.url}/v1",
                "--yes",
                "--db",
                str(tmp_path / "w.duckdb"),
                "--out",
                str(tmp_path / "out"),
            ],
            warehouses,
            env,
        )
        assert server.snapshot().requests >= 1
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert lines[-1].startswith("error: ") and "refused the request" in lines[-1], result.stderr
    assert len(lines) <= 3, result.stderr  # the plan's lines may come first; no logs, no traceback
    assert "Traceback" not in result.stderr and "nanobind" not in result.stderr


def test_judge_and_rate_use_the_only_dataset_and_say_so(warehouses, tmp_path):
    db = tmp_path / "arena-only.duckdb"
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", "-d", str(warehouses["root"] / "other"), "--db", str(db)]).exit_code == 0
    shown = _run(
        ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--json", "--db", str(db)], warehouses, dict(os.environ)
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.splitlines() == ["dataset: other (the only one in the warehouse)"]
    plan = json.loads(shown.stdout)
    assert (plan["dataset"], plan["prompts"], plan["calls"]) == ("other", 2, 2 * 2 * 4)
    rated = runner.invoke(app, ["rate", "--db", str(db)])
    assert rated.exit_code == 1
    assert rated.stderr.splitlines() == [
        "dataset: other (the only one in the warehouse)",
        "error: no judgments on dataset 'other' yet: ingest recorded judgments or run `eqarena judge`",
    ]


def test_warehouse_in_use_is_one_line(warehouses, held_warehouse):
    db, pid, _ = held_warehouse
    result = _run(
        ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--db", str(db), "--wait", "0"], warehouses, dict(os.environ)
    )
    _assert_one_line_error(result, f"database {db} is in use by process {pid}")


def warehouse_state(warehouses) -> dict:
    """Row counts of every table of both warehouses, runs recorded as failed left out: an error path
    writes nothing but, where a run had started, its `failed` row."""
    state = {}
    for key in ("one", "two"):
        con = warehouse.connect(warehouses[key], read_only=True)
        try:
            tables = [
                r[0]
                for r in con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
                ).fetchall()
            ]
            state[key] = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables if t != "runs"}
            state[key]["runs"] = con.execute("SELECT count(*) FROM runs WHERE status <> 'failed'").fetchone()[0]
        finally:
            con.close()
    return state
