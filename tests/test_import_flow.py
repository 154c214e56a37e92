"""`eqarena import` end to end on the shipped samples (examples/import/): import, rate (with
`--missing impute` where the data is sparse) and report; idempotent re-imports; bad rows refused with
file:line and nothing written; imputed cells and the imputed share of each rating in DuckDB."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import query
from ingest_inputs import snapshot
from typer.testing import CliRunner

from eqarena.cli.app import app

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "import"
runner = CliRunner()

SAMPLES = [
    # format, path, dataset, judge, missing policy and order rule for rate
    (
        "arena-hard-auto",
        EXAMPLES / "tiny-bench" / "model_judgment",
        "tiny-bench",
        "arena-hard-auto:gpt-4o-2024-08-06",
        "impute",
        "both",
    ),
    ("battles", EXAMPLES / "battles.jsonl", "battles", "battles:battles", "impute", "any"),
    ("pairwise", EXAMPLES / "pairwise.csv", "pairwise", "my-judge", "refuse", "both"),
    ("scores", EXAMPLES / "scores.csv", "scores", "scores:scores", "impute", "both"),
]


# Judgments as the rate flow sees them: stored pairwise rows, and every ordered pair of two models'
# scores on a prompt (score tables are stored as scores, their pairs derived when rating).
JUDGED = (
    "(SELECT judge, dataset, prompt_id, model_a, model_b, status FROM judgments UNION ALL "
    "SELECT a.judge, a.dataset, a.prompt_id, a.model_id, b.model_id, 'ok' FROM scores a JOIN scores b "
    "USING (judge, template_hash, dataset, prompt_id) WHERE a.model_id <> b.model_id)"
)


def cli(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def judged_cells(db: Path, dataset: str, orders: str) -> set[tuple[str, str, str]]:
    """(prompt, model i, model j) with an ok judgment in both orders (or either, for orders "any"):
    the cells that are not imputed."""
    ordered = set(
        query(
            db,
            "SELECT DISTINCT prompt_id, model_a, model_b FROM " + JUDGED + " WHERE dataset = ? AND status = 'ok'",
            [dataset],
        )
    )
    if orders == "any":
        return ordered | {(p, b, a) for p, a, b in ordered}
    return {(p, a, b) for p, a, b in ordered if (p, b, a) in ordered}


def one_order_cells(db: Path, dataset: str) -> set[tuple[str, str, str]]:
    """(prompt, i, j) with ok judgments in exactly one of the two orders."""
    ordered = set(
        query(
            db,
            "SELECT DISTINCT prompt_id, model_a, model_b FROM " + JUDGED + " WHERE dataset = ? AND status = 'ok'",
            [dataset],
        )
    )
    return {(p, a, b) for p, a, b in ordered if (p, b, a) not in ordered} | {
        (p, b, a) for p, a, b in ordered if (p, b, a) not in ordered
    }


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
    judged_models = {
        m
        for (m,) in query(
            db,
            f"SELECT model_a FROM {JUDGED} WHERE dataset = ? UNION SELECT model_b FROM {JUDGED} WHERE dataset = ?",
            [dataset, dataset],
        )
    }
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
    for player, action, m in query(
        db, "SELECT player, action, mass FROM equilibrium_marginals WHERE run_id = ? AND method = 'ne'", [run_id]
    ):
        mass[player][action] = m
    imputed = {
        (p, i, j): flag
        for p, i, j, flag in query(db, "SELECT prompt_id, king, rebel, imputed FROM payoffs WHERE run_id = ?", [run_id])
    }
    shares = dict(
        query(
            db,
            "SELECT action, imputed_share FROM ratings WHERE run_id = ? AND method = 'ne' AND player = 'king'",
            [run_id],
        )
    )
    for king in mass["king"]:
        expected = sum(
            mass["prompt"][p] * mass["rebel"][j]
            for p in mass["prompt"]
            for j in mass["rebel"]
            if imputed.get((p, king, j), False)
        )
        assert shares[king] == pytest.approx(expected, abs=1e-9)
    assert max(shares.values()) > 0.1  # the sample leaves most non-baseline pairs unjudged
    assert (
        query(
            db,
            "SELECT count(*) FROM ratings WHERE run_id = ? AND method = 'bt' AND imputed_share IS NOT NULL",
            [run_id],
        )[0][0]
        == 0
    )
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
    assert (
        result.stderr.strip() == f"error: {bad}:3: unknown verdict 'maybe' (known: A>>B, A>B, A=B, B>A, B>>A, "
        "model_a, model_b, tie, tie (bothbad))"
    )
    assert snapshot(db) == before
    assert [r[0] for r in query(db, "SELECT status FROM runs WHERE kind = 'import' ORDER BY started_at")] == [
        "ok",
        "failed",
    ]


def test_scores_with_another_payoff_need_another_judge(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    assert cli("import", "scores", SAMPLES[3][1], "--db", db).exit_code == 0
    before = snapshot(db)
    clash = cli("import", "scores", SAMPLES[3][1], "--payoff", "sign", "--db", db)
    assert clash.exit_code == 1
    assert (
        "judge 'scores:scores' already holds scores on 'scores' imported with scores:clip-diff/scale=1" in clash.stderr
    )
    assert snapshot(db) == before
    other = cli("import", "scores", SAMPLES[3][1], "--payoff", "sign", "--judge", "scores:sign", "--db", db)
    assert other.exit_code == 0, other.output
    assert cli("rate", "--judge", "scores:sign", "--missing", "impute", "--methods", "ne", "--db", db).exit_code == 0
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    values = np.array(
        [u for (u,) in query(db, "SELECT u_king FROM payoffs WHERE run_id = ? AND NOT imputed", [run_id])]
    )
    assert set(np.unique(values)) <= {-1.0, 0.0, 1.0}


def file_cells(path: Path, id_column: str, skip: tuple[str, ...] = ()) -> dict[tuple[str, str], float]:
    """(row id, column) -> value of every non-empty, non-NaN cell of a CSV table."""
    frame = pl.read_csv(path, infer_schema=False)
    return {
        (row[id_column], c): float(row[c])
        for row in frame.iter_rows(named=True)
        for c in frame.columns
        if c != id_column and c not in skip and row[c] not in (None, "", "NaN")
    }


def test_models_by_tasks_scores_round_trip_and_rate(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    path = EXAMPLES / "livebench-style.csv"
    args = ("import", "scores", path, "--layout", "models-by-tasks", "--scale", "100", "--db", db)
    first = cli(*args)
    assert first.exit_code == 0, first.output
    assert "judges: scores:livebench-style" in first.stdout and "2 empty score cell(s)" in first.stderr
    stored = {
        (m, p): s
        for p, m, s in query(db, "SELECT prompt_id, model_id, score FROM scores WHERE dataset = 'livebench-style'")
    }
    assert stored == file_cells(path, "model")
    assert re.search(r"livebench-style: 0 new, \d+ unchanged, 0 changed", cli(*args).stdout)
    rated = cli("rate", "--dataset", "livebench-style", "--missing", "impute", "--bootstrap", 0, "--db", db)
    assert rated.exit_code == 0, rated.output
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    payoffs = query(db, "SELECT prompt_id, king, rebel, u_king, imputed FROM payoffs WHERE run_id = ?", [run_id])
    # Judged cells carry the clipped score gap in percent / 100; only drift-3b's two missing tasks are imputed.
    for prompt, king, rebel, u, imputed in payoffs:
        assert imputed == ((king, prompt) not in stored or (rebel, prompt) not in stored)
        if not imputed:
            assert u == pytest.approx(np.clip((stored[king, prompt] - stored[rebel, prompt]) / 100, -1, 1))
    assert {p for p, k, r, u, imputed in payoffs if imputed} == {"summarize", "typos"}
    # No two tasks or models are clones: the affinity target is uniform, so each -shannon method is its
    # affinity twin, solved once and said so.
    assert "ne-shannon: the same equilibrium as ne (no two prompts or models are clones" in rated.stdout
    twins = dict(
        query(
            db,
            "SELECT method, json_extract_string(diagnostics, '$.same_as') FROM equilibria WHERE run_id = ?",
            [run_id],
        )
    )
    assert twins == {"ne": None, "cce": None, "ne-shannon": "ne", "cce-shannon": "cce"}
    ratings = query(db, "SELECT method, player, action, rating FROM ratings WHERE run_id = ?", [run_id])
    by = {(m, p, a): r for m, p, a, r in ratings}
    for (method, player, action), rating in by.items():
        if method in ("ne", "cce"):
            assert by[f"{method}-shannon", player, action] == rating


def test_preference_table_round_trips_in_both_orders_and_rates(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    path = EXAMPLES / "alpacaeval-style.csv"
    args = ("import", "pairwise", path, "--layout", "preferences", "--baseline", "gpt4_turbo", "--db", db)
    first = cli(*args)
    assert first.exit_code == 0, first.output
    cells = file_cells(path, "instruction_idx", skip=("instruction",))
    stored = {
        (p, a, b): s
        for p, a, b, s in query(
            db,
            "SELECT prompt_id, model_a, model_b, score FROM judgments "
            "WHERE dataset = 'alpacaeval-style' AND status = 'ok'",
        )
    }
    expected = {}
    for (prompt, model), preference in cells.items():
        expected[prompt, model, "gpt4_turbo"] = (preference - 1.5) * 2
        expected[prompt, "gpt4_turbo", model] = -(preference - 1.5) * 2
    assert stored.keys() == expected.keys()
    assert all(stored[k] == pytest.approx(v) for k, v in expected.items())
    assert re.search(r"alpacaeval-style: 0 new, \d+ unchanged, 0 changed", cli(*args).stdout)
    rated = cli("rate", "--dataset", "alpacaeval-style", "--missing", "impute", "--bootstrap", 0, "--db", db)
    assert rated.exit_code == 0, rated.output
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    payoffs = query(db, "SELECT prompt_id, king, rebel, u_king, imputed FROM payoffs WHERE run_id = ?", [run_id])
    # Both orders are stored, so every (model, baseline) cell with a preference counts as judged.
    judged = {(p, k, r) for p, k, r, u, imputed in payoffs if not imputed}
    assert judged == set(expected)
    assert all(u == pytest.approx(expected[p, k, r]) for p, k, r, u, imputed in payoffs if not imputed)


@pytest.mark.parametrize(
    "fmt, layout, body, message",
    [
        (
            "pairwise",
            ["--layout", "preferences", "--baseline", "base"],
            "prompt_id,x,y\nq1,1.5,2\nq2,1,2.5\n",
            "t.csv:3: preference 2.5 of 'y' is outside [1, 2] (1: base preferred, 2: the model preferred, "
            "1.5 or 0: a draw)",
        ),
        (
            "scores",
            ["--layout", "models-by-tasks"],
            "model,t1,t2\nx,50,60\ny,55,high\n",
            "t.csv:3: t2 'high' is not a finite number",
        ),
        (
            "scores",
            ["--id-column", "session"],
            "prompt_id,x,y\nq1,1,2\n",
            "t.csv: missing column session (--id-column) (columns: prompt_id, x, y)",
        ),
    ],
)
def test_bad_table_cells_write_nothing(tmp_path, prefect_harness, fmt, layout, body, message):
    db = tmp_path / "w.duckdb"
    assert cli("import", "scores", SAMPLES[3][1], "--db", db).exit_code == 0
    before = snapshot(db), query(db, "SELECT * FROM scores ORDER BY ALL")
    bad = tmp_path / "t.csv"
    bad.write_text(body)
    result = cli("import", fmt, bad, *layout, "--db", db)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {tmp_path}/{message}"
    assert (snapshot(db), query(db, "SELECT * FROM scores ORDER BY ALL")) == before


def test_error_verdicts_are_stored_unparsed_and_counted(tmp_path, prefect_harness):
    db = tmp_path / "w.duckdb"
    path = tmp_path / "mt-bench.csv"
    path.write_text(
        "question_id,model_a,model_b,verdict\n81,x,y,model_a\n81,y,x,error\n82,x,y,tie\n"
        "82,y,x,model_b\n83,x,y,error\n83,y,x,model_a\n"
    )
    result = cli("import", "pairwise", path, "--db", db)
    assert result.exit_code == 0, result.output
    assert f"note: {path}: 2 row(s) with verdict 'error' stored as unparsed (no score)" in result.stderr
    assert sorted(query(db, "SELECT prompt_id, model_a, status, score FROM judgments")) == [
        ("81", "x", "ok", 1.0),
        ("81", "y", "unparsed", None),
        ("82", "x", "ok", 0.0),
        ("82", "y", "ok", -1.0),
        ("83", "x", "unparsed", None),
        ("83", "y", "ok", 1.0),
    ]
    assert "2 row(s) with verdict 'error'" in query(db, "SELECT message FROM runs WHERE kind = 'import'")[0][0]
    rated = cli("rate", "--dataset", "mt-bench", "--missing", "impute", "--bootstrap", 0, "--db", db)
    assert rated.exit_code == 0, rated.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["xml", "f.xml"], "error: FORMAT must be one of arena-hard-auto, battles, pairwise, scores; got 'xml'"),
        (
            ["scores", "s.csv", "--layout", "tall"],
            "error: --layout must be one of long, wide, models-by-tasks, preferences; got 'tall'",
        ),
        (
            ["scores", "s.csv", "--layout", "preferences", "--baseline", "b"],
            "error: --layout preferences does not apply to scores (its layouts: long, wide, models-by-tasks); "
            "preferences are pairwise judgments: eqarena import pairwise FILE --layout preferences --baseline MODEL",
        ),
        (
            ["pairwise", "s.csv", "--layout", "preferences"],
            "error: --layout preferences needs --baseline (the model every column is compared with)",
        ),
        (["battles", "s.csv", "--layout", "wide"], "error: --layout wide does not apply to battles"),
        (
            ["battles", "s.csv", "--id-column", "qid"],
            "error: --id-column applies to the table formats (pairwise, scores), not battles",
        ),
        (
            ["scores", "s.csv", "--named-battles"],
            "error: --named-battles applies to battle logs (import battles), not scores",
        ),
        (["scores", "missing.csv"], "error: missing.csv: no such file or directory"),
        (["scores", "s.csv", "--payoff", "ratio"], "error: --payoff must be one of clip-diff, sign; got 'ratio'"),
        (["scores", "s.csv", "--scale", "0"], "error: --scale must be positive; got 0.0"),
    ],
)
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
    log.write_text(
        '{"question_id": "q", "model_a": "x", "model_b": "y", "winner": "model_a"}\n'
        '{"question_id": "q", "model_a": "z", "model_b": "w", "winner": "tie"}\n'
    )
    assert cli("import", "battles", log, "--db", db).exit_code == 0
    result = cli("rate", "--missing", "impute", "--orders", "any", "--db", db)
    assert result.exit_code == 1
    line = result.stderr.splitlines()[-1]
    assert line.startswith("error: --missing impute: ") and "disconnected into 2 groups" in line
    assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0] == 0
