"""The `winrate` method against arena-hard-auto's own definition, on the committed tiny-bench sample."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import query
from typer.testing import CliRunner

from eqarena.cli.app import app
from eqarena.methods import get_method
from eqarena.solvers.pairwise.bradley_terry import bradley_terry
from eqarena.solvers.pairwise.win_rate import fit_win_rate

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "import" / "tiny-bench" / "model_judgment"
BASELINE = "gpt-4-0314"
runner = CliRunner()


def reference_battles(folder: Path, weight: int = 3) -> list[tuple[str, float]]:
    """(model, score) rows as arena-hard-auto v2.0 show_result.py `load_judgments` builds them: a line
    with a null game or a game without a label is dropped whole; from the model's side, `A>B` in game 2
    (the model as A) scores 1, `A>>B` [1] * weight, `A=B` 0.5, `B>A` 0, `B>>A` [0] * weight, and game 1
    (the baseline as A) scores 1 - s for each entry of its label's list."""
    label_to_score = {"A>B": [1], "A>>B": [1] * weight, "A=B": [0.5], "B>A": [0], "B>>A": [0] * weight}
    rows = []
    for path in sorted(folder.glob("*/*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            games = record["games"]
            if any(g is None or g.get("score") not in label_to_score for g in games[:2]):
                continue
            scores = label_to_score[games[1]["score"]] + [1 - s for s in label_to_score[games[0]["score"]]]
            rows += [(record["model"], float(s)) for s in scores]
    return rows


def reference_win_rates(rows) -> dict[str, float]:
    """show_result.py `print_leaderboard`: a model's score is the mean of its rows (the bootstrap's mean
    of resampled means estimates exactly this), in percent; the baseline is listed at 50."""
    models = sorted({m for m, _ in rows})
    rates = {m: 100.0 * np.mean([s for k, s in rows if k == m]) for m in models}
    return rates | {BASELINE: 50.0}


def reference_bt_win_rates(rows) -> dict[str, float]:
    """The BT route (show_result.py with style features, without them; v0.1's predicted win rate): a
    logistic regression without intercept (and, in effect, without penalty) on the rows, +1 for the
    model's column and -1 for the baseline's, a tie as one win and one loss (v0.1 `compute_mle_elo`);
    win rate sigmoid(c_m - c_base)."""
    from sklearn.linear_model import LogisticRegression

    models = sorted({m for m, _ in rows}) + [BASELINE]
    x, y = [], []
    for model, score in rows:
        row = np.zeros(len(models))
        row[models.index(model)], row[-1] = 1.0, -1.0
        for label in [1.0, 0.0] if score == 0.5 else [score, score]:
            x.append(row)
            y.append(label)
    lr = LogisticRegression(fit_intercept=False, C=1e12, tol=1e-10, max_iter=10_000).fit(np.array(x), y)
    coef = lr.coef_[0]
    return {m: 100.0 / (1.0 + np.exp(-(coef[k] - coef[-1]))) for k, m in enumerate(models)}


@pytest.fixture(scope="module")
def rated(tmp_path_factory):
    db = tmp_path_factory.mktemp("tiny") / "w.duckdb"
    imported = runner.invoke(app, ["import", "arena-hard-auto", str(SAMPLE), "--db", str(db)])
    assert imported.exit_code == 0, imported.output
    out = runner.invoke(
        app,
        [
            "rate",
            "--dataset",
            "tiny-bench",
            "--missing",
            "impute",
            "--methods",
            "bt",
            "--baseline",
            BASELINE,
            "--bootstrap",
            "40",
            "--db",
            str(db),
        ],
    )
    assert out.exit_code == 0, out.output
    rows = query(db, "SELECT method, model_id, rating, ci_lo, ci_hi FROM latest_model_ratings")
    return db, {(m, model): (r, lo, hi) for m, model, r, lo, hi in rows}, out.stdout


def test_win_rate_matches_arena_hard_auto(rated, prefect_harness):
    _, ratings, stdout = rated
    reference = reference_win_rates(reference_battles(SAMPLE))
    ours = {model: r for (method, model), (r, _, _) in ratings.items() if method == "winrate"}
    assert ours.keys() == reference.keys()
    for model, rate in reference.items():
        assert ours[model] == pytest.approx(rate, abs=1e-9), model
    # cirrus-70b has a failed game: arena-hard-auto drops that prompt for it, and so does winrate
    assert ours["cirrus-70b"] != pytest.approx(100 * 19 / 24)
    for (method, model), (r, lo, hi) in ratings.items():
        if method == "winrate" and model != BASELINE:
            assert lo <= r <= hi and hi - lo > 0
    assert "Win rate" in stdout


def test_bt_route_gives_the_same_win_rate(rated, prefect_harness):
    """With every model judged only against the baseline, the BT fit on arena-hard-auto's rows predicts
    each model's observed win rate against the baseline; eqarena's BT solver on the same rows agrees."""
    rows = reference_battles(SAMPLE)
    reference = reference_bt_win_rates(rows)
    direct = reference_win_rates(rows)
    models = sorted(direct)
    a = np.array([models.index(m) for m, _ in rows])
    b = np.full(len(rows), models.index(BASELINE))
    elo = bradley_terry(a, b, np.array([s for _, s in rows]), num_models=len(models))
    for k, model in enumerate(models):
        predicted = 100.0 / (1.0 + 10.0 ** ((elo.ratings[b[0]] - elo.ratings[k]) / 400.0))
        assert predicted == pytest.approx(reference[model], abs=1e-4), model
        assert predicted == pytest.approx(direct[model], abs=1e-6), model


def test_default_baseline_is_the_model_in_most_judgments():
    # model 2 meets everyone, both positions; the others meet only model 2
    battles = {
        "prompt": np.array([0, 0, 0, 0, 1, 1]),
        "model_a": np.array([0, 2, 1, 2, 0, 2]),
        "model_b": np.array([2, 0, 2, 1, 2, 0]),
        "score": np.array([1.0, -0.5, 0.0, 0.0, -1.0, 1.0]),
    }
    fit = fit_win_rate(np.zeros((2, 3, 3)), battles)
    assert fit.diagnostics["baseline_index"] == 2
    # model 0: prompt 0 a decisive win (+1, weight 3) and a win (-0.5 for the baseline as A), prompt 1
    # two decisive losses: (3 + 1) / (3 + 1 + 3 + 3); model 1: two ties
    assert fit.ratings == pytest.approx([40.0, 50.0, 50.0])
    named = fit_win_rate(np.zeros((2, 3, 3)), battles | {"baseline": np.asarray(0)})
    assert named.ratings[0] == 50.0 and named.ratings[2] == pytest.approx(60.0) and np.isnan(named.ratings[1])


def test_one_position_only_does_not_count():
    battles = {
        "prompt": np.array([0, 0, 1]),
        "model_a": np.array([0, 1, 0]),
        "model_b": np.array([1, 0, 1]),
        "score": np.array([0.5, 0.5, 0.5]),
    }
    fit = fit_win_rate(np.zeros((2, 2, 2)), battles | {"baseline": np.asarray(1)})
    assert fit.diagnostics["games"] == 2  # prompt 1 has model 0 as A only
    assert fit.ratings[0] == pytest.approx(50.0)


def test_winrate_is_not_default_and_needs_battles():
    method = get_method("winrate")
    assert not method.default and method.needs_battles
    with pytest.raises(ValueError, match="battles"):
        method.model_fit(np.zeros((1, 2, 2)), None)


def test_unknown_baseline_is_refused(rated, prefect_harness):
    db, _, _ = rated
    out = runner.invoke(
        app,
        [
            "rate",
            "--dataset",
            "tiny-bench",
            "--missing",
            "impute",
            "--baseline",
            "nobody",
            "--bootstrap",
            "0",
            "--db",
            str(db),
        ],
    )
    assert out.exit_code == 1 and "nobody" in out.output


def test_style_control_without_answer_texts_is_one_line_and_writes_nothing(rated):
    db, _, _ = rated
    runs = query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'")
    out = runner.invoke(
        app,
        [
            "rate",
            "--dataset",
            "tiny-bench",
            "--missing",
            "impute",
            "--methods",
            "bt",
            "--style-control",
            "--bootstrap",
            "0",
            "--db",
            str(db),
        ],
    )
    assert out.exit_code == 1
    assert out.output.strip().splitlines()[-1].startswith("error: --style-control: dataset tiny-bench has no answer")
    assert "Traceback" not in out.output
    assert query(db, "SELECT count(*) FROM runs WHERE kind = 'rate'") == runs


def test_style_control_end_to_end_on_the_bundled_answers(tmp_path):
    """`rate --style-control` on the bundled PRD data (answers stored): bt-style rows beside bt, and the
    fitted length coefficient in the run's parameters."""
    db = tmp_path / "w.duckdb"
    assert runner.invoke(app, ["ingest", "--db", str(db)]).exit_code == 0
    out = runner.invoke(
        app, ["rate", "--db", str(db), "--judge", "prd:gpt4", "--methods", "bt", "--style-control", "--bootstrap", "0"]
    )
    assert out.exit_code == 0, out.output
    rows = query(db, "SELECT method, count(*) FROM latest_model_ratings GROUP BY method ORDER BY method")
    assert rows == [("bt", 5), ("bt-style", 5)]
    (parameters,) = query(db, "SELECT parameters FROM runs WHERE kind = 'rate'")[0]
    fitted = json.loads(parameters)["bt-style"]
    assert np.isfinite(fitted["style_length"]) and fitted["style_length"] != 0


def test_win_rate_needs_no_imputation_and_stores_only_the_judged_cells(rated):
    """`rate --methods winrate` on arena-hard judgments that cover part of the game (each model against the
    baseline): no --missing policy needed; the win rates are those of the judged battles (arena-hard-auto's
    own definition, as the module's imputed run has them too), and the run stores the judged cells only,
    none imputed. An equilibrium method beside it still needs the whole game."""
    db, ratings, _ = rated
    args = ["rate", "--dataset", "tiny-bench", "--methods", "winrate", "--baseline", BASELINE, "--bootstrap", "0"]
    out = runner.invoke(app, [*args, "--db", str(db)])
    assert out.exit_code == 0, out.output
    assert "cells judged" in out.output and "none imputed, none dropped" in out.output
    (run_id,) = query(db, "SELECT run_id FROM runs WHERE kind = 'rate' ORDER BY started_at DESC LIMIT 1")[0]
    stored = dict(
        query(
            db,
            f"SELECT action, rating FROM ratings WHERE run_id = '{run_id}' AND player = 'king' AND method = 'winrate'",
        )
    )
    reference = reference_win_rates(reference_battles(SAMPLE))
    assert stored.keys() == reference.keys()
    for model, rating in stored.items():
        assert rating == pytest.approx(reference[model], abs=1e-9)
        assert ratings[("winrate", model)][0] == pytest.approx(rating, abs=1e-9)
    cells = query(
        db,
        "SELECT count(*), count(*) FILTER (WHERE imputed), count(*) FILTER (WHERE isnan(u_king)) FROM payoffs "
        f"WHERE run_id = '{run_id}'",
    )[0]
    judged_pairs = query(  # (prompt, pair) cells judged in both orders (rate's default --orders both)
        db,
        "SELECT count(*) FROM (SELECT DISTINCT prompt_id, model_a, model_b FROM judgments WHERE dataset = "
        "'tiny-bench' AND status = 'ok') one JOIN (SELECT DISTINCT prompt_id, model_a, model_b FROM judgments "
        "WHERE dataset = 'tiny-bench' AND status = 'ok') other ON one.prompt_id = other.prompt_id AND "
        "one.model_a = other.model_b AND one.model_b = other.model_a AND one.model_a < one.model_b",
    )[0][0]
    assert cells == (2 * judged_pairs, 0, 0)  # each judged cell as (king, rebel) and (rebel, king), nothing else
    with_bt = runner.invoke(app, [*args[:4], "winrate,bt", *args[5:], "--db", str(db)])  # BT fits the battles too
    assert with_bt.exit_code == 0, with_bt.output
    bt = dict(query(db, "SELECT model_id, rating FROM latest_model_ratings WHERE method = 'bt'"))
    for (method, model), (rating, _, _) in ratings.items():
        if method == "bt":
            assert bt[model] == pytest.approx(rating, abs=1e-6)  # as the module's imputed run fitted it
    refused = runner.invoke(app, ["rate", "--dataset", "tiny-bench", "--methods", "winrate,ne", "--db", str(db)])
    assert refused.exit_code == 1 and "pass --missing impute" in " ".join(refused.output.split())
