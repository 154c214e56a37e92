"""The robustness analyses as flows on a real rate run (bundled PRD Vicuna-80, judge prd:gpt4): what
they write to DuckDB, that the writes are whole or absent, that a seed reproduces them, the report
sections, and the `eqarena analyze` command line."""

from __future__ import annotations

import itertools
import re
from datetime import datetime

import numpy as np
import polars as pl
import pytest
from conftest import query
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.options import BootstrapOptions, CloneOptions, IngestOptions, RateOptions, RiskOptions
from eqarena.solvers import koth_game
from eqarena.warehouse.analyses import read_run_game, write_analysis
from eqarena.warehouse.runs import RunRecord

pytestmark = pytest.mark.unit

MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")
METHODS = ("bt", "ne", "cce", "ne-shannon", "cce-shannon")
SMALL = dict(ns_exact=[0, 40, 80], ns_noisy=[0, 40])


@pytest.fixture(scope="module")
def rated(tmp_path_factory, prefect_harness):
    from eqarena.flows import ingest_flow, rate_flow

    db = str(tmp_path_factory.mktemp("analyses") / "eqarena.duckdb")
    ingest_flow(IngestOptions(source="vicuna80"), db)
    options = RateOptions(dataset="vicuna80", judges=["prd:gpt4"], bootstrap=BootstrapOptions(replicates=0))
    return db, rate_flow(options, db).run_id


@pytest.fixture(scope="module")
def clones(rated):
    from eqarena.flows import clones_flow

    db, rate_run = rated
    return clones_flow(CloneOptions(**SMALL), rate_run, db)


@pytest.fixture(scope="module")
def risk(rated):
    from eqarena.flows import risk_flow

    db, rate_run = rated
    return risk_flow(RiskOptions(equilibria=16, seed=3), rate_run, db)


def _frame(db, sql, params=()):
    con = warehouse.connect(db, read_only=True)
    try:
        return con.sql(sql, params=list(params)).pl()
    finally:
        con.close()


def test_clone_rows_cover_every_variant_count_method_and_model(rated, clones):
    db, rate_run = rated
    rows = _frame(db, "SELECT * FROM clone_robustness WHERE run_id = ?", [clones.run_id])
    cells = {(r["variant"], r["n_clones"], r["method"], r["model_id"]) for r in rows.iter_rows(named=True)}
    expected = {
        (v, n, m, x)
        for v, ns in (("exact", SMALL["ns_exact"]), ("noisy", SMALL["ns_noisy"]))
        for n in ns
        for m in METHODS
        for x in MODELS
    }
    assert cells == expected and rows.height == len(expected)
    assert set(rows["source_run_id"]) == {rate_run} and set(rows["target"]) == {"gpt4"}
    assert set(rows["adversary_lambda"]) == {10.0} and set(rows["seed"]) == {0}
    # the equilibria are exact; bt has none
    assert (
        rows.filter(pl.col("method") == "bt")["exploitability"].null_count()
        == rows.filter(pl.col("method") == "bt").height
    )
    assert rows.filter(pl.col("method") != "bt")["exploitability"].max() <= 1e-6
    assert query(db, "SELECT kind, parameters ->> 'source_run_id' FROM runs WHERE run_id = ?", [clones.run_id]) == [
        ("clones", rate_run)
    ]


def test_exact_copies_leave_ne_and_cce_ranks_and_move_bt(rated, clones):
    db, _ = rated
    ranks = {
        (m, n): r
        for m, n, r in query(
            db,
            "SELECT method, n_clones, list(rank ORDER BY model_id) FROM clone_robustness "
            "WHERE run_id = ? AND variant = 'exact' GROUP BY ALL",
            [clones.run_id],
        )
    }
    for method in ("ne", "cce"):
        assert ranks[(method, 40)] == ranks[(method, 80)] == ranks[(method, 0)]
    assert ranks[("bt", 80)] != ranks[("bt", 0)]
    verdicts = dict(query(db, "SELECT method, verdict FROM clone_verdicts WHERE run_id = ?", [clones.run_id]))
    assert set(verdicts) == set(METHODS)
    assert verdicts["ne"].startswith("NE: exact: ranks unchanged up to 80 clones")
    assert re.match(r"BT: exact: gpt4 fell from 1 to \d", verdicts["bt"])


