"""Opening the eqarena DuckDB warehouse: path resolution, schema migrations, clear lock errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

WAREHOUSE_DIR = Path(__file__).resolve().parent
DEFAULT_DB_PATH = Path("eqarena.duckdb")  # in the working directory
SCHEMA_FILE = WAREHOUSE_DIR / "schema.sql"
MIGRATIONS_DIR = WAREHOUSE_DIR / "migrations"
DB_ENV_VAR = "EQARENA_DB"

_LOCK_PID = re.compile(r"\(PID (\d+)\)")
_MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


class WarehouseInUseError(RuntimeError):
    """Another process holds the DuckDB file (DuckDB allows one writing process)."""


def resolve_db_path(path: str | os.PathLike | None = None) -> Path:
    """`path` if given, else `$EQARENA_DB`, else `eqarena.duckdb` in the working directory."""
    if path is not None:
        return Path(path)
    env = os.environ.get(DB_ENV_VAR)
    return Path(env) if env else DEFAULT_DB_PATH


def connect(path: str | os.PathLike | None = None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; a writable connection is migrated to the latest schema first.

    Raises WarehouseInUseError with a one-line message when another process holds the file.
    """
    db_path = resolve_db_path(path)
    if read_only and not db_path.exists():
        raise FileNotFoundError(f"database {db_path} does not exist yet (run `eqarena ingest` first)")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        con = duckdb.connect(str(db_path), read_only=read_only)
    except duckdb.IOException as exc:
        match = _LOCK_PID.search(str(exc))
        if "lock" in str(exc).lower():
            holder = f"process {match.group(1)}" if match else "another process"
            raise WarehouseInUseError(f"database {db_path} is in use by {holder}") from None
        raise
    if not read_only:
        migrate(con)
    return con


def migrations() -> list[tuple[int, str, Path]]:
    """(version, name, file) of schema.sql (version 1) and every numbered migration, in order."""
    found = [(1, "schema", SCHEMA_FILE)]
    for file in sorted(MIGRATIONS_DIR.glob("*.sql")):
        match = _MIGRATION_NAME.match(file.name)
        if not match:
            raise ValueError(f"{file}: migration files are named NNN_snake_case.sql")
        found.append((int(match.group(1)), file.stem, file))
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions) or versions != sorted(versions):
        raise ValueError(f"{MIGRATIONS_DIR}: migration numbers must be unique and start at 002")
    return found


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """The highest applied migration, 0 for an empty database."""
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()[0]
    if not exists:
        return 0
    return con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every migration newer than the database, each in its own transaction; returns the version."""
    current = schema_version(con)
    for version, name, file in migrations():
        if version <= current:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(file.read_text())
            con.execute("INSERT INTO schema_version (version, name) VALUES (?, ?)", [version, name])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        current = version
    return current
