"""Every `--help` reads at 80 columns: option names whole, placeholders instead of Python types."""

from __future__ import annotations

import re

import pytest
import typer.main
from typer.testing import CliRunner

from eqarena.cli.app import app

pytestmark = pytest.mark.unit


def _commands(group, path=()):
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_at_80_columns_shows_every_option_whole(path, command):
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    words = set(re.findall(r"--[a-z][a-z-]*", shown.output))
    for param in command.params:
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("--"):
                assert name in words, f"{' '.join(path)}: {name} is cut or missing"
    assert not re.search(r"<(str|bool|int|float|list|Path|int range|float range)\b", shown.output), shown.output


def test_version():
    from importlib.metadata import version

    shown = CliRunner().invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"eqarena {version('eqarena')}"


def test_log_level_shows_eqarena_and_prefect_log_lines_from_that_level(monkeypatch):
    """`--log-level info` (any case) sets Prefect's level for the command and sends eqarena's own log lines
    from INFO on to standard error, once however often it is given; an unknown level is refused by name."""
    import logging
    import os

    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")  # restored after the test, whatever the CLI sets
    logger = logging.getLogger("eqarena")
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    runner = CliRunner()
    for _ in range(2):
        shown = runner.invoke(app, ["--log-level", "info", "methods"])
        assert shown.exit_code == 0, shown.output
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "INFO" and logger.level == logging.INFO
    assert len(logger.handlers) == 1
    refused = runner.invoke(app, ["--log-level", "loud", "methods"])
    assert refused.exit_code == 2 and "expected one of DEBUG, INFO, WARNING, ERROR" in refused.output
