"""`warehouse.status`: counts and judge coverage on hand-built warehouses."""

from __future__ import annotations

import pytest
from ingest_inputs import write_arena_dir

from eqarena import warehouse
from eqarena.tasks.ingest import read_dataset, write_dataset
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments
from eqarena.warehouse.status import warehouse_status

pytestmark = pytest.mark.unit


def ingest_dir(db_path, directory, name):
    """The ingest tasks' own code, without a flow run."""
    write_dataset.fn(str(db_path), read_dataset.fn(str(directory), name), False, "test-run")


def judgment(judge, dataset, prompt, a, b, sample=0, status="ok"):
    ok = status == "ok"
    return JudgmentRow(
        judge=judge,
        template_hash="t",
        dataset=dataset,
        prompt_id=prompt,
        model_a=a,
        model_b=b,
        sample_index=sample,
        status=status,
        verdict="A>B" if ok else None,
        score=1.0 if ok else None,
        error=None if ok else "timeout",
    )


@pytest.fixture
def two_datasets(tmp_path, db_path):
    # d1: 3 prompts x 3 models -> 3 * 3 * 2 = 18 ordered cells; d2: 2 prompts x 2 models -> 4 cells.
    ingest_dir(
        db_path, write_arena_dir(tmp_path / "d1", n_prompts=3, models={"x": "new", "y": "old", "z": "new"}), "d1"
    )
    ingest_dir(db_path, write_arena_dir(tmp_path / "d2", n_prompts=2, models={"x": "new", "w": "old"}), "d2")
    rows = [
        # j1 on d1: five complete cells (one with two samples), one cell with only an error,
        # one judgment of a model without answers in d1 (outside the cells).
        judgment("j1", "d1", "p0", "x", "y"),
        judgment("j1", "d1", "p0", "x", "y", sample=1),
        judgment("j1", "d1", "p0", "y", "x"),
        judgment("j1", "d1", "p1", "x", "z"),
        judgment("j1", "d1", "p1", "z", "x"),
        judgment("j1", "d1", "p2", "y", "z"),
        judgment("j1", "d1", "p2", "z", "y", status="error"),
        judgment("j1", "d1", "p2", "z", "w"),
        # j2: all of d2, one cell of d1.
        *[judgment("j2", "d2", p, a, b) for p in ("p0", "p1") for a, b in (("x", "w"), ("w", "x"))],
        judgment("j2", "d1", "p0", "z", "y"),
    ]
    con = warehouse.connect(db_path)
    insert_judgments(con, rows)
    con.close()
    return db_path


def test_counts_and_coverage(two_datasets):
    con = warehouse.connect(two_datasets, read_only=True)
    found = warehouse_status(con)
    con.close()
    assert found.as_json() == {
        "prompts": 5,
        "models": 4,
        "responses": 3 * 3 + 2 * 2,
        "judgments": {"j1": 8, "j2": 5},
        "coverage": {"j1": 5 / 18, "j2": (4 + 1) / (4 + 18)},
    }
    assert [(d.dataset, d.prompts, d.models, d.responses, d.judgments) for d in found.datasets] == [
        ("d1", 3, 3, 9, 9),
        ("d2", 2, 2, 4, 4),
    ]
    assert [(j.judge, j.ok, j.complete_cells, j.cells) for j in found.judges] == [("j1", 7, 5, 18), ("j2", 5, 5, 22)]


def test_empty_warehouse(db_path):
    warehouse.connect(db_path).close()
    con = warehouse.connect(db_path, read_only=True)
    assert warehouse_status(con).as_json() == {
        "prompts": 0,
        "models": 0,
        "responses": 0,
        "judgments": {},
        "coverage": {},
    }
    con.close()


def test_judge_on_a_dataset_without_answers_has_zero_coverage(db_path):
    con = warehouse.connect(db_path)
    insert_judgments(con, [judgment("j", "nowhere", "p0", "a", "b")])
    found = warehouse_status(con)
    con.close()
    assert found.as_json()["coverage"] == {"j": 0.0}
    assert found.judges[0].cells == 0


def test_dataset_without_responses_counts_its_judged_models(db_path):
    """Imported judgments come without answers: the judged models make the dataset's cells."""
    con = warehouse.connect(db_path)
    con.execute("INSERT INTO prompts (dataset, prompt_id, text) VALUES ('imp', 'p0', ''), ('imp', 'p1', '')")
    insert_judgments(
        con,
        [
            judgment("j", "imp", "p0", "a", "b"),
            judgment("j", "imp", "p0", "b", "a"),
            judgment("j", "imp", "p1", "a", "c"),
        ],
    )
    found = warehouse_status(con)
    con.close()
    assert [(d.dataset, d.prompts, d.models, d.judgments) for d in found.datasets] == [("imp", 2, 3, 3)]
    assert [(j.judge, j.complete_cells, j.cells) for j in found.judges] == [("j", 3, 2 * 3 * 2)]