def test_copies_are_named_and_never_enter_the_prompts_table(rated, clones):
    db, _ = rated
    copies = query(
        db,
        "SELECT draw, prompt_id, source_prompt_id FROM clone_prompts WHERE run_id = ? ORDER BY draw",
        [clones.run_id],
    )
    assert [d for d, _, _ in copies] == list(range(1, 81))
    assert len({p for _, p, _ in copies}) == 80
    prompts = {p for (p,) in query(db, "SELECT prompt_id FROM prompts")}
    assert len(prompts) == 80
    for _, prompt_id, source in copies:
        assert re.fullmatch(rf"clone:{re.escape(source)}:\d+", prompt_id) and source in prompts


def test_a_seed_reproduces_the_analysis(rated, clones):
    from eqarena.flows import clones_flow

    db, rate_run = rated
    again = clones_flow(CloneOptions(**SMALL), rate_run, db)
    columns = "variant, n_clones, method, model_id, rank, rating"
    first = query(db, f"SELECT {columns} FROM clone_robustness WHERE run_id = ? ORDER BY ALL", [clones.run_id])
    second = query(db, f"SELECT {columns} FROM clone_robustness WHERE run_id = ? ORDER BY ALL", [again.run_id])
    assert again.run_id != clones.run_id and first == second
    draws = "SELECT source_prompt_id FROM clone_prompts WHERE run_id = ? ORDER BY draw"
    assert query(db, draws, [clones.run_id]) == query(db, draws, [again.run_id])
    other = clones_flow(CloneOptions(seed=1, ns_exact=[0, 80], ns_noisy=[0]), rate_run, db)
    assert query(db, draws, [other.run_id]) != query(db, draws, [clones.run_id])


def test_pure_nash_equilibria_match_brute_force(rated, risk):
    db, rate_run = rated
    con = warehouse.connect(db, read_only=True)
    try:
        game = read_run_game(con, rate_run)
    finally:
        con.close()
    payoffs = koth_game(game.u_king).payoffs  # dense (3, P, M, M)
    p, m, _ = game.u_king.shape
    expected = set()
    for a, k, r in itertools.product(range(p), range(m), range(m)):
        if (
            payoffs[0, a, k, r] >= payoffs[0, :, k, r].max()
            and payoffs[1, a, k, r] >= payoffs[1, a, :, r].max()
            and payoffs[2, a, k, r] >= payoffs[2, a, k, :].max()
        ):
            expected.add((game.prompts[a], game.models[k], game.models[r]))
    stored = set(query(db, "SELECT prompt_id, king, rebel FROM pure_nash_equilibria WHERE run_id = ?", [risk.run_id]))
    assert stored == expected and len(stored) > 0


def test_risk_rows_rank_distinct_equilibria_with_the_selected_first(rated, risk):
    db, rate_run = rated
    rows = _frame(db, "SELECT * FROM risk_dominance WHERE run_id = ? ORDER BY equilibrium", [risk.run_id])
    k = rows.height
    assert 2 <= k <= 16
    assert rows["equilibrium"].to_list() == list(range(k))
    assert rows["is_selected"].to_list() == [True] + [False] * (k - 1)
    assert rows["exploitability"].max() <= 1e-2
    assert set(rows["source_run_id"]) == {rate_run}
    for prior in ("uniform", "updated"):
        total = rows.select(pl.sum_horizontal(f"prompt_{prior}", f"king_{prior}", f"rebel_{prior}")).to_series()
        np.testing.assert_allclose(total.to_numpy(), rows[f"sum_{prior}"].to_numpy(), atol=1e-12)
        expected = [1 + int((rows[f"sum_{prior}"] > s).sum()) for s in rows[f"sum_{prior}"]]
        assert rows[f"rank_{prior}"].to_list() == expected
    # equilibrium 0 is the rate run's NE: same king marginal as stored by the rate run
    selected = dict(
        query(
            db,
            "SELECT action, mass FROM risk_equilibrium_ratings WHERE run_id = ? AND "
            "equilibrium = 0 AND player = 'king'",
            [risk.run_id],
        )
    )
    stored = dict(
        query(
            db,
            "SELECT action, mass FROM equilibrium_marginals WHERE run_id = ? AND method = 'ne' AND player = 'king'",
            [rate_run],
        )
    )
    assert selected.keys() == stored.keys()
    assert all(abs(selected[m] - stored[m]) < 1e-12 for m in stored)
    # the kept equilibria's model ratings differ pairwise
    wide = _frame(
        db,
        "SELECT equilibrium, list(rating ORDER BY action) AS r FROM risk_equilibrium_ratings "
        "WHERE run_id = ? AND player = 'king' GROUP BY equilibrium ORDER BY equilibrium",
        [risk.run_id],
    )
    ratings = np.array(wide["r"].to_list())
    gaps = np.abs(ratings[:, None, :] - ratings[None, :, :]).max(axis=2)
    assert gaps[~np.eye(k, dtype=bool)].min() > 1e-3
    counts = query(
        db, "SELECT player, count(*) FROM risk_equilibrium_ratings WHERE run_id = ? GROUP BY player", [risk.run_id]
    )
    assert dict(counts) == {"prompt": 80 * k, "king": 5 * k, "rebel": 5 * k}


