"""The rate flow on the real PRD Vicuna-80 judgments and on synthetic incomplete data: what it writes
to DuckDB, checked against independent computations from the source CSV and from the stored tensor."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest
from typer.testing import CliRunner

from eqarena import warehouse
from eqarena.cli.app import app
from eqarena.options import BootstrapOptions, IngestOptions, RateOptions
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments
from eqarena.warehouse.tensor import IncompleteTensorError

MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")
EQ_METHODS = ("ne", "cce", "ne-shannon", "cce-shannon")


def prd_mean_payoffs(csv_path, judges: set[str]) -> dict[str, float]:
    """Mean over prompts and opponents of the position-balanced payoff, straight from the source CSV
    (three-class: 1 = position 1 better, 2 = position 2 better, 3 = tie); judges weighted equally."""
    score = {"1": 1.0, "2": -1.0, "3": 0.0}
    per_judge = defaultdict(dict)
    with csv_path.open() as f:
        for row in csv.DictReader(f):
            if row["judge"] in judges and not row["source_file"].startswith("answer-"):
                key = (row["question_id"], row["model_pos1"], row["model_pos2"])
                per_judge[row["judge"]][key] = score[row["score"]]
    u = defaultdict(list)
    for cells in per_judge.values():
        for (q, a, b), s in cells.items():
            u[(q, a, b)].append(0.5 * (s - cells[(q, b, a)]))
    means = defaultdict(list)
    for (_q, a, _b), values in u.items():
        means[a].append(sum(values) / len(values))
    return {m: sum(v) / len(v) for m, v in means.items()}


@pytest.fixture(scope="module")
def prd_csv(source_data):
    """The source CSV of all PRD ratings."""
    return source_data / "prd_vicuna80" / "judgments_long.csv"


@pytest.fixture(scope="module")
def vicuna(prefect_harness, tmp_path_factory):
    from eqarena.flows import ingest_flow, rate_flow

    db = str(tmp_path_factory.mktemp("rate") / "eqarena.duckdb")
    ingest_flow(IngestOptions(source="vicuna80"), db)
    result = rate_flow(
        RateOptions(dataset="vicuna80", judges=["prd:gpt4"], bootstrap=BootstrapOptions(replicates=50)), db
    )
    return db, result


def _query(db, sql, params=()):
    con = warehouse.connect(db, read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def test_every_method_rates_all_models_and_prompts(vicuna):
    db, result = vicuna
    counts = dict(
        ((m, p), n)
        for m, p, n in _query(
            db, "SELECT method, player, count(*) FROM ratings WHERE run_id = ? GROUP BY ALL", [result.run_id]
        )
    )
    assert counts.pop(("bt", "king")) == 5
    for method in EQ_METHODS:
        assert counts.pop((method, "king")) == 5
        assert counts.pop((method, "rebel")) == 5
        assert counts.pop((method, "prompt")) == 80
    assert counts == {}
    assert result.shape == (80, 5, 5) and set(result.exploitability) == set(EQ_METHODS)


def test_mean_payoffs_reproduce_the_prd_data(vicuna, prd_csv):
    db, result = vicuna
    stored = dict(_query(db, "SELECT model_id, mean_payoff FROM model_mean_payoffs WHERE run_id = ?", [result.run_id]))
    reference = prd_mean_payoffs(prd_csv, {"gpt4"})
    assert set(stored) == set(reference) == set(MODELS)
    for model in MODELS:
        assert stored[model] == pytest.approx(reference[model], abs=1e-12)
    assert {m: round(v, 3) for m, v in stored.items()} == {
        "gpt4": 0.713,
        "claude": 0.417,
        "vicuna-13b": -0.303,
        "gpt35": -0.316,
        "bard": -0.511,
    }


def test_bradley_terry_orders_a_balanced_round_robin_by_mean_payoff(vicuna):
    # Every pair meets equally often here, so the BT maximum-likelihood order is the order of total score.
    db, result = vicuna
    rows = _query(
        db,
        "SELECT action, rank, rating, ci_lo, ci_hi FROM ratings WHERE run_id = ? AND method = 'bt' ORDER BY rank",
        [result.run_id],
    )
    assert [r[0] for r in rows] == ["gpt4", "claude", "vicuna-13b", "gpt35", "bard"]
    assert [r[1] for r in rows] == [1, 2, 3, 4, 5]
    for _, _, rating, lo, hi in rows:
        assert lo < rating < hi


def _stored_game(db, run_id):
    prompts = [r[0] for r in _query(db, "SELECT DISTINCT prompt_id FROM payoffs WHERE run_id = ?", [run_id])]
    prompts.sort(key=int)
    u = np.zeros((len(prompts), len(MODELS), len(MODELS)))
    pi, mi = {p: k for k, p in enumerate(prompts)}, {m: k for k, m in enumerate(MODELS)}
    for p, i, j, v in _query(db, "SELECT prompt_id, king, rebel, u_king FROM payoffs WHERE run_id = ?", [run_id]):
        u[pi[p], mi[i], mi[j]] = v
    return prompts, u


def _marginals(db, run_id, method, prompts):
    rows = _query(
        db, "SELECT player, action, mass FROM equilibrium_marginals WHERE run_id = ? AND method = ?", [run_id, method]
    )
    mass = {(p, a): m for p, a, m in rows}
    return (
        np.array([mass[("prompt", p)] for p in prompts]),
        np.array([mass[("king", m)] for m in MODELS]),
        np.array([mass[("rebel", m)] for m in MODELS]),
    )


def test_stored_nash_ratings_are_deviation_gains_of_the_stored_marginals(vicuna):
    db, result = vicuna
    prompts, u = _stored_game(db, result.run_id)
    np.testing.assert_allclose(u, -u.swapaxes(1, 2), atol=0)
    for method in ("ne", "ne-shannon"):
        xp, xk, xr = _marginals(db, result.run_id, method, prompts)
        for x in (xp, xk, xr):
            assert x.min() >= 0 and x.sum() == pytest.approx(1, abs=1e-9)
        # Independent numpy evaluation of u_i(a, x_-i) (rebel: -u_king off the diagonal, -1 on it).
        v_prompt = np.einsum("pij,i,j->p", np.abs(u), xk, xr)
        v_king = np.einsum("pij,p,j->i", u, xp, xr)
        v_rebel = -np.einsum("pij,p,i->j", u, xp, xk) - xk
        gains = {"prompt": v_prompt - v_prompt @ xp, "king": v_king - v_king @ xk, "rebel": v_rebel - v_rebel @ xr}
        stored = {
            (p, a): r
            for p, a, r in _query(
                db,
                "SELECT player, action, rating FROM ratings WHERE run_id = ? AND method = ?",
                [result.run_id, method],
            )
        }
        for player, actions in (("prompt", prompts), ("king", MODELS), ("rebel", MODELS)):
            np.testing.assert_allclose([stored[(player, a)] for a in actions], gains[player], atol=1e-9)
        exploitability = sum(float(g.max()) for g in gains.values())
        recorded = _query(
            db, "SELECT exploitability FROM equilibria WHERE run_id = ? AND method = ?", [result.run_id, method]
        )[0][0]
        assert recorded == pytest.approx(exploitability, abs=1e-9)
        assert recorded <= 1e-5


def test_cce_joint_is_stored_with_its_marginals(vicuna):
    db, result = vicuna
    prompts, u = _stored_game(db, result.run_id)
    for method in ("cce", "cce-shannon"):
        cells, omitted, exploitability = _query(
            db,
            "SELECT joint_cells, joint_mass_omitted, exploitability FROM equilibria WHERE run_id = ? AND method = ?",
            [result.run_id, method],
        )[0]
        joint = np.zeros_like(u)
        pi, mi = {p: k for k, p in enumerate(prompts)}, {m: k for k, m in enumerate(MODELS)}
        rows = _query(
            db,
            "SELECT prompt_id, king, rebel, mass FROM equilibrium_joint WHERE run_id = ? AND method = ?",
            [result.run_id, method],
        )
        assert len(rows) == cells
        for p, i, j, m in rows:
            joint[pi[p], mi[i], mi[j]] = m
        assert joint.sum() + omitted == pytest.approx(1, abs=1e-9)
        xp, xk, xr = _marginals(db, result.run_id, method, prompts)
        np.testing.assert_allclose(joint.sum(axis=(1, 2)), xp, atol=omitted + 1e-9)
        np.testing.assert_allclose(joint.sum(axis=(0, 2)), xk, atol=omitted + 1e-9)
        # King's CCE gap of deviating to model a: sum_x joint * (u(a, rebel) - u(king, rebel)).
        value = float((joint * u).sum())
        gains = np.einsum("pij,pj->i", u, joint.sum(axis=1)) - value
        king = dict(
            _query(
                db,
                "SELECT action, rating FROM ratings WHERE run_id = ? AND method = ? AND player = 'king'",
                [result.run_id, method],
            )
        )
        np.testing.assert_allclose([king[m] for m in MODELS], gains, atol=1e-6 + 4 * omitted)
        assert exploitability <= 1e-5


def test_contributions_sum_to_king_ratings(vicuna):
    db, result = vicuna
    rows = _query(
        db,
        """SELECT c.method, c.king, sum(c.delta), any_value(r.rating), count(*)
                         FROM contributions c JOIN ratings r ON r.run_id = c.run_id AND r.method = c.method
                              AND r.player = 'king' AND r.action = c.king
                         WHERE c.run_id = ? GROUP BY c.method, c.king""",
        [result.run_id],
    )
    assert len(rows) == len(EQ_METHODS) * 5
    for _, _, total, rating, n in rows:
        assert n == 5 and total == pytest.approx(rating, abs=1e-8)
    family = _query(
        db, "SELECT count(DISTINCT rebel_family) FROM contributions_by_family WHERE run_id = ?", [result.run_id]
    )[0][0]
    assert family == 4  # bard, claude, gpt (gpt35 + gpt4), vicuna


def test_ranks_follow_ratings(vicuna):
    db, result = vicuna
    rows = _query(db, "SELECT method, player, rating, rank FROM ratings WHERE run_id = ?", [result.run_id])
    groups = defaultdict(list)
    for method, player, rating, rank in rows:
        groups[(method, player)].append((rating, rank))
    for values in groups.values():
        for r1, k1 in values:
            better = sum(1 for r2, _ in values if round(r2, 6) > round(r1, 6))
            assert k1 == better + 1


def test_run_row_records_parameters_versions_fingerprint_and_timings(vicuna):
    db, result = vicuna
    kind, status, params, versions, fingerprint, timings = _query(
        db,
        "SELECT kind, status, parameters, versions, data_fingerprint, timings FROM runs WHERE run_id = ?",
        [result.run_id],
    )[0]
    params, versions, timings = json.loads(params), json.loads(versions), json.loads(timings)
    assert (kind, status) == ("rate", "ok")
    assert params["dataset"] == "vicuna80" and params["judges"] == ["prd:gpt4"]
    assert params["methods"] == ["bt", "ne", "cce", "ne-shannon", "cce-shannon"]
    assert {"jax", "duckdb", "numpy", "prefect"} <= set(versions)
    assert len(fingerprint) == 16
    assert {"assemble", "bt", "ne", "cce"} <= set(timings) and all(v >= 0 for v in timings.values())
    inputs = _query(db, "SELECT judge, status, judgments FROM run_inputs WHERE run_id = ?", [result.run_id])
    assert inputs == [("prd:gpt4", "ok", 1600)]


def test_latest_model_ratings_from_another_process(vicuna):
    db, result = vicuna
    code = (
        "import duckdb, json; con = duckdb.connect(%r, read_only=True); "
        "print(json.dumps(con.execute('SELECT run_id, method, model_id, rank FROM latest_model_ratings')"
        ".fetchall()))" % db
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)
    assert len(rows) == 25
    assert {r[0] for r in rows} == {result.run_id}
    assert {(r[1], r[2]) for r in rows} == {(m, x) for m in ("bt", *EQ_METHODS) for x in MODELS}
    assert [r[2] for r in rows if r[1] == "bt" and r[3] == 1] == ["gpt4"]


def test_latest_model_ratings_carry_every_methods_interval(vicuna):
    db, result = vicuna
    rows = _query(db, "SELECT method, model_id, ci_lo, ci_hi, p_top1 FROM latest_model_ratings")
    intervals = {
        (m, x): (lo, hi, p)
        for m, x, lo, hi, p in _query(
            db,
            "SELECT method, model_id, lo, hi, p_top1 FROM rating_intervals WHERE run_id = ? AND scheme = 'prompts'",
            [result.run_id],
        )
    }
    for method, model, lo, hi, p_top1 in rows:
        assert lo is not None and hi is not None and lo <= hi, (method, model)
        if method == "bt":
            assert p_top1 is None
        else:
            assert (lo, hi, p_top1) == intervals[(method, model)]
    for method in EQ_METHODS:
        assert sum(p for m, _, _, _, p in rows if m == method) == pytest.approx(1.0)


def test_every_stored_interval_holds_the_rating_beside_it(vicuna):
    """Both schemes of every equilibrium method (rating_intervals) and Bradley-Terry's own (ratings), as the
    view shows them: PRD's one judgment per order leaves many unanimous cells, whose replicates move inward."""
    db, result = vicuna
    rows = _query(
        db, "SELECT method, scheme, model_id, rating, lo, hi FROM rating_intervals WHERE run_id = ?", [result.run_id]
    )
    assert len(rows) == len(EQ_METHODS) * 2 * len(MODELS)
    shown = _query(db, "SELECT method, 'view', model_id, rating, ci_lo, ci_hi FROM latest_model_ratings")
    assert {m for m, *_ in shown} == {"bt", *EQ_METHODS}
    for method, scheme, model, rating, lo, hi in rows + shown:
        assert lo <= rating <= hi, (method, scheme, model, rating, lo, hi)


