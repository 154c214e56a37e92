"""`eqarena export`: a rate run's model ratings as CSV, JSON and markdown, checked against the stored
ratings read straight from the warehouse, in the headline method's order; one-line errors."""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.report.export import export_text

runner = CliRunner()


@pytest.fixture(scope="module")
def rated(tmp_path_factory, prefect_harness):
    db = tmp_path_factory.mktemp("export") / "w.duckdb"
    for args in (("ingest",), ("rate", "--bootstrap", "16", "--methods", "bt,ne,cce")):
        done = runner.invoke(app, [*args, "--db", str(db)])
        assert done.exit_code == 0, done.output
    con = duckdb.connect(str(db), read_only=True)
    run_id = con.execute("SELECT run_id FROM runs WHERE kind = 'rate' AND status = 'ok'").fetchone()[0]
    stored = {
        (method, model): (rank, rating)
        for method, model, rank, rating in con.execute(
            "SELECT method, action, rank, rating FROM ratings WHERE run_id = ? AND player = 'king'", [run_id]
        ).fetchall()
    }
    top1 = dict(
        con.execute(
            "SELECT method || '/' || model_id, p_top1 FROM rating_intervals WHERE run_id = ? AND scheme = 'prompts'",
            [run_id],
        ).fetchall()
    )
    con.close()
    return db, run_id, stored, top1


def _export(db, *args: str):
    done = runner.invoke(app, ["export", "--db", str(db), *args])
    assert done.exit_code == 0, done.output
    return done.stdout


def test_csv_and_json_hold_the_stored_ratings_in_the_headline_order(rated, tmp_path):
    db, run_id, stored, top1 = rated
    board = pl.read_csv(_export(db, "--format", "csv").encode())
    ne_order = sorted((rank, model) for (method, model), (rank, _) in stored.items() if method == "ne")
    assert board["model"].to_list() == [model for _, model in ne_order]
    for row in board.iter_rows(named=True):
        for method in ("bt", "ne", "cce"):
            rank, rating = stored[method, row["model"]]
            assert row[f"{method}_rank"] == rank and row[f"{method}_rating"] == pytest.approx(rating, abs=1e-12)
        assert row["ne_p_top1"] == pytest.approx(top1[f"ne/{row['model']}"], abs=1e-12)
        assert row["bt_p_top1"] is None  # BT has no rank probabilities
    document = json.loads(_export(db, "--format", "json", "--run", run_id))
    assert (document["run_id"], document["dataset"], document["headline"]) == (run_id, "vicuna80", "ne")
    assert [m["model"] for m in document["models"]] == board["model"].to_list()
    for entry in document["models"]:
        assert entry["cce"]["rating"] == pytest.approx(stored["cce", entry["model"]][1], abs=1e-12)
        assert entry["ne"]["ci_lo"] <= entry["ne"]["rating"] + 1e-9 <= entry["ne"]["ci_hi"] + 2e-9
    out = tmp_path / "board.md"
    done = runner.invoke(app, ["export", "--db", str(db), "--format", "markdown", "--out", str(out)])
    assert done.exit_code == 0, done.output
    lines = out.read_text().splitlines()
    assert lines[2].startswith("| rank | model | NE | 95% interval | P(top 1) | rank by BT | rank by CCE |")
    table = [line for line in lines[4:] if line.startswith("| ")]
    assert [line.split(" | ")[1] for line in table] == board["model"].to_list()
    # The top NE model rates 0, so its interval ends at 0: it reads "0 (max)" or, with all replicates at 0, "no
    # spread", never as a range ending at +0.000; the note under the table says what these mean.
    special = [line for line in table if "0 (max)]" in line or "no spread" in line]
    assert special and not any(", +0.000]" in line for line in table)
    assert lines[-1].startswith("In the interval column, ")
    assert ("no spread: the central 95%" in lines[-1]) == any("no spread" in line for line in table)


def test_errors_are_one_line(rated, tmp_path):
    db = rated[0]
    for args, words in (
        (("--format", "xml"), "--format must be one of csv, json, markdown"),
        (("--run", "nope"), "run 'nope' has no model ratings"),
    ):
        done = runner.invoke(app, ["export", "--db", str(db), *args])
        assert done.exit_code != 0 and words in done.output, done.output
    unrated = tmp_path / "unrated.duckdb"
    assert runner.invoke(app, ["ingest", "--db", str(unrated)]).exit_code == 0
    done = runner.invoke(app, ["export", "--db", str(unrated)])
    assert done.exit_code == 1 and "no finished rate run" in done.output, done.output


@pytest.mark.unit
def test_markdown_escapes_pipes_and_marks_what_a_method_lacks():
    rows = pl.DataFrame(
        {
            "method": ["ne", "ne", "bt", "bt"],
            "action": ["a|b", "c", "a|b", "c"],
            "rank": [2, 1, 1, 2],
            "rating": [-0.25, 0.0, 1100.0, 900.0],
            "ci_lo": [None, -0.1, 1090.0, 890.0],
            "ci_hi": [None, 0.1, 1110.0, 910.0],
            "p_top1": [None, 0.75, None, None],
        }
    )
    lines = export_text(rows, "markdown", "r1", "d").splitlines()
    assert lines[4] == "| 1 | c | +0.000 | [-0.100, +0.100] | 75% | 2 |"
    assert lines[5] == "| 2 | a\\|b | -0.250 | – | – | 1 |"