def test_report_shows_both_sections_only_when_the_tables_exist(rated, clones, risk, tmp_path):
    from eqarena.flows import rate_flow, report_flow

    db, rate_run = rated
    text = report_flow(rate_run, str(tmp_path), db).read_text(encoding="utf-8")
    assert '<section id="clones">' in text and '<section id="risk">' in text
    assert 'data-figure="clone-ranks"' in text and 'data-figure="risk"' in text
    assert re.search(
        r"The selected NE \(equilibrium 0, the limiting logit equilibrium\) is the (\d+\w\w )?least "
        r"risky of \d+ Nash equilibria",
        text,
    )
    page = re.sub(r"<script\b.*?</script>", "", text, flags=re.S).split("<footer")[0]  # plotly.js is inlined
    assert "http://" not in page and "https://" not in page and not re.search(r"<script[^>]*\ssrc=", text)
    plain = rate_flow(
        RateOptions(
            dataset="vicuna80", judges=["prd:gpt4"], methods=["bt", "ne"], bootstrap=BootstrapOptions(replicates=0)
        ),
        db,
    )
    text = report_flow(plain.run_id, str(tmp_path), db).read_text(encoding="utf-8")
    assert '<section id="clones">' not in text and '<section id="risk">' not in text


def test_a_failed_write_leaves_nothing(rated):
    db, rate_run = rated
    run = RunRecord(
        run_id="clones-broken", kind="clones", started_at=datetime(2026, 1, 1), parameters={"source_run_id": rate_run}
    )
    good = pl.DataFrame({"method": ["ne"], "verdict": ["NE: fine"]})
    bad = pl.DataFrame(
        {
            "source_run_id": [rate_run],
            "target": ["gpt4"],
            "adversary_lambda": [10.0],
            "seed": [0],
            "variant": ["sideways"],
            "n_clones": [0],
            "method": ["ne"],
            "model_id": ["gpt4"],
            "rank": [1],
            "rating": [0.0],
            "exploitability": [0.0],
        }
    )
    con = warehouse.connect(db)
    try:
        with pytest.raises(Exception, match="CHECK|Constraint"):
            write_analysis(con, run, {"clone_verdicts": good, "clone_robustness": bad})
        with pytest.raises(ValueError, match="a clones run writes"):
            write_analysis(con, run, {"risk_dominance": good})
    finally:
        con.close()
    assert query(db, "SELECT count(*) FROM runs WHERE run_id = 'clones-broken'") == [(0,)]
    assert query(db, "SELECT count(*) FROM clone_verdicts WHERE run_id = 'clones-broken'") == [(0,)]


def test_analyze_clones_command(rated, tmp_path):
    db, rate_run = rated
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "analyze",
            "clones",
            "--run",
            rate_run,
            "--n",
            "0,20",
            "--n-noisy",
            "0",
            "--target",
            "claude",
            "--db",
            db,
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "NE: exact: ranks unchanged up to 20 clones" in result.stdout
    run_id = re.search(r"clones run (clones-\S+) \(of rate run " + re.escape(rate_run), result.stdout).group(1)
    assert query(db, "SELECT DISTINCT target FROM clone_robustness WHERE run_id = ?", [run_id]) == [("claude",)]
    report = tmp_path / f"eqarena-{rate_run}.html"  # the rate run's report, rewritten to show the analysis
    assert f"HTML report updated: {report}" in result.stdout
    assert run_id in report.read_text(encoding="utf-8")
    bad = runner.invoke(app, ["analyze", "clones", "--n", "0,many", "--db", db])
    assert bad.exit_code == 1
    assert bad.stderr.strip() == "error: --n takes comma-separated whole numbers, e.g. 0,250,500; got '0,many'"
    unknown = runner.invoke(app, ["analyze", "clones", "--run", rate_run, "--target", "gpt5", "--db", db])
    assert unknown.exit_code == 1
    assert unknown.stderr.strip() == (
        f"error: --target 'gpt5' is not a model of rate run {rate_run} (models: bard, claude, gpt35, gpt4, vicuna-13b)"
    )
    missing = runner.invoke(app, ["analyze", "risk", "--run", "rate-nope", "--db", db])
    assert missing.exit_code == 1 and "no finished rate run 'rate-nope'" in missing.stderr
    assert runner.invoke(app, ["run", "--analyses", "clones,bogus", "--db", db]).stderr.strip() == (
        "error: --analyses: unknown analysis bogus (choose from clones, risk)"
    )


