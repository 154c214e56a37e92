"""The importers' readers (no warehouse): how each format maps to judgments, and bad rows named by
file:line (or file: row N for Parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from eqarena.datasets.records import DatasetError, judgment_records
from eqarena.importers.arena_hard_auto import default_dataset_name, read_arena_hard_judgments
from eqarena.importers.battles import read_battles
from eqarena.importers.pairwise import read_pairwise_table
from eqarena.importers.preferences import read_preference_table
from eqarena.importers.scores import payoff_template, read_score_table
from eqarena.warehouse.tensor import score_payoffs

pytestmark = pytest.mark.unit

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "import"
AHA_DIR = EXAMPLES / "tiny-bench" / "model_judgment"


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def by_key(judgments: pl.DataFrame) -> dict:
    return {(j.judge, j.prompt_id, j.model_a, j.model_b, j.sample_index): j for j in judgment_records(judgments)}


# ---- arena-hard-auto ------------------------------------------------------------------------------


def test_arena_hard_auto_games_keep_order_and_labels():
    imported = read_arena_hard_judgments([AHA_DIR], None, None)
    data = imported.dataset
    assert data.name == "tiny-bench"  # the folder above model_judgment/
    assert default_dataset_name(AHA_DIR / "gpt-4o-2024-08-06" / "atlas-7b.jsonl") == "tiny-bench"
    assert set(data.models) == {"gpt-4-0314", "atlas-7b", "borealis-13b", "cirrus-70b"}
    assert len(data.judgments) == 3 * 8 * 2
    judged = by_key(data.judgments)
    line = json.loads((AHA_DIR / "gpt-4o-2024-08-06" / "borealis-13b.jsonl").read_text().splitlines()[2])
    game1 = judged[("arena-hard-auto:gpt-4o-2024-08-06", line["question_id"], "gpt-4-0314", "borealis-13b", 0)]
    game2 = judged[("arena-hard-auto:gpt-4o-2024-08-06", line["question_id"], "borealis-13b", "gpt-4-0314", 0)]
    labels = {"A>>B": 1.0, "A>B": 0.5, "A=B": 0.0, "B>A": -0.5, "B>>A": -1.0}
    assert (game1.verdict, game1.score) == (line["games"][0]["score"], labels[line["games"][0]["score"]])
    assert (game2.verdict, game2.score) == (line["games"][1]["score"], labels[line["games"][1]["score"]])
    assert game1.raw_text == line["games"][0]["judgment"]
    assert game1.template_hash == "arena-hard-auto"
    # The game without a label is kept as unparsed, with its text, never scored 0.
    unparsed = [j for j in judgment_records(data.judgments) if j.status == "unparsed"]
    assert len(unparsed) == 1 and unparsed[0].score is None and unparsed[0].verdict is None
    assert (unparsed[0].prompt_id, unparsed[0].model_a) == ("q05", "cirrus-70b")
    assert "hard to compare" in unparsed[0].raw_text


def test_arena_hard_auto_v2_layout_names_baseline_and_template(tmp_path):
    system = "You are a fair judge. Compare the two answers."
    game = {
        "score": "b < a",
        "judgment": {"answer": "... [[B<A]]"},
        "prompt": [{"role": "system", "content": system}, {"role": "user", "content": "..."}],
    }
    path = write_jsonl(
        tmp_path / "model-x.jsonl",
        [
            {
                "uid": "u1",
                "category": "hard_prompt",
                "judge": "judge-y",
                "model": "model-x",
                "baseline": "o3-mini",
                "games": [game, None],
            },
        ],
    )
    imported = read_arena_hard_judgments([path], "bench", None)
    (only,) = judgment_records(imported.dataset.judgments)
    assert (only.model_a, only.model_b, only.verdict, only.score) == ("o3-mini", "model-x", "A>B", 0.5)
    assert only.judge == "arena-hard-auto:judge-y" and only.raw_text == "... [[B<A]]"
    assert len(only.template_hash) == 16 and only.template_hash != "arena-hard-auto"
    assert any("null" in note for note in imported.notes)


def test_arena_hard_auto_baseline_option_and_self_games(tmp_path):
    games = [{"score": "A>B", "judgment": "x"}, {"score": "B>A", "judgment": "y"}]
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            {"question_id": 1, "model": "m", "judge": "j", "games": games},
            {"question_id": 2, "model": "base", "judge": "j", "games": games},
        ],
    )
    imported = read_arena_hard_judgments([path], "d", "base")
    assert {(j.prompt_id, j.model_a, j.model_b) for j in judgment_records(imported.dataset.judgments)} == {
        ("1", "base", "m"),
        ("1", "m", "base"),
    }
    assert any("baseline against itself" in n for n in imported.notes)


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"m\.jsonl:2: malformed JSON"),
        ({"model": "m", "judge": "j", "games": []}, r"m\.jsonl:2: missing field question_id"),
        ({"question_id": "q", "model": "m", "judge": "j", "games": "A>B"}, r"m\.jsonl:2: field games must be a list"),
        (
            {"question_id": "q", "model": "m", "judge": "j", "games": [{"score": 3}]},
            r"m\.jsonl:2: games\[0\]\.score must be a verdict label",
        ),
        (
            {"question_id": "q1", "model": "m", "judge": "j", "games": []},
            r"m\.jsonl:2: duplicate judgment of 'm' on 'q1' by 'j' \(first at line 1\)",
        ),
    ],
)
def test_arena_hard_auto_bad_lines(tmp_path, line, message):
    good = {"question_id": "q1", "model": "m", "judge": "j", "games": [{"score": "A>B", "judgment": ""}]}
    path = write_jsonl(tmp_path / "m.jsonl", [good, line])
    with pytest.raises(DatasetError, match=message):
        read_arena_hard_judgments([path], "d", None)


# ---- battles ---------------------------------------------------------------------------------------


def test_battles_sample_maps_winners_and_counts_samples():
    data = read_battles([EXAMPLES / "battles.jsonl"], None, None).dataset
    rows = [json.loads(line) for line in (EXAMPLES / "battles.jsonl").read_text().splitlines()]
    assert data.name == "battles" and len(data.judgments) == len(rows)
    winners = {"model_a": 1.0, "model_b": -1.0, "tie": 0.0, "tie (bothbad)": 0.0}
    seen: dict[tuple, int] = {}
    judged = by_key(data.judgments)
    for row in rows:
        key = (row["question_id"], row["model_a"], row["model_b"])
        sample = seen.get(key, 0)
        seen[key] = sample + 1
        j = judged[("battles:battles", *key, sample)]
        assert j.score == winners[row["winner"]]
        assert json.loads(j.raw_text)["judge"] == row["judge"]  # the voter is kept, not the judge id
    texts = {p.prompt_id: p.text for p in data.prompts}
    assert texts["q01"] == "Write a haiku about autumn rain."


def test_battles_without_question_id_pool_on_one_prompt_and_turns_split(tmp_path):
    pooled = write_jsonl(
        tmp_path / "arena.jsonl",
        [
            {"model_a": "x", "model_b": "y", "winner": "model_a"},
            {"model_a": "x", "model_b": "y", "winner": "tie"},
        ],
    )
    imported = read_battles([pooled], None, "arena-users")
    assert {(j.prompt_id, j.sample_index, j.score, j.judge) for j in judgment_records(imported.dataset.judgments)} == {
        ("all", 0, 1.0, "arena-users"),
        ("all", 1, 0.0, "arena-users"),
    }
    assert "one prompt" in imported.notes[0]
    turns = write_jsonl(
        tmp_path / "mt.jsonl",
        [
            {"question_id": 81, "turn": 1, "model_a": "x", "model_b": "y", "winner": "model_b"},
            {"question_id": 81, "turn": 2, "model_a": "x", "model_b": "y", "winner": "model_b"},
        ],
    )
    assert {j.prompt_id for j in judgment_records(read_battles([turns], None, None).dataset.judgments)} == {
        "81",
        "81#2",
    }


def test_battles_json_array_and_parquet(tmp_path):
    rows = [
        {"question_id": "a", "model_a": "x", "model_b": "y", "winner": "model_b"},
        {"question_id": "a", "model_a": "y", "model_b": "x", "winner": "model_a"},
    ]
    array = tmp_path / "battles.json"
    array.write_text(json.dumps(rows, indent=2))
    parquet = tmp_path / "battles.parquet"
    pl.DataFrame(rows).write_parquet(parquet)
    for path in (array, parquet):
        scores = sorted(
            (j.model_a, j.score) for j in judgment_records(read_battles([path], "d", None).dataset.judgments)
        )
        assert scores == [("x", -1.0), ("y", 1.0)]


def test_battle_errors_name_the_line_or_row(tmp_path):
    rows = [
        {"question_id": "a", "model_a": "x", "model_b": "y", "winner": "model_a"},
        {"question_id": "a", "model_a": "x", "model_b": "y", "winner": "left"},
    ]
    array = tmp_path / "battles.json"
    array.write_text(json.dumps(rows, indent=2))
    with pytest.raises(DatasetError, match=r"battles\.json:8: unknown verdict 'left'"):
        read_battles([array], "d", None)
    parquet = tmp_path / "battles.parquet"
    pl.DataFrame(rows).write_parquet(parquet)
    with pytest.raises(DatasetError, match=r"battles\.parquet: row 2: unknown verdict 'left'"):
        read_battles([parquet], "d", None)
    same = write_jsonl(tmp_path / "same.jsonl", [{"model_a": "x", "model_b": "x", "winner": "tie"}])
    with pytest.raises(DatasetError, match=r"same\.jsonl:1: model_a and model_b are both 'x'"):
        read_battles([same], "d", None)
    columns = write_jsonl(tmp_path / "cols.jsonl", [{"model_a": "x", "model_b": "y", "result": "tie"}])
    with pytest.raises(
        DatasetError,
        match=r"cols\.jsonl: missing column winner \(columns: model_a, model_b, "
        r"result\)",
    ):
        read_battles([columns], "d", None)


def test_battles_keep_the_anonymous_ones_unless_named_battles_asked(tmp_path):
    rows = [
        {"question_id": "a", "model_a": "x", "model_b": "y", "winner": "model_a", "anony": True},
        {"question_id": "b", "model_a": "x", "model_b": "y", "winner": "model_b", "anony": False},
        {"question_id": "c", "model_a": "y", "model_b": "x", "winner": "tie", "anony": True},
    ]
    log = write_jsonl(tmp_path / "arena.jsonl", rows)
    imported = read_battles([log], "d", None)
    assert sorted(j.prompt_id for j in judgment_records(imported.dataset.judgments)) == ["a", "c"]
    assert "2 anonymous battles imported, 1 named ones (anony false) left out" in imported.notes[0]
    assert "--named-battles" in imported.notes[0]
    named = read_battles([log], "d", None, named=True)
    assert sorted(j.prompt_id for j in judgment_records(named.dataset.judgments)) == ["a", "b", "c"]
    assert not named.notes
    csv = tmp_path / "arena.csv"  # text flags, as a CSV export writes them
    pl.DataFrame([{**r, "anony": str(r["anony"])} for r in rows]).write_csv(csv)
    assert sorted(j.prompt_id for j in judgment_records(read_battles([csv], "d", None).dataset.judgments)) == ["a", "c"]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{**rows[0], "anony": "maybe"}])
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: anony must be true or false; got 'maybe'"):
        read_battles([bad], "d", None)
    only_named = write_jsonl(tmp_path / "named.jsonl", [rows[1]])
    with pytest.raises(DatasetError, match=r"named\.jsonl: all 1 battles are named .*--named-battles"):
        read_battles([only_named], "d", None)


# ---- pairwise long table ---------------------------------------------------------------------------


def test_pairwise_sample_reads_verdicts_judge_and_text():
    data = read_pairwise_table([EXAMPLES / "pairwise.csv"], None, None).dataset
    frame = pl.read_csv(EXAMPLES / "pairwise.csv", infer_schema=False)
    assert data.name == "pairwise" and len(data.judgments) == frame.height
    labels = {"A>>B": 1.0, "A>B": 0.5, "A=B": 0.0, "B>A": -0.5, "B>>A": -1.0}
    judged = by_key(data.judgments)
    for row in frame.iter_rows(named=True):
        j = judged[(row["judge"], row["prompt_id"], row["model_a"], row["model_b"], int(row["sample"]))]
        assert (j.verdict, j.score) == (row["verdict"], labels[row["verdict"]])
    assert {p.prompt_id: p.text for p in data.prompts}["q05"] == "What is the derivative of x^x?"


def test_pairwise_scores_ids_and_default_samples(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("question_id,model_a,model_b,score\n007,x,y,0.25\n007,x,y,-1\n8,y,x,1\n")
    data = read_pairwise_table([path], "d", None).dataset
    assert sorted(
        (j.prompt_id, j.model_a, j.sample_index, j.score, j.judge) for j in judgment_records(data.judgments)
    ) == [
        ("007", "x", 0, 0.25, "imported:mine"),
        ("007", "x", 1, -1.0, "imported:mine"),
        ("8", "y", 0, 1.0, "imported:mine"),
    ]


@pytest.mark.parametrize(
    "body, message",
    [
        ("prompt_id,model_a,model_b,score\np,x,y,0.5\np,x,y,1.5\n", r"t\.csv:3: score 1\.5 is outside \[-1, 1\]"),
        ("prompt_id,model_a,model_b,score\np,x,y,0.5\np,x,y,abc\n", r"t\.csv:3: score 'abc' is not a finite number"),
        ("prompt_id,model_a,model_b,score\np,x,y,\n", r"t\.csv:2: empty score"),
        ("prompt_id,model_a,model_b,verdict\np,x,y,A>B\np,x,y,A>>>B\n", r"t\.csv:3: unknown verdict 'A>>>B'"),
        ("prompt_id,model_a,model_b,score\np,x,,0\n", r"t\.csv:2: empty model_b"),
        (
            "prompt_id,model_a,model_b,score,sample\np,x,y,0,0\np,x,y,1,0\n",
            r"t\.csv:3: duplicate judgment \(judge 'imported:t', prompt 'p', 'x' vs 'y', sample 0\) "
            r"\(first at line 2\)",
        ),
        ("prompt_id,model_a,model_b,score,sample\np,x,y,0,-1\n", r"t\.csv:2: sample -1\.0 must be a non-negative"),
        ("prompt_id,model_a,score\np,x,0\n", r"t\.csv: missing column model_b \(columns: prompt_id, model_a, score\)"),
        ("prompt_id,model_a,model_b\np,x,y\n", r"t\.csv: missing column score or verdict"),
        # A quoted cell spanning two lines pushes the next row's line number down.
        (
            'prompt_id,model_a,model_b,score,prompt_text\np,x,y,0,"two\nlines"\np,x,y,2,z\n',
            r"t\.csv:4: score 2\.0 is outside",
        ),
    ],
)
def test_pairwise_bad_rows_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "t.csv"
    path.write_text(body)
    with pytest.raises(DatasetError, match=message):
        read_pairwise_table([path], "d", None)


def test_pairwise_jsonl_line_numbers_count_blank_lines(tmp_path):
    path = write_jsonl(
        tmp_path / "t.jsonl",
        [
            {"prompt_id": "p", "model_a": "x", "model_b": "y", "score": 1},
            "",
            {"prompt_id": "p", "model_a": "x", "model_b": "y", "score": "high"},
        ],
    )
    with pytest.raises(DatasetError, match=r"t\.jsonl:3: score 'high' is not a finite number"):
        read_pairwise_table([path], "d", None)


# ---- per-prompt scores -----------------------------------------------------------------------------


def test_score_table_keeps_every_score_and_its_payoff_rule():
    imported = read_score_table([EXAMPLES / "scores.csv"], None, None)
    data = imported.dataset
    frame = pl.read_csv(EXAMPLES / "scores.csv", infer_schema=False)
    models = [c for c in frame.columns if c != "prompt_id"]
    expected = {(row["prompt_id"], m): float(row[m]) for row in frame.iter_rows(named=True) for m in models if row[m]}
    stored = {(p, m): s for p, m, s in data.scores.select("prompt_id", "model_id", "score").iter_rows()}
    assert stored == expected and len(stored) == 8 * 4 - 2
    assert set(data.scores["template_hash"]) == {payoff_template("clip-diff", 1.0)}
    assert set(data.scores["judge"]) == {"scores:scores"} and data.judgments.height == 0
    assert any("2 empty score cell(s)" in n for n in imported.notes)


def test_score_payoffs_are_clipped_differences_or_signs(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("task,model,score\nt1,x,90\nt1,y,40\nt1,z,90\n")
    table = read_score_table([path], "d", "b", "clip-diff", 100.0).dataset.scores
    assert set(table["scale"]) == {100.0} and set(table["payoff"]) == {"clip-diff"}
    scores = np.array([90.0, 40.0, 90.0, np.nan])  # x, y, z, w (w not scored)
    clipped = score_payoffs(scores, "clip-diff", 100.0)
    assert clipped[0, 1] == pytest.approx(0.5) and clipped[1, 0] == pytest.approx(-0.5) and clipped[0, 2] == 0.0
    assert np.isnan(clipped[3]).all() and np.isnan(np.diag(clipped)).all()
    assert score_payoffs(scores * 10, "clip-diff", 1.0)[0, 1] == 1.0  # a gap of `scale` or more is decisive
    signs = score_payoffs(scores, "sign", 1.0)
    assert signs[1, 2] == -1.0 and signs[2, 1] == 1.0 and signs[0, 2] == 0.0
    assert set(read_score_table([path], "d", "b", "sign", 1.0).dataset.scores["template_hash"]) == {
        "scores:sign/scale=1"
    }


@pytest.mark.parametrize(
    "body, message",
    [
        ("prompt_id,x,y\np1,0.5,0.2\np2,0.5,lots\n", r"s\.csv:3: y 'lots' is not a finite number"),
        (
            "prompt_id,model,score\np1,x,1\np1,x,2\n",
            r"s\.csv:3: duplicate score of model 'x' on prompt 'p1' "
            r"\(first at line 2\)",
        ),
        ("name,x,y\np1,1,2\n", r"s\.csv: missing column prompt_id"),
        ("prompt_id,x\np1,1\n", r"s\.csv: a wide score table needs a column per model"),
        ("prompt_id,x,y\np1,1,\np2,,3\n", r"s\.csv: no prompt has scores of two models"),
    ],
)
def test_score_table_bad_rows(tmp_path, body, message):
    path = tmp_path / "s.csv"
    path.write_text(body)
    with pytest.raises(DatasetError, match=message):
        read_score_table([path], "d", None)


# ---- table layouts: models-by-tasks scores, preference tables, --id-column --------------------------


def test_models_by_tasks_scores_keep_every_cell_with_tasks_as_prompts():
    path = EXAMPLES / "livebench-style.csv"
    imported = read_score_table([path], None, None, "clip-diff", 100.0, "models-by-tasks")
    frame = pl.read_csv(path, infer_schema=False)
    tasks = [c for c in frame.columns if c != "model"]
    expected = {
        (t, row["model"]): float(row[t])
        for row in frame.iter_rows(named=True)
        for t in tasks
        if row[t] and row[t] != "NaN"
    }
    stored = {(p, m): s for p, m, s in imported.dataset.scores.select("prompt_id", "model_id", "score").iter_rows()}
    assert stored == expected and len(stored) == 4 * len(tasks) - 2
    assert [p.prompt_id for p in imported.dataset.prompts] == tasks
    assert any("2 empty score cell(s)" in n for n in imported.notes)
    # Read as a wide table instead, the model names would be prompts: refused, naming the layout.
    with pytest.raises(DatasetError, match=r"one row per model and a column per task\? pass --layout models-by-tasks"):
        read_score_table([path], None, None)


def test_preference_table_is_two_judgments_per_cell_against_the_baseline(tmp_path):
    path = EXAMPLES / "alpacaeval-style.csv"
    data = read_preference_table([path], None, None, "gpt4_turbo").dataset
    frame = pl.read_csv(path, infer_schema=False)
    models = [c for c in frame.columns if c not in ("instruction_idx", "instruction")]
    cells = {
        (row["instruction_idx"], m): float(row[m]) for row in frame.iter_rows(named=True) for m in models if row[m]
    }
    judged = by_key(data.judgments)
    assert len(judged) == 2 * len(cells) == 2 * (8 * 4 - 1)
    for (prompt, model), preference in cells.items():
        forward = judged[("imported:alpacaeval-style", prompt, model, "gpt4_turbo", 0)]
        reverse = judged[("imported:alpacaeval-style", prompt, "gpt4_turbo", model, 0)]
        assert forward.score == pytest.approx((preference - 1.5) * 2) and forward.status == "ok"
        assert reverse.score == pytest.approx(-forward.score)
    assert {j.template_hash for j in judged.values()} == {"preferences"}
    assert data.prompts[0].text == frame["instruction"][0]
    # A column of the baseline itself is skipped, not judged against itself.
    path = tmp_path / "p.csv"
    path.write_text("prompt_id,x,base\nq1,2,1.5\n")
    imported = read_preference_table([path], "d", None, "base")
    assert imported.dataset.judgments.height == 2 and any("skipped the column" in n for n in imported.notes)


@pytest.mark.parametrize(
    "body, message",
    [
        ("prompt_id,x,y\nq1,1.5,2\nq2,1,2.5\n", r"p\.csv:3: preference 2.5 of 'y' is outside \[1, 2\]"),
        ("prompt_id,x,y\nq1,0.9,2\nq2,1,2.5\n", r"p\.csv:2: preference 0.9 of 'x' is outside \[1, 2\]"),
        ("prompt_id,x\nq1,1.5\nq2,better\n", r"p\.csv:3: x 'better' is not a finite number"),
        ("prompt_id,x\nq1,1.5\nq1,2\n", r"p\.csv:3: duplicate judgment .*prompt 'q1'.* \(first at line 2\)"),
        ("prompt_id,x\nq1,\n", r"p\.csv: no preferences"),
        (
            "instruction,x\nhello,1.5\n",
            r"p\.csv: missing column prompt_id \(or question_id / instruction_idx\) "
            r"\(columns: instruction, x\)",
        ),
    ],
)
def test_preference_table_bad_cells(tmp_path, body, message):
    path = tmp_path / "p.csv"
    path.write_text(body)
    with pytest.raises(DatasetError, match=message):
        read_preference_table([path], "d", None, "base")


def test_an_alpacaeval_preference_table_has_one_reading():
    """AlpacaEval's preference table read as scores by default is refused, naming the command that reads it as
    what it is (judgments against the baseline); only an explicit --layout wide reads its values as scores."""
    path = EXAMPLES / "alpacaeval-style.csv"
    with pytest.raises(DatasetError, match=r"an AlpacaEval preference table .* --layout preferences --baseline MODEL"):
        read_score_table([path], None, None)
    as_judgments = read_preference_table([path], None, None, "gpt4_turbo").dataset
    assert as_judgments.judgments.height > 0 and as_judgments.scores.height == 0
    forced = read_score_table([path], None, None, layout="wide", id_name="instruction_idx").dataset
    assert forced.scores.height > 0 and "instruction" not in set(forced.scores["model_id"])


def test_alpacaevals_draw_written_as_0_is_a_draw(tmp_path):
    """AlpacaEval writes a draw as 1.5 or as 0: both are stored as score 0 in both orders, the raw text keeps
    the 0 as given, and a note counts the 0s."""
    path = tmp_path / "p.csv"
    path.write_text("prompt_id,x,y\nq1,0,2\nq2,1.5,1\n")
    imported = read_preference_table([path], "d", None, "base")
    judged = by_key(imported.dataset.judgments)
    for prompt, model in (("q1", "x"), ("q2", "x")):
        assert judged[("imported:p", prompt, model, "base", 0)].score == 0.0
        assert judged[("imported:p", prompt, "base", model, 0)].score == 0.0
    assert judged[("imported:p", "q1", "x", "base", 0)].raw_text == "preference 0.0"
    assert judged[("imported:p", "q1", "y", "base", 0)].score == 1.0
    assert judged[("imported:p", "q2", "y", "base", 0)].score == -1.0
    assert any("1 preference(s) of 0, AlpacaEval's draw, read as 1.5" in n for n in imported.notes)


def test_a_table_missing_its_id_column_names_the_option_that_reads_it(tmp_path):
    """A wide score table whose first column is another id names --id-column with it; read that way it imports."""
    path = tmp_path / "s.csv"
    path.write_text("session_id,x,y\ns1,0.5,0.7\ns2,0.6,0.1\n")
    with pytest.raises(DatasetError, match=r"; if session_id names the rows, pass --id-column session_id$"):
        read_score_table([path], "d", None)
    imported = read_score_table([path], "d", None, id_name="session_id")
    assert sorted(p.prompt_id for p in imported.dataset.prompts) == ["s1", "s2"]


def test_models_by_tasks_bad_cells(tmp_path):
    path = tmp_path / "lb.csv"
    path.write_text("model,t1,t2\nx,50,60\ny,55,n/a\n")
    with pytest.raises(DatasetError, match=r"lb\.csv:3: t2 'n/a' is not a finite number"):
        read_score_table([path], "d", None, layout="models-by-tasks")
    path.write_text("name,t1\nx,50\n")
    with pytest.raises(DatasetError, match=r"lb\.csv: missing column model \(or model_name\) \(columns: name, t1\)"):
        read_score_table([path], "d", None, layout="models-by-tasks")


def test_id_column_names_the_id_of_every_table_layout(tmp_path):
    wide = tmp_path / "wide.csv"
    wide.write_text("session_id,prompt_id,x,y\ns1,p9,1,0\n")  # the named id wins over prompt_id
    scores = read_score_table([wide], "d", None, id_name="session_id").dataset.scores
    assert set(scores.select("prompt_id", "model_id").iter_rows()) == {("s1", "x"), ("s1", "y")}
    long = tmp_path / "long.csv"
    long.write_text("qid,model,score\nq1,x,1\nq1,y,0\n")
    assert set(read_score_table([long], "d", None, layout="long", id_name="qid").dataset.scores["prompt_id"]) == {"q1"}
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("Model,t1,t2\nx,50,60\ny,55,65\n")
    scores = read_score_table([tasks], "d", None, layout="models-by-tasks", id_name="Model").dataset.scores
    assert set(scores["model_id"]) == {"x", "y"} and set(scores["prompt_id"]) == {"t1", "t2"}
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("turn_id,model_a,model_b,verdict\nt7,x,y,A>B\n")
    assert read_pairwise_table([pairs], "d", None, "turn_id").dataset.judgments["prompt_id"].to_list() == ["t7"]
    prefs = tmp_path / "prefs.csv"
    prefs.write_text("idx,x\n3,2\n")
    judged = read_preference_table([prefs], "d", None, "base", "idx").dataset.judgments
    assert set(judged["prompt_id"]) == {"3"}
    for read in (
        lambda: read_score_table([wide], "d", None, id_name="turn"),
        lambda: read_pairwise_table([pairs], "d", None, "turn"),
        lambda: read_preference_table([prefs], "d", None, "base", "turn"),
    ):
        with pytest.raises(DatasetError, match=r"missing column turn \(--id-column\) \(columns: "):
            read()
    with pytest.raises(
        DatasetError,
        match=r"missing column turn \(--id-column\) \(columns: session_id, prompt_id, "
        r"x, y\)",
    ):
        read_score_table([wide], "d", None, id_name="turn")


def test_pairwise_error_verdicts_are_stored_unparsed_and_counted(tmp_path):
    path = tmp_path / "mt.csv"
    path.write_text("question_id,model_a,model_b,verdict\n81,x,y,model_a\n81,y,x,error\n82,x,y, Error \n82,y,x,tie\n")
    imported = read_pairwise_table([path], "d", None)
    judged = by_key(imported.dataset.judgments)
    assert [(k[1], k[2]) for k, j in judged.items() if j.status == "unparsed"] == [("81", "y"), ("82", "x")]
    failed = judged[("imported:mt", "81", "y", "x", 0)]
    assert failed.score is None and failed.verdict is None and failed.raw_text == "error"
    assert judged[("imported:mt", "81", "x", "y", 0)].score == 1.0
    assert imported.notes == (f"{path}: 2 row(s) with verdict 'error' stored as unparsed (no score)",)
    # Only 'error' is a failed call; other unknown verdicts still stop the import, and a score wins.
    path.write_text("prompt_id,model_a,model_b,verdict,score\np,x,y,error,0.5\np,y,x,oops,\n")
    with pytest.raises(DatasetError, match=r"mt\.csv:3: unknown verdict 'oops'"):
        read_pairwise_table([path], "d", None)
