"""The warehouse opens, migrates idempotently and refuses a second writer with a one-line error."""

import subprocess
import sys
from pathlib import Path

import pytest

from eqarena import warehouse
from eqarena.warehouse.connection import migrations
from tests.conftest import REPO_ROOT

EQARENA = str(Path(sys.executable).parent / "eqarena")

pytestmark = pytest.mark.unit


def test_migrations_apply_once(db_path):
    con = warehouse.connect(db_path)
    version = warehouse.schema_version(con)
    assert version >= 1
    con.close()
    con = warehouse.connect(db_path)
    rows = con.execute("SELECT version FROM schema_version ORDER BY version").fetchall()
    # Every migration file once, in order; numbers may have gaps (a branch's migration not merged yet).
    assert [r[0] for r in rows] == [v for v, _, _ in migrations()]
    assert rows[-1][0] == version
    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert {"prompts", "models", "responses", "judgments", "runs"} <= tables


@pytest.mark.integration  # a second process
def test_second_writer_gets_clear_error(db_path):
    con = warehouse.connect(db_path)
    code = f"from eqarena import warehouse; warehouse.connect({str(db_path)!r}, wait_s=0)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    con.close()
    assert result.returncode != 0
    assert "WarehouseInUseError" in result.stderr
    import os

    assert f"database {db_path} is in use by process {os.getpid()}" in result.stderr


def test_env_var_overrides_default(tmp_path, monkeypatch):
    target = tmp_path / "from-env.duckdb"
    monkeypatch.setenv("EQARENA_DB", str(target))
    assert warehouse.resolve_db_path() == target
    assert warehouse.resolve_db_path(tmp_path / "flag.duckdb") == tmp_path / "flag.duckdb"


def test_read_only_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        warehouse.connect(tmp_path / "nope.duckdb", read_only=True)


def test_a_link_into_a_missing_folder_is_one_clear_error(tmp_path):
    link = tmp_path / "w.duckdb"
    link.symlink_to(tmp_path / "missing" / "folder" / "w.duckdb")
    with pytest.raises(warehouse.WarehouseUnusableError, match=r"is a link to .*missing/folder/w.duckdb, whose folder"):
        warehouse.connect(link)
    assert not (tmp_path / "missing").exists()  # nothing created on the way


def test_a_file_that_cannot_be_created_is_one_clear_error():
    with pytest.raises(warehouse.WarehouseUnusableError, match=r"^/proc/eq\.duckdb cannot be opened: no such file"):
        warehouse.connect("/proc/eq.duckdb")
    found = subprocess.run(
        [EQARENA, "import", "pairwise", str(REPO_ROOT / "examples/import/pairwise.csv"), "--db", "/proc/eq.duckdb"],
        capture_output=True,
        text=True,
    )
    assert found.returncode == 1 and found.stderr.startswith("error: /proc/eq.duckdb cannot be opened")
    assert len(found.stderr.strip().splitlines()) == 1
