"""The write buffer's arrival journal (eqarena/warehouse/journal.py): rows handed to a buffer are kept in
a file until their commit, and the next writable connection commits what a killed process left."""

from __future__ import annotations

import json
import os

import pytest

from eqarena import warehouse
from eqarena.warehouse.connection import WarehouseUnusableError
from eqarena.warehouse.journal import left_journals
from eqarena.warehouse.judgments import JudgmentRow, JudgmentWriter

pytestmark = pytest.mark.unit


def _row(index: int, score: float = 0.25) -> JudgmentRow:
    return JudgmentRow(
        "judge-x",
        "t1",
        "toy",
        "p1",
        "m1",
        "m2",
        index,
        "ok",
        verdict="A>B",
        score=score,
        raw_text='[[A>B]] \u00e9\u00e8 "quoted"\n',
        tokens_in=12,
        latency_s=0.125,
        run_id="r1",
    )


def _stored(db) -> list[tuple]:
    con = warehouse.connect(db, read_only=True)
    try:
        return con.execute(
            "SELECT sample_index, score, raw_text, tokens_in, latency_s FROM judgments ORDER BY sample_index"
        ).fetchall()
    finally:
        con.close()


def _leave_journal_of_a_dead_process(db, rows: list[JudgmentRow], torn: str = "") -> None:
    """What a process killed between a row's arrival and its commit leaves: a journal, under its pid."""
    con = warehouse.connect(db)
    writer = JudgmentWriter(con, max_delay_s=3600, max_rows=10_000)
    writer.add(rows)
    journal = writer._journal.path
    con.close()
    dead_pid = 2**22 + 17  # above Linux's pid_max default: no live process has it
    moved = journal.with_name(journal.name.replace(f".{os.getpid()}-", f".{dead_pid}-"))
    journal.rename(moved)
    with open(moved, "a", encoding="utf-8") as f:
        f.write(torn)


def test_rows_a_killed_writer_received_are_committed_by_the_next_writer(db_path):
    rows = [_row(0), _row(1, score=-1 / 3), _row(2, score=1.0)]
    _leave_journal_of_a_dead_process(db_path, rows, torn='{"judge": "judge-x", "templ')  # cut mid-line
    assert _stored(db_path) == []  # nothing committed yet: a reader does not see them
    assert len(left_journals(db_path)) == 1

    warehouse.connect(db_path).close()
    stored = _stored(db_path)
    assert [r[0] for r in stored] == [0, 1, 2]
    assert stored[1][1] == -1 / 3 and stored[0][2] == rows[0].raw_text  # exact values, texts intact
    assert stored[0][3:] == (12, 0.125)
    assert left_journals(db_path) == []


def test_a_replay_skips_rows_already_committed(db_path):
    con = warehouse.connect(db_path)
    writer = JudgmentWriter(con)
    writer.add([_row(0)])
    writer.flush()
    con.close()
    _leave_journal_of_a_dead_process(db_path, [_row(0), _row(1)])  # killed after committing row 0 once
    warehouse.connect(db_path).close()
    assert [r[0] for r in _stored(db_path)] == [0, 1]


def test_a_committed_buffer_leaves_no_journal_and_a_live_one_is_not_replayed(db_path):
    con = warehouse.connect(db_path)
    writer = JudgmentWriter(con, max_delay_s=3600)
    writer.add([_row(0)])
    assert writer._journal.path.exists()
    other = warehouse.connect(db_path)  # a second connection of the same process: the journal is ours
    other.close()
    count = "SELECT count(*) FROM judgments"
    assert writer._journal.path.exists() and con.execute(count).fetchone()[0] == 0
    writer.flush()
    assert not writer._journal.path.exists() and con.execute(count).fetchone()[0] == 1
    con.close()


def test_a_file_that_is_not_an_eqarena_journal_stops_with_one_line(db_path):
    warehouse.connect(db_path).close()
    stray = db_path.with_name(f"{db_path.name}.runs.99999999-0.journal")
    stray.write_text(
        json.dumps({"table": "runs; DROP TABLE runs", "key": "run_id", "types": {"run_id": "VARCHAR"}})
        + "\n"
        + json.dumps({"run_id": "x"})
        + "\n"
    )
    with pytest.raises(WarehouseUnusableError, match="not a journal of eqarena's"):
        warehouse.connect(db_path)
    assert stray.exists()
