"""Commands that only read the warehouse (`status`, `judge --plan`) start no Prefect API and load
neither Prefect, JAX nor a provider SDK: they answer in about a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app

from ingest_inputs import write_arena_dir

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


@pytest.mark.parametrize("args", [
    ["status", "--json"],
    ["judge", "-j", "openai:gpt-4o-mini", "--plan", "--json"],
    ["judge", "-j", "gemini:gemini-2.0-flash", "--plan", "--json", "--samples-per-order", "2"],
], ids=["status", "plan-openai", "plan-gemini"])
def test_read_only_commands_load_no_heavy_package(db, args):
    result = subprocess.run([sys.executable, "-c", PROBE, *args, "--db", str(db)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stderr.splitlines()[-1])
    assert loaded == {name: False for name in HEAVY}
    answer = json.loads(result.stdout)
    if args[0] == "judge":
        samples = 4 if "--samples-per-order" not in args else 2
        assert (answer["dataset"], answer["prompts"], answer["calls"]) == ("arena", 5, 5 * 2 * samples)
    else:
        assert (answer["prompts"], answer["responses"]) == (5, 10)


def test_the_probe_sees_a_flow_load_prefect(db):
    """The same probe on a command that runs a flow reports Prefect, so the check above can fail."""
    from prefect.settings import get_current_settings

    env = dict(os.environ, PREFECT_API_URL=str(get_current_settings().api.url))
    result = subprocess.run([sys.executable, "-c", PROBE, "report", "--run", "rate-nope", "--db", str(db)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert json.loads(result.stderr.splitlines()[-1])["prefect"] is True
