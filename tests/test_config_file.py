"""`--config FILE` for rate / run / refresh: the file's values reach the run, flags override them, a
command's table overrides the top level, and a bad file is one error line naming it, before any work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app

runner = CliRunner()


def cli(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def vicuna_db(tmp_path_factory, prefect_harness):
    db = tmp_path_factory.mktemp("config") / "eqarena.duckdb"
    ingested = cli("ingest", "--dataset", "vicuna80", "--db", db)
    assert ingested.exit_code == 0, ingested.output
    return db


def latest_rate_parameters(db) -> dict:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.cursor().execute("SELECT parameters FROM runs WHERE kind = 'rate' ORDER BY started_at").fetchall()
    return json.loads(rows[-1][0])


def rate_runs(db) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.cursor().execute("SELECT count(*) FROM runs WHERE kind = 'rate'").fetchall()[0][0]


def test_config_values_reach_the_run_and_flags_override_them(tmp_path, vicuna_db):
    config = tmp_path / "eqarena.toml"
    config.write_text(
        f'db = "{vicuna_db}"\nmethods = "ne,bt"\nbootstrap = 0\nseed = 7\n\n'
        '[rate]\njudge = "prd:gpt4"\nseed = 3\n\n[run]\njudge = "prd:claude"\n'
    )
    rated = cli("rate", "--config", config)
    assert rated.exit_code == 0, rated.output
    stored = latest_rate_parameters(vicuna_db)
    # top level (methods, bootstrap), the [rate] table over the top level (seed), [rate] only (judge)
    assert (stored["methods"], stored["bootstrap"], stored["seed"], stored["judges"]) == (
        ["bt", "ne"],
        0,
        3,
        ["prd:gpt4"],
    )
    overridden = cli("rate", "--config", config, "--methods", "cce", "--judge", "prd:claude", "--seed", 11)
    assert overridden.exit_code == 0, overridden.output
    stored = latest_rate_parameters(vicuna_db)
    assert (stored["methods"], stored["judges"], stored["seed"], stored["bootstrap"]) == (
        ["cce"],
        ["prd:claude"],
        11,
        0,
    )


@pytest.mark.parametrize(
    "body, message",
    [
        ('bootstrap = "many"', r"bootstrap = 'many': Invalid value for '--bootstrap'"),
        ("bootstrap = -1", r"bootstrap = -1: Invalid value for '--bootstrap'.*greater than or equal to 0"),
        ("colour = 1", r"unknown key 'colour' \(not an option of rate, run, refresh\)"),
        ('[rate]\nout = "report"', r"\[rate\] 'out' is not an option of rate \(its options: .*bootstrap-time"),
        ("rate = 1", r"\[rate\] must be a table of options"),
        ("bootstrap = ", r"not a TOML file"),
        ('prompt-groups = "bogus"', r"prompt-groups = 'bogus': Invalid value for '--prompt-groups'"),
    ],
)
def test_a_bad_config_is_one_error_naming_the_file_and_writes_nothing(tmp_path, vicuna_db, body, message):
    config = tmp_path / "bad.toml"
    config.write_text(body + "\n")
    before = rate_runs(vicuna_db)
    result = cli("rate", "--config", config, "--db", vicuna_db)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {config}: "), result.stderr
    assert re.search(message, lines[0]), lines[0]
    assert rate_runs(vicuna_db) == before


def test_a_missing_config_file_is_named(tmp_path):
    missing = tmp_path / "nowhere.toml"
    for command in ("rate", "run", "refresh"):
        result = cli(command, "--config", missing)
        assert result.exit_code == 1 and result.stderr.strip() == f"error: {missing}: no such file", result.output


def test_the_main_job_reads_its_own_table_and_the_shared_keys(tmp_path):
    # `out` is run's option, not rate's: a top-level key of another config command is skipped by rate,
    # and a [run] key run lacks is refused; shown without starting the job (an unknown --dataset).
    config = tmp_path / "c.toml"
    config.write_text('out = "report"\n[run]\ndataset = "no-such-source"\n')
    result = cli("run", "--config", config, "--db", tmp_path / "w.duckdb")
    assert result.exit_code == 1 and "no-such-source" in result.stderr, result.output
    config.write_text("[run]\nstyle-control = true\n")
    result = cli("run", "--config", config)
    assert result.exit_code == 1 and "[run] 'style-control' is not an option of run" in result.stderr, result.output


def test_the_readme_example_config_is_accepted(tmp_path, vicuna_db):
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    example = re.search(r"```toml\n(.*?)```", readme, re.S)
    assert example is not None, "README shows no TOML config"
    config = tmp_path / "eqarena.toml"
    config.write_text(example.group(1))
    rated = cli("rate", "--config", config, "--db", vicuna_db, "--bootstrap", 0)
    assert rated.exit_code == 0, rated.output
    stored = latest_rate_parameters(vicuna_db)
    assert (stored["methods"], stored["judges"], stored["missing"]) == (
        ["bt", "ne", "cce"],
        ["prd:gpt4", "prd:claude"],
        "impute",
    )