def test_analyze_defaults_to_the_latest_rate_run_of_the_dataset(rated, tmp_path, prefect_harness):
    import shutil

    from eqarena.flows import import_flow, rate_flow
    from eqarena.options import ImportFormat, ImportOptions

    source, _ = rated
    db = str(tmp_path / "two-datasets.duckdb")
    shutil.copy(source, db)
    ((rate_run,),) = query(
        db,
        "SELECT run_id FROM rate_runs WHERE dataset = 'vicuna80' "
        "ORDER BY finished_at DESC, started_at DESC, run_id DESC LIMIT 1",
    )  # the newest
    toy = tmp_path / "toy.csv"
    toy.write_text(
        "prompt_id,model_a,model_b,score\n"
        + "".join(
            f"p{p},{a},{b},{s}\np{p},{b},{a},{-s}\n"
            for p in range(3)
            for a, b, s in (("x", "y", 1), ("y", "z", 1), ("x", "z", -1))
        )
    )
    import_flow(ImportOptions(fmt=ImportFormat.PAIRWISE, paths=(str(toy),), dataset="toy"), db)
    toy_run = rate_flow(RateOptions(dataset="toy", bootstrap=BootstrapOptions(replicates=0)), db).run_id
    runner = CliRunner()
    picked = runner.invoke(app, ["analyze", "risk", "-d", "vicuna80", "-k", "3", "--db", db, "--out", str(tmp_path)])
    assert picked.exit_code == 0, picked.output
    assert f"(of rate run {rate_run}," in picked.stdout and toy_run not in picked.stdout
    ambiguous = runner.invoke(app, ["analyze", "risk", "-k", "3", "--db", db, "--out", str(tmp_path)])
    assert ambiguous.exit_code == 1 and "toy" in ambiguous.stderr and "vicuna80" in ambiguous.stderr


def test_the_game_handed_to_analyses_before_the_write_is_the_one_read_back_after(tmp_path):
    """The main job computes its analyses while the bootstrap runs, from the rate run's solves in memory:
    game, selected NE and clone target are the ones `analyze-*` read from the written run."""
    from eqarena.pipelines.ingest import ingest
    from eqarena.pipelines.rate import rate
    from eqarena.tasks.analysis_io import (
        best_king,
        king_rows,
        read_rate_game,
        read_selected_equilibrium,
        top_model,
        unwritten_marginals,
        unwritten_rate_game,
    )

    db = str(tmp_path / "w.duckdb")
    ingest(IngestOptions(source="vicuna80"), db)
    seen = []
    options = RateOptions(dataset="vicuna80", judges=["prd:gpt4"], bootstrap=BootstrapOptions(replicates=0))
    run_id = rate(options, db, on_solved=seen.append).run_id
    (solved,) = seen
    assert solved.run_id == run_id

    before, after = unwritten_rate_game(run_id, solved.tensor, solved.methods), read_rate_game(db, run_id)
    assert (before.run_id, before.dataset, before.prompts, before.models, before.methods) == (
        after.run_id,
        after.dataset,
        after.prompts,
        after.models,
        after.methods,
    )
    assert before.prompts != tuple(sorted(before.prompts))  # natural order ("2" before "10"), not the string sort
    np.testing.assert_array_equal(before.u_king, after.u_king)
    ne = next(s for s in solved.solved if s.method == "ne")
    for x, y in zip(
        unwritten_marginals(before, solved.tensor, ne.equilibrium), read_selected_equilibrium(db, after, "ne")
    ):
        np.testing.assert_array_equal(x, y)
    assert best_king(king_rows([r for s in solved.solved for r in s.ratings]), run_id) == top_model(db, run_id)


def test_run_game_orders_prompts_naturally_and_models_by_name():
    from eqarena.warehouse.analyses import run_game

    prompts, models = ("10", "b", "2", "a"), ("zeta", "alpha", "mu")
    u = np.arange(4 * 3 * 3, dtype=float).reshape(4, 3, 3)
    game = run_game("r", "d", ("ne",), prompts, models, u)
    assert game.prompts == ("2", "10", "a", "b") and game.models == ("alpha", "mu", "zeta")
    for p, i, j in itertools.product(range(4), range(3), range(3)):
        original = u[prompts.index(game.prompts[p]), models.index(game.models[i]), models.index(game.models[j])]
        assert game.u_king[p, i, j] == original
