"""Shared fixtures: a temporary Prefect home and API (one per session and test process), temporary
warehouses and the original source files (tests/data/sources.tar.xz, extracted once per session).

Lanes: a test that runs flows (it asks for `prefect_harness`) or holds a warehouse from another process
is marked `integration`, as are tests marked so by hand (subprocesses, servers); `make test-fast` runs
the others. Under pytest-xdist (`make test`) each worker is a process with its own Prefect home and API;
the tests of a module that share a module-scoped fixture go to one worker (`xdist_group`), so the
fixture is built once."""

from __future__ import annotations

import atexit
import os
import shutil
import tarfile
import tempfile
from pathlib import Path


def _throw_away_folder(prefix: str) -> str:
    """A new temporary folder, removed when this test process exits."""
    folder = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# Prefect reads its settings when first imported: point it at a throw-away home before that.
_PREFECT_HOME = _throw_away_folder("eqarena-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")  # no telemetry calls to the internet
os.environ.pop("EQARENA_DB", None)
os.environ["EQARENA_JAX_CACHE"] = _throw_away_folder("eqarena-jax-")  # compiled solvers, never in ~/.cache
for _secret in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
    os.environ.pop(_secret, None)

import pytest  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCES_ARCHIVE = REPO_ROOT / "tests" / "data" / "sources.tar.xz"


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for the whole session; request it in tests that run flows."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def source_data(tmp_path_factory) -> Path:
    """Folder with the original source files, `prd_vicuna80/` and `arena_hard_v0.1/` (see
    tests/data/SOURCES.md), extracted from tests/data/sources.tar.xz once per session."""
    folder = tmp_path_factory.mktemp("sources")
    with tarfile.open(SOURCES_ARCHIVE, "r:xz") as archive:
        archive.extractall(folder, filter="data")
    return folder


@pytest.fixture
def held_warehouse(tmp_path: Path):
    """(path, pid, release): a migrated warehouse that another process holds open for writing until
    `release()` (or the test's end)."""
    import subprocess
    import sys

    from eqarena import warehouse

    path = tmp_path / "held.duckdb"
    warehouse.connect(path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; con = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.readline()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )

    def release() -> None:
        if holder.poll() is None:
            holder.communicate("\n", timeout=60)

    try:
        assert holder.stdout.readline().strip() == "ready"
        yield path, holder.pid, release
    finally:
        release()


def query(db, sql: str, params=()) -> list[tuple]:
    """Rows of a read-only query on warehouse `db`."""
    from eqarena import warehouse

    con = warehouse.connect(db, read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of a fresh (not yet created) warehouse file."""
    return tmp_path / "eqarena.duckdb"


INTEGRATION_FIXTURES = {"prefect_harness", "held_warehouse"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    """Mark integration tests (module docstring) and group the tests that share a module-scoped fixture."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if INTEGRATION_FIXTURES & set(info.names_closure):
            item.add_marker(pytest.mark.integration)
        shared = [
            name
            for name, defs in info.name2fixturedefs.items()
            if defs and defs[-1].scope == "module" and defs[-1].baseid
        ]
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
