"""Commands that only read the warehouse (`status`, `judge --plan`, `generate --plan`) start no Prefect API and load
neither Prefect, JAX nor a provider SDK: they answer in about a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ingest_inputs import write_arena_dir
from typer.testing import CliRunner

from eqarena.cli.app import app

pytestmark = pytest.mark.integration  # subprocesses of the eqarena command

HEAVY = ("prefect", "jax", "openai", "google.genai")

# Runs the CLI in a fresh interpreter, then reports which heavy packages were imported.
PROBE = """
import json, sys
from eqarena.cli.app import app

try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    print(json.dumps({name: name in sys.modules for name in %r}), file=sys.stderr)
""" % (HEAVY,)


@pytest.fixture(scope="module")
def db(tmp_path_factory, prefect_harness):
    root = tmp_path_factory.mktemp("startup")
    path = root / "eqarena.duckdb"
    result = CliRunner().invoke(app, ["ingest", "-d", str(write_arena_dir(root / "arena")), "--db", str(path)])
    assert result.exit_code == 0, result.output
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["status", "--json"],
        ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--json"],
        ["judge", "-j", "gemini:gemini-2.0-flash", "--plan", "--json", "--samples-per-order", "2"],
        ["generate", "--model", "openai:gpt-4o-mini", "--plan", "--json"],
        ["generate", "--model", "gemini:gemini-2.0-flash", "--plan", "--json", "--prompts", "3"],
    ],
    ids=["status", "plan-openai", "plan-gemini", "generate-plan-openai", "generate-plan-gemini"],
)
def test_read_only_commands_load_no_heavy_package(db, args):
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args, "--db", str(db)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stderr.splitlines()[-1])
    assert loaded == {name: False for name in HEAVY}
    answer = json.loads(result.stdout)
    if args[0] == "generate":
        prompts = 3 if "--prompts" in args else 5
        assert (answer["dataset"], answer["prompts"], answer["calls"], answer["answered"]) == (
            "arena",
            prompts,
            prompts,
            0,
        )
    elif args[0] == "judge":
        samples = 4 if "--samples-per-order" not in args else 2
        assert (answer["dataset"], answer["prompts"], answer["calls"]) == ("arena", 5, 5 * 2 * samples)
    else:
        assert (answer["prompts"], answer["responses"]) == (5, 10)


def test_the_probe_sees_a_flow_load_prefect(db):
    """The same probe on a command that runs a flow reports Prefect, so the check above can fail."""
    from prefect.settings import get_current_settings

    env = dict(os.environ, PREFECT_API_URL=str(get_current_settings().api.url))
    result = subprocess.run(
        [sys.executable, "-c", PROBE, "report", "--run", "rate-nope", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert json.loads(result.stderr.splitlines()[-1])["prefect"] is True


@pytest.mark.parametrize(
    "args",
    [
        ["import", "pairwise", "{examples}/pairwise.csv"],
        ["rate", "-j", "my-judge", "--methods", "bt,ne", "--bootstrap", "0"],
    ],
    ids=["import", "rate"],
)
def test_without_a_prefect_api_pipelines_run_without_prefect(tmp_path, args):
    """No Prefect API configured: the command runs its pipeline as plain Python (Prefect not even
    imported), and its run has no flow run id."""
    from pathlib import Path

    import duckdb

    examples = Path(__file__).resolve().parents[1] / "examples" / "import"
    db = tmp_path / "plain.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), EQARENA_PREFECT="auto")
    setup = subprocess.run(
        [sys.executable, "-c", PROBE, "import", "pairwise", str(examples / "pairwise.csv"), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert setup.returncode == 0, setup.stderr
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *[a.format(examples=examples) for a in args], "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stderr.splitlines()[-1])["prefect"] is False
    with duckdb.connect(str(db), read_only=True) as con:
        kinds = con.execute("SELECT kind, flow_run_id FROM runs ORDER BY started_at").fetchall()
    assert [k for k, _ in kinds] == (["import", "import"] if args[0] == "import" else ["import", "rate"])
    assert all(flow_run_id is None for _, flow_run_id in kinds)