def test_pooled_prd_judges(vicuna, prefect_harness, prd_csv):
    from eqarena.flows import rate_flow

    db, first = vicuna
    pooled = rate_flow(
        RateOptions(dataset="vicuna80", judges=["all-prd"], methods=["bt"], bootstrap=BootstrapOptions(replicates=10)),
        db,
    )
    assert pooled.judges == ("prd:bard", "prd:claude", "prd:gpt35", "prd:gpt4", "prd:vicuna-13b")
    stored = dict(_query(db, "SELECT model_id, mean_payoff FROM model_mean_payoffs WHERE run_id = ?", [pooled.run_id]))
    reference = prd_mean_payoffs(prd_csv, {"gpt4", "claude", "gpt35", "bard", "vicuna-13b"})
    for model in MODELS:
        assert stored[model] == pytest.approx(reference[model], abs=1e-12)
    # The newer run is now the latest one.
    latest = _query(db, "SELECT DISTINCT run_id, method FROM latest_model_ratings")
    assert latest == [(pooled.run_id, "bt")]
    assert first.run_id != pooled.run_id


def _incomplete_db(path):
    rows = []
    rng = np.random.default_rng(0)
    for p in ("1", "2", "3", "4"):
        for a in ("x", "y", "z"):
            for b in ("x", "y", "z"):
                if a != b and not (p == "3" and a == "z"):
                    rows.append(JudgmentRow("j", "t", "syn", p, a, b, 0, "ok", score=float(rng.choice([-1, 0, 1]))))
    con = warehouse.connect(path)
    insert_judgments(con, rows)
    con.close()


