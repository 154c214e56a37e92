"""The report's read path without Prefect: a rate run and both analyses written by the steps' own
code into a real DuckDB warehouse, read back through every typed reader and rendered. A renamed or
missing column fails here (the readers build their row types by column name), in the fast lane."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime, timezone

import pytest

from eqarena import warehouse
from eqarena.options import BootstrapOptions, CloneOptions, RateOptions
from eqarena.report.render import SECTIONS, render_html
from eqarena.solvers import synthetic_king_tensor
from eqarena.tasks.analysis_io import read_rate_game, write_analysis_run
from eqarena.tasks.assemble import assemble
from eqarena.tasks.clone_analysis import clone_frames, run_clone_experiment
from eqarena.tasks.rate import bootstrap_equilibria, rate_method, rate_parameters, write_run
from eqarena.tasks.report import load_report_data
from eqarena.tasks.runs import new_run_id
from eqarena.warehouse import ratings as store
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments
from eqarena.warehouse.runs import RunRecord

MODELS = ("m-a", "m-b", "m-c", "m-d")
METHODS = ("bt", "ne", "cce")


@pytest.fixture(scope="module")
def rated(tmp_path_factory):
    """A 10-prompt x 4-model warehouse judged from a synthetic game, rated by bt, ne and cce with a small
    bootstrap, with a clone analysis; written by the tasks' functions, no flow run."""
    db = str(tmp_path_factory.mktemp("render") / "w.duckdb")
    u = synthetic_king_tensor(10, len(MODELS), seed=2)
    con = warehouse.connect(db)
    con.execute("INSERT INTO models (model_id, family) SELECT unnest($1::VARCHAR[]), 'm'", [list(MODELS)])
    rows = []
    for p in range(10):
        con.execute("INSERT INTO prompts (dataset, prompt_id, text) VALUES ('syn', ?, ?)", [str(p), f"prompt {p}"])
        for i, a in enumerate(MODELS):
            for j, b in enumerate(MODELS):
                if i != j:
                    rows.append(JudgmentRow("judge-s", "t", "syn", str(p), a, b, 0, "ok", score=float(u[p, i, j])))
    insert_judgments(con, rows)
    con.close()

    options = RateOptions(dataset="syn", judges=("judge-s",), methods=METHODS, bootstrap=BootstrapOptions(4))
    assembled = assemble.fn(db, options)
    solved = [rate_method.fn(assembled.tensor, assembled.battles, m, 4, 0) for m in METHODS]
    intervals, _ = bootstrap_equilibria.fn(assembled.tensor, assembled.battles, solved, options.bootstrap)
    run = RunRecord(run_id=new_run_id("rate"), kind="rate", started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
                    finished_at=datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc),
                    parameters=rate_parameters(options, METHODS, assembled.tensor.judges),
                    data_fingerprint=assembled.tensor.fingerprint, message="complete")
    write_run.fn(db, run, assembled, solved, intervals)

    game = read_rate_game.fn(db, run.run_id)
    clones = CloneOptions(target="m-a", ns_exact=(0, 20), ns_noisy=(0,), methods=METHODS)
    frames = clone_frames(game, clones, run_clone_experiment.fn(game, clones))
    write_analysis_run.fn(db, RunRecord(run_id=new_run_id("clones"), kind="clones", started_at=run.started_at,
                                        finished_at=run.finished_at, parameters={"source_run_id": run.run_id}),
                          frames)
    return db, run.run_id


def test_every_reader_builds_its_rows_from_the_stored_columns(rated):
    db, run_id = rated
    con = warehouse.connect(db, read_only=True)
    try:
        ratings = store.read_ratings(con, run_id)
        equilibria = store.read_equilibria(con, run_id)
        intervals = store.read_rating_intervals(con, run_id)
        readers = [ratings, equilibria, store.read_marginals(con, run_id), intervals,
                   store.read_rank_probabilities(con, run_id), store.read_contributions_by_family(con, run_id),
                   store.read_payoffs(con, run_id, ["0"])]
        coverage = store.read_coverage(con, run_id)
        run = store.read_run(con, run_id)
    finally:
        con.close()
    for rows in readers:
        assert rows and all(getattr(rows[0], f.name) is not None or f.name in _NULLABLE for f in fields(rows[0]))
    assert {r.method for r in ratings} == set(METHODS)
    assert {e.method for e in equilibria} == {"ne", "cce"} and all(e.exploitability <= 1e-6 for e in equilibria)
    assert {(e.method, p) for e in equilibria for p in e.support} == {(m, p) for m in ("ne", "cce")
                                                                      for p in ("prompt", "king", "rebel")}
    assert len(intervals) == 2 * 2 * len(MODELS)  # (ne, cce) x (prompts, judgments) x models
    assert len(coverage.pairs) == 12 and coverage.imputed_cells == 0 and coverage.inputs[0].judgments == 120
    assert run.kind == "rate" and run.parameters["methods"] == list(METHODS)


_NULLABLE = {"mass", "ci_lo", "ci_hi", "steps", "final_temperature", "joint_cells", "joint_mass_omitted",
             "max_exploitability"}


def test_the_report_renders_every_section_from_the_readers(rated):
    db, run_id = rated
    data = load_report_data.fn(db, run_id)
    html = render_html(data)
    for key in SECTIONS:
        assert f'<section id="{key}">' in html, key
    assert '<section id="clones">' in html and '<section id="risk">' not in html
    assert data.top_prompts and all(p in html for p in data.top_prompts)
    bt = [r for r in data.ratings if r.method == "bt" and r.player == "king"]
    assert len(bt) == len(MODELS) and all(r.ci_lo <= r.ci_hi for r in bt)
    assert f"{bt[0].rating:.3f}" in html  # the model-rating section lists BT with its interval
