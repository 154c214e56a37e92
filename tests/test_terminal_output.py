"""Names and texts from users' files cannot drive the terminal: control characters are printed as
escapes, and a name is never read as rich markup (eqarena/messages.py `terminal_safe`, cli/output.py)."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.messages import bounded, terminal_safe

pytestmark = pytest.mark.unit

runner = CliRunner()
HOSTILE = "evil\x1b[2J\x1b]0;pwned\x07\x9b31m[bold]x"


def test_control_characters_become_escapes_and_the_rest_stays():
    assert terminal_safe(HOSTILE) == "evil\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m[bold]x"
    assert terminal_safe("tab\tand\nnewline, ünïcödé 模型") == "tab\tand\nnewline, ünïcödé 模型"
    assert terminal_safe("cr\rdel\x7f") == "cr\\rdel\\x7f"
    assert "\x1b" not in bounded(f"unknown model {HOSTILE!s}")


def test_a_hostile_model_name_reaches_the_rate_output_escaped(tmp_path):
    table = tmp_path / "pairwise.csv"
    models = ["atlas-7b", HOSTILE, "cirrus-70b"]
    with open(table, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["prompt_id", "model_a", "model_b", "verdict", "judge", "sample"])
        for p in range(6):
            for a in range(3):
                for b in range(a + 1, 3):
                    writer.writerow([f"q{p}", models[a], models[b], ["A>B", "B>A", "A=B"][(p + a + b) % 3], "j", 0])
    db = str(tmp_path / "w.duckdb")
    imported = runner.invoke(app, ["import", "pairwise", str(table), "--dataset", "hostile", "--db", db])
    assert imported.exit_code == 0, imported.output
    rated = runner.invoke(app, ["rate", "-d", "hostile", "--orders", "any", "--bootstrap", "0", "--db", db])
    assert rated.exit_code == 0, rated.output
    assert "evil\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m[bold]x" in rated.output
    assert not any(c in rated.output for c in "\x1b\x07\x9b")
