"""The answer on small public-like data, held to a committed table (tests/data/verdict_regression.csv).

Each row is one fixture in one import layout (the made-up samples of examples/import/, and the degenerate
data of tests/degenerate_data.py), the reference ranking it comes with (its leaderboard's own number, or
the skills it was drawn from), how well eqarena's BT and the method the answer leads with agree with that
reference (Spearman, recorded), and the verdict `rate --bootstrap 0` prints first. A change that moves an
answer fails here and must update the table on purpose. The references are computed from the files
themselves, here, with no eqarena code.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from conftest import query
from degenerate_data import BASELINE, STAR_SKILLS, baseline_preferences, star_battles
from scipy.stats import spearmanr
from typer.testing import CliRunner

from eqarena.cli.app import app

pytestmark = pytest.mark.integration  # imports and rates through the command line

REPO = Path(__file__).resolve().parents[1]
TABLE = Path(__file__).parent / "data" / "verdict_regression.csv"
runner = CliRunner()


def _cases() -> list[dict]:
    with TABLE.open(newline="") as f:
        return list(csv.DictReader(f))


def _fixture(source: str, folder: Path) -> Path:
    """The fixture's file: a path in the repository, or a degenerate data set written into `folder`."""
    if source == "degenerate:star":
        return star_battles(folder / "star.jsonl")
    if source == "degenerate:baseline":
        return baseline_preferences(folder / "base.csv")
    return REPO / source


def _win_share(outcomes: list[tuple[str, str, float]]) -> dict[str, float]:
    """Each model's share of points over its battles (a, b, points of a: 1, 0.5 or 0)."""
    points, games = defaultdict(float), defaultdict(int)
    for a, b, won in outcomes:
        points[a] += won
        points[b] += 1.0 - won
        games[a] += 1
        games[b] += 1
    return {m: points[m] / games[m] for m in games}


_VERDICT_POINTS = {"A>>B": 1.0, "A>B": 1.0, "A=B": 0.5, "B>A": 0.0, "B>>A": 0.0}


def _reference(kind: str, path: Path) -> dict[str, float]:
    """The fixture's own ranking number per model (higher is better), read from its file."""
    if kind == "skills:star":
        return dict(STAR_SKILLS)
    if kind == "skills:baseline":
        return {BASELINE: 0.0, **{f"m{k}": 0.3 * k - 1 for k in range(8)}}
    if kind in ("mean-columns", "mean-rows"):  # empty and NaN cells are missing, not zero
        frame = pl.read_csv(path)
        if kind == "mean-rows":
            means = frame.select("model", pl.mean_horizontal(pl.exclude("model").cast(pl.Float64).fill_nan(None)))
            return dict(means.iter_rows())
        ids = {"prompt_id", "instruction_idx", "instruction"}
        return {c: float(frame[c].cast(pl.Float64).fill_nan(None).mean()) for c in frame.columns if c not in ids}
    if kind == "win-share-battles":
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        won = {"model_a": 1.0, "model_b": 0.0}
        return _win_share([(r["model_a"], r["model_b"], won.get(r["winner"], 0.5)) for r in rows])
    if kind == "win-share-verdicts":
        rows = pl.read_csv(path).to_dicts()
        return _win_share([(r["model_a"], r["model_b"], _VERDICT_POINTS[r["verdict"]]) for r in rows])
    if kind == "win-share-arena-hard":  # each line: game 1 with the baseline as A, game 2 with the model as A
        outcomes = []
        for file in sorted(path.rglob("*.jsonl")):
            for line in file.read_text().splitlines():
                row = json.loads(line)
                for k, game in enumerate(row["games"]):
                    if game["score"] not in _VERDICT_POINTS:  # a judgment without a verdict counts for nothing
                        continue
                    model_first = _VERDICT_POINTS[game["score"]]
                    outcomes.append((row["model"], "baseline", model_first if k == 1 else 1.0 - model_first))
        return _win_share(outcomes)
    raise ValueError(f"unknown reference {kind!r}")


def _spearman(ratings: dict[str, float], reference: dict[str, float], models: list[str]) -> float:
    """Spearman's rho over `models`, the ratings rounded as ranks are (6 decimals): models tied at 0 in an
    equilibrium's support tie on every machine, whatever rounding the solver's last digits carry."""
    return float(spearmanr([round(ratings[m], 6) for m in models], [reference[m] for m in models]).statistic)


def _observe(case: dict, folder: Path) -> tuple[float, str, float, str]:
    """(Spearman of BT against the reference, the method the answer leads with and its Spearman, the verdict
    lines joined by ' | ') of a case, rated afresh."""
    db = folder / "w.duckdb"
    path = _fixture(case["source"], folder)
    imported = runner.invoke(app, ["import", case["format"], str(path), *case["import_args"].split(), "--db", str(db)])
    assert imported.exit_code == 0, imported.output
    rated = runner.invoke(app, ["rate", "--bootstrap", "0", *case["rate_args"].split(), "--db", str(db)])
    assert rated.exit_code == 0, rated.output
    run_id = query(db, "SELECT run_id FROM latest_rate_run")[0][0]
    bt = dict(
        query(db, "SELECT action, rating FROM ratings WHERE run_id = ? AND method = 'bt' AND player = 'king'", [run_id])
    )
    reference = _reference(case["reference"], path)
    models = sorted(set(bt) & set(reference))
    assert len(models) >= 3, (models, sorted(bt), sorted(reference))
    board = json.loads(runner.invoke(app, ["export", "--format", "json", "--db", str(db)]).stdout)
    lead = {e["model"]: e[board["headline"]]["rating"] for e in board["models"]}
    rho, rho_lead = (_spearman(ratings, reference, models) for ratings in (bt, lead))
    lines = rated.stdout.splitlines()
    end = next(k for k, line in enumerate(lines) if "model ratings, run" in line)
    verdict = [line for line in lines[:end] if not line.startswith(("dataset:", "u_king", "eqarena:"))]
    return rho, board["headline"], rho_lead, " | ".join(verdict)


@pytest.mark.parametrize("case", _cases(), ids=[c["name"] for c in _cases()])
def test_the_answer_on_public_like_data_is_the_recorded_one(case, tmp_path):
    rho, lead, rho_lead, verdict = _observe(case, tmp_path)
    assert rho == pytest.approx(float(case["spearman_bt"]), abs=0.005), rho
    assert rho >= 0.75  # BT, fit on the battles alone, agrees with every fixture's own ranking
    assert (lead, round(rho_lead, 3)) == (case["lead"], pytest.approx(float(case["spearman_lead"]), abs=0.005))
    assert verdict == case["verdict"]
