"""`eqarena import` end to end on the shipped samples (examples/import/): import, rate (with
`--missing impute` where the data is sparse) and report; idempotent re-imports; bad rows refused with
file:line and nothing written; imputed cells and the imputed share of each rating in DuckDB."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from eqarena.cli.app import app

from conftest import query
from ingest_inputs import snapshot

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "import"
runner = CliRunner()

SAMPLES = [
    # format, path, dataset, judge, missing policy and order rule for rate
    ("arena-hard-auto", EXAMPLES / "tiny-bench" / "model_judgment", "tiny-bench",
     "arena-hard-auto:gpt-4o-2024-08-06", "impute", "both"),
    ("battles", EXAMPLES / "battles.jsonl", "battles", "battles:battles", "impute", "any"),
    ("pairwise", EXAMPLES / "pairwise.csv", "pairwise", "my-judge", "refuse", "both"),
    ("scores", EXAMPLES / "scores.csv", "scores", "scores:scores", "impute", "both"),
]


# Judgments as the rate flow sees them: stored pairwise rows, and every ordered pair of two models'
# scores on a prompt (score tables are stored as scores, their pairs derived when rating).
JUDGED = ("(SELECT judge, dataset, prompt_id, model_a, model_b, status FROM judgments UNION ALL "
          "SELECT a.judge, a.dataset, a.prompt_id, a.model_id, b.model_id, 'ok' FROM scores a JOIN scores b "
          "USING (judge, template_hash, dataset, prompt_id) WHERE a.model_id <> b.model_id)")


def cli(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def judged_cells(db: Path, dataset: str, orders: str) -> set[tuple[str, str, str]]:
    """(prompt, model i, model j) with an ok judgment in both orders (or either, for orders "any"):
    the cells that are not imputed."""
    ordered = set(query(db, "SELECT DISTINCT prompt_id, model_a, model_b FROM " + JUDGED + " "
                            "WHERE dataset = ? AND status = 'ok'", [dataset]))
    if orders == "any":
        return ordered | {(p, b, a) for p, a, b in ordered}
    return {(p, a, b) for p, a, b in ordered if (p, b, a) in ordered}


def one_order_cells(db: Path, dataset: str) -> set[tuple[str, str, str]]:
    """(prompt, i, j) with ok judgments in exactly one of the two orders."""
    ordered = set(query(db, "SELECT DISTINCT prompt_id, model_a, model_b FROM " + JUDGED + " "
                            "WHERE dataset = ? AND status = 'ok'", [dataset]))
    return {(p, a, b) for p, a, b in ordered if (p, b, a) not in ordered} | \
        {(p, b, a) for p, a, b in ordered if (p, b, a) not in ordered}


@pytest.mark.parametrize("fmt, path, dataset, judge, missing, orders", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_sample_imports_rates_and_reports(tmp_path, prefect_harness, fmt, path, dataset, judge, missing, orders):
    db = tmp_path / "w.duckdb"
    first = cli("import", fmt, path, "--db", db)
    assert first.exit_code == 0, first.output
    stored = query(db, f"SELECT count(*), count(DISTINCT judge) FROM {JUDGED} WHERE dataset = ?", [dataset])[0]
    assert stored[0] > 0 and stored[1] == 1
    assert f"judges: {judge}" in first.stdout
    again = cli("import", fmt, path, "--db", db)
    assert again.exit_code == 0, again.output
    assert re.search(rf"{dataset}: 0 new, \d+ unchanged, 0 changed", again.stdout), again.stdout
    assert query(db, f"SELECT count(*) FROM {JUDGED}")[0][0] == stored[0]
    runs = query(db, "SELECT status FROM runs WHERE kind = 'import'")
    assert [r[0] for r in runs] == ["ok", "ok"]

    rated = cli("rate", "--dataset", dataset, "--missing", missing, "--orders", orders, "--bootstrap", 20, "--db", db)
    assert rated.exit_code == 0, rated.output
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    models = {m for (m,) in query(db, "SELECT DISTINCT model_id FROM latest_model_ratings")}
    judged_models = {m for (m,) in query(db, f"SELECT model_a FROM {JUDGED} WHERE dataset = ? "
                                            f"UNION SELECT model_b FROM {JUDGED} WHERE dataset = ?",
                                         [dataset, dataset])}
    assert models == judged_models
    # Exactly the cells without a judgment in both orders are imputed.
    judged = judged_cells(db, dataset, orders)
    payoffs = query(db, "SELECT prompt_id, king, rebel, imputed, samples FROM payoffs WHERE run_id = ?", [run_id])
    assert payoffs and all(imputed == ((p, i, j) not in judged) for p, i, j, imputed, _ in payoffs)
    # An imputed cell may hold judgments of one order only (position balance needs both).
    one_order = {(p, i, j) for p, i, j, imputed, samples in payoffs if imputed and samples > 0}
    assert one_order == (one_order_cells(db, dataset) if orders == "both" else set())
    imputed_cells = query(db, "SELECT imputed_cells FROM payoff_imputation WHERE run_id = ?", [run_id])[0][0]
    assert imputed_cells == sum(1 for p, i, j, imputed, _ in payoffs if imputed and i < j)
    if missing == "impute":
        assert imputed_cells > 0 and "--missing impute filled" in rated.stdout
    else:
        assert imputed_cells == 0

    out = tmp_path / "out"
    report = cli("report", "--db", db, "--out", out)
    assert report.exit_code == 0, report.output
    html = (out / f"eqarena-{run_id}.html").read_text(encoding="utf-8")
    assert all(m in html for m in models)
    assert ("rests on imputed cells" in html) == (missing == "impute")


def test_imputed_shares_match_the_equilibrium(tmp_path, prefect_harness):
    """ratings.imputed_share recomputed by brute force from the stored NE marginals and imputed cells."""
    db = tmp_path / "w.duckdb"
    assert cli("import", "arena-hard-auto", SAMPLES[0][1], "--db", db).exit_code == 0
    assert cli("rate", "--missing", "impute", "--methods", "ne,cce", "--db", db).exit_code == 0
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    mass = defaultdict(dict)
    for player, action, m in query(db, "SELECT player, action, mass FROM equilibrium_marginals "
                                       "WHERE run_id = ? AND method = 'ne'", [run_id]):
        mass[player][action] = m
    imputed = {(p, i, j): flag for p, i, j, flag in query(
        db, "SELECT prompt_id, king, rebel, imputed FROM payoffs WHERE run_id = ?", [run_id])}
    shares = dict(query(db, "SELECT action, imputed_share FROM ratings WHERE run_id = ? AND method = 'ne' "
                            "AND player = 'king'", [run_id]))
    for king in mass["king"]:
        expected = sum(mass["prompt"][p] * mass["rebel"][j]
                       for p in mass["prompt"] for j in mass["rebel"] if imputed.get((p, king, j), False))
        assert shares[king] == pytest.approx(expected, abs=1e-9)
    assert max(shares.values()) > 0.1  # the sample leaves most non-baseline pairs unjudged
    assert query(db, "SELECT count(*) FROM ratings WHERE run_id = ? AND method = 'bt' "
                     "AND imputed_share IS NOT NULL", [run_id])[0][0] == 0
    cce = [s for (s,) in query(db, "SELECT imputed_share FROM ratings WHERE run_id = ? AND method = 'cce'", [run_id])]
    assert cce and all(0.0 <= s <= 1.0 for s in cce)


def test_incomplete_import_is_refused_without_a_policy(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    assert cli("import", "battles", SAMPLES[1][1], "--db", db).exit_code == 0
    refused = cli("rate", "--orders", "any", "--db", db)
    assert refused.exit_code == 1
    assert "pass --missing impute, drop-prompts or drop-models" in refused.stderr


def test_bad_row_writes_nothing_and_names_the_line(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    assert cli("import", "pairwise", SAMPLES[2][1], "--db", db).exit_code == 0
    before = snapshot(db)
    bad = tmp_path / "more.csv"
    bad.write_text("prompt_id,model_a,model_b,verdict\nq01,atlas-7b,drift-3b,A>B\nq01,atlas-7b,drift-3b,maybe\n")
    result = cli("import", "pairwise", bad, "--dataset", "pairwise", "--db", db)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {bad}:3: unknown verdict 'maybe' (known: A>>B, A>B, A=B, B>A, B>>A, " \
                                    "model_a, model_b, tie, tie (bothbad))"
    assert snapshot(db) == before
    assert [r[0] for r in query(db, "SELECT status FROM runs WHERE kind = 'import' ORDER BY started_at")] == \
        ["ok", "failed"]


def test_scores_with_another_payoff_need_another_judge(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    assert cli("import", "scores", SAMPLES[3][1], "--db", db).exit_code == 0
    before = snapshot(db)
    clash = cli("import", "scores", SAMPLES[3][1], "--payoff", "sign", "--db", db)
    assert clash.exit_code == 1
    assert "judge 'scores:scores' already holds scores on 'scores' imported with scores:clip-diff/scale=1" \
        in clash.stderr
    assert snapshot(db) == before
    other = cli("import", "scores", SAMPLES[3][1], "--payoff", "sign", "--judge", "scores:sign", "--db", db)
    assert other.exit_code == 0, other.output
    assert cli("rate", "--judge", "scores:sign", "--missing", "impute", "--methods", "ne", "--db", db).exit_code == 0
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    values = np.array([u for (u,) in query(db, "SELECT u_king FROM payoffs WHERE run_id = ? AND NOT imputed",
                                           [run_id])])
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}


@pytest.mark.parametrize("args, message", [
    (["xml", "f.xml"], "error: FORMAT must be one of arena-hard-auto, battles, pairwise, scores; got 'xml'"),
    (["scores", "missing.csv"], "error: missing.csv: no such file or directory"),
    (["scores", "s.csv", "--payoff", "ratio"], "error: --payoff must be one of clip-diff, sign; got 'ratio'"),
    (["scores", "s.csv", "--scale", "0"], "error: --scale must be positive; got 0.0"),
])
def test_bad_options_fail_before_any_work(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.csv").write_text("prompt_id,x,y\np,1,0\n")
    result = cli("import", *args, "--db", tmp_path / "w.duckdb")
    assert result.exit_code == 1
    assert result.stderr.strip() == message
    assert not (tmp_path / "w.duckdb").exists()


def test_impute_refuses_a_disconnected_comparison_graph(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    log = tmp_path / "split.jsonl"
    log.write_text('{"question_id": "q", "model_a": "x", "model_b": "y", "winner": "model_a"}\n'
                   '{"question_id": "q", "model_a": "z", "model_b": "w", "winner": "tie"}\n')
    assert cli("import", "battles", log, "--db", db).exit_code == 0
    result = cli("rate", "--missing", "impute", "--orders", "any", "--db", db)
    assert result.exit_code == 1
    line = result.stderr.splitlines()[-1]
    assert line.startswith("error: --missing impute: ") and "disconnected into 2 groups" in line
    assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0] == 0
