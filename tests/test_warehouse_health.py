"""In-process checks of the warehouse's safety parts: bounded messages, runs whose process is gone,
the readers' snapshot, and the table verification that finds a damaged block."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone

import duckdb
import psutil
import pytest

from eqarena import warehouse
from eqarena.messages import LINE_LIMIT, bounded, shortened
from eqarena.warehouse.runs import RunRecord, mark_abandoned_runs, recent_runs, upsert_run
from eqarena.warehouse.snapshot import publish_snapshot, snapshot_path
from eqarena.warehouse.verify import verify_tables

pytestmark = pytest.mark.unit


def test_bounded_cuts_long_values_and_keeps_short_ones():
    value = "y" * 5000
    line = bounded(f"f.csv:3: unknown verdict {value!r}\n(second line)")
    assert line.startswith("f.csv:3: unknown verdict 'yyy") and "\n" not in line
    assert line.endswith("…' (5,000 characters) (second line)")
    assert len(line) < 300
    assert bounded("score 7.0 is outside [-1, 1]") == "score 7.0 is outside [-1, 1]"
    assert shortened("abc", 2) == "ab… (3 characters)"
    assert len(bounded("z" * 10 * LINE_LIMIT)) < LINE_LIMIT + 30


def _free_pid() -> int:
    taken = set(psutil.pids())
    return next(pid for pid in range(4_000_000, 3_000_000, -1) if pid not in taken)


def test_runs_of_dead_processes_are_marked_abandoned(db_path):
    con = warehouse.connect(db_path)
    now = datetime.now(timezone.utc)
    upsert_run(con, RunRecord("import-dead", "import", now, status="running", pid=_free_pid()))
    upsert_run(
        con,
        RunRecord(
            "import-reused",
            "import",
            now,
            status="running",
            pid=os.getpid(),
            process_started=psutil.Process().create_time() - 3600,
        ),
    )  # the pid, another process
    upsert_run(con, RunRecord("import-alive", "import", now, status="running"))  # this process
    upsert_run(con, RunRecord("import-elsewhere", "import", now, status="running", pid=_free_pid(), host="other"))
    shown = {r.run_id: r.status for r in recent_runs(con, limit=10)}
    assert shown == {
        "import-dead": "abandoned",
        "import-reused": "abandoned",
        "import-alive": "running",
        "import-elsewhere": "running",
    }
    assert con.execute("SELECT count(*) FROM runs WHERE status = 'abandoned'").fetchone()[0] == 0  # only shown
    assert mark_abandoned_runs(con) == 2
    rows = dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    assert rows == {
        "import-dead": "abandoned",
        "import-reused": "abandoned",
        "import-alive": "running",
        "import-elsewhere": "running",
    }
    assert mark_abandoned_runs(con) == 0
    con.close()


def test_snapshot_is_a_whole_copy_beside_the_warehouse(tmp_path):
    db = tmp_path / "w.duckdb"
    assert snapshot_path(db) == tmp_path / "w.snapshot.duckdb"
    assert snapshot_path(tmp_path / "w.db") == tmp_path / "w.db.snapshot.duckdb"
    con = warehouse.connect(db)
    upsert_run(con, RunRecord("rate-1", "rate", datetime.now(timezone.utc)))
    published = publish_snapshot(con)
    upsert_run(con, RunRecord("rate-2", "rate", datetime.now(timezone.utc)))  # after the snapshot
    con.close()
    assert published == snapshot_path(db)
    with duckdb.connect(str(published), read_only=True) as reader:
        assert reader.execute("SELECT run_id FROM runs").fetchall() == [("rate-1",)]
        assert reader.execute("SELECT count(*) FROM latest_model_ratings").fetchone()[0] == 0  # views too
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert publish_snapshot(duckdb.connect()) is None  # in memory: nothing to copy


@pytest.mark.integration  # a second process
def test_publishing_a_snapshot_keeps_the_writers_lock(tmp_path):
    """DuckDB's lock is a POSIX record lock, dropped when its process closes any descriptor of the file:
    a snapshot copied from the writing process let a second writer in while the first still wrote."""
    db = tmp_path / "w.duckdb"
    con = warehouse.connect(db)
    upsert_run(con, RunRecord("rate-1", "rate", datetime.now(timezone.utc)))
    publish_snapshot(con)
    second = subprocess.run(
        [sys.executable, "-c", f"import duckdb; duckdb.connect({str(db)!r})"], capture_output=True, text=True
    )
    con.close()
    assert second.returncode != 0 and "lock" in second.stderr.lower(), second.stderr


def test_snapshot_publishing_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("EQARENA_SNAPSHOT", "0")
    with warehouse.connect(tmp_path / "w.duckdb") as con:
        assert publish_snapshot(con) is None
    assert not snapshot_path(tmp_path / "w.duckdb").exists()


def test_verify_tables_finds_a_damaged_block(tmp_path):
    db = tmp_path / "w.duckdb"
    with warehouse.connect(db) as con:
        con.execute("CREATE TABLE big AS SELECT range AS i, md5(range::VARCHAR) AS s FROM range(200000)")
        block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        block = con.execute(
            "SELECT min(block_id) FROM pragma_storage_info('big') WHERE block_id >= 0 AND column_name = 's'"
        ).fetchone()[0]
    with duckdb.connect(str(db), read_only=True) as con:
        checks = {c.table: c for c in verify_tables(con)}
    assert all(c.ok for c in checks.values()) and checks["big"].rows == 200000
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(db, damaged)
    with open(damaged, "r+b") as f:
        f.seek(3 * 4096 + block * block_size + 1000)
        f.write(b"\xff" * 64)
    with duckdb.connect(str(damaged), read_only=True) as con:
        checks = {c.table: c for c in verify_tables(con)}
        assert con.execute("SELECT count(*) FROM big").fetchone()[0] == 200000  # counting alone does not see it
    assert not checks["big"].ok and "checksum" in checks["big"].error.lower()
    assert checks["runs"].ok


def test_unusable_paths_raise_one_line_errors(tmp_path):
    (tmp_path / "dir.duckdb").mkdir()
    with pytest.raises(warehouse.WarehouseUnusableError, match="is a directory"):
        warehouse.connect(tmp_path / "dir.duckdb")
    (tmp_path / "text.duckdb").write_text("not a database\n")
    with pytest.raises(warehouse.WarehouseUnusableError, match="is not a DuckDB database file"):
        warehouse.connect(tmp_path / "text.duckdb")
    (tmp_path / "file").write_text("")
    with pytest.raises(warehouse.WarehouseUnusableError, match="cannot create"):
        warehouse.connect(tmp_path / "file" / "w.duckdb")