def _table_counts(db):
    tables = ("runs", "ratings", "payoffs", "equilibria", "equilibrium_marginals", "contributions", "coverage")
    return {t: _query(db, f"SELECT count(*) FROM {t}")[0][0] for t in tables}


def test_incomplete_tensor_is_refused_and_nothing_is_written(prefect_harness, tmp_path):
    from eqarena.flows import rate_flow

    db = str(tmp_path / "w.duckdb")
    _incomplete_db(db)
    before = _table_counts(db)
    with pytest.raises(IncompleteTensorError, match="cover 10 of 12"):
        rate_flow(RateOptions(dataset="syn", judges=["j"], methods=["bt", "ne"]), db)
    assert _table_counts(db) == before

    result = rate_flow(
        RateOptions(
            dataset="syn",
            judges=["j"],
            methods=["bt", "ne", "cce"],
            missing="drop-prompts",
            bootstrap=BootstrapOptions(replicates=10),
        ),
        db,
    )
    assert result.shape == (3, 3, 3)
    assert _query(db, "SELECT player, action, missing_cells FROM dropped WHERE run_id = ?", [result.run_id]) == [
        ("prompt", "3", 2)
    ]
    message = _query(db, "SELECT message FROM runs WHERE run_id = ?", [result.run_id])[0][0]
    assert message == "--missing drop-prompts dropped 1 prompt(s): 3"
    coverage = dict(
        ((a, b), c)
        for a, b, c in _query(
            db, "SELECT model_a, model_b, prompts_covered FROM coverage WHERE run_id = ?", [result.run_id]
        )
    )
    assert coverage[("x", "y")] == 4 and coverage[("x", "z")] == 3 and coverage[("z", "y")] == 3


def test_cli_reports_bad_input_in_one_line(prefect_harness, tmp_path):
    db = str(tmp_path / "w.duckdb")
    _incomplete_db(db)
    runner = CliRunner()
    cases = {
        ("--dataset", "syn"): "error: judgments of j on 'syn' cover 10 of 12",
        ("--dataset", "syn", "--methods", "bt,elo"): "error: --methods: unknown method elo",
        (
            "--dataset",
            "syn",
            "--missing",
            "zero",
        ): "error: --missing must be one of refuse, drop-prompts, drop-models, impute",
        ("--dataset", "syn", "--judge", "nobody"): "error: no judgments by judge nobody on dataset 'syn'",
    }
    for args, expected in cases.items():
        result = runner.invoke(app, ["rate", "--db", db, *args])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(expected), result.output
    assert _query(db, "SELECT count(*) FROM ratings")[0][0] == 0
