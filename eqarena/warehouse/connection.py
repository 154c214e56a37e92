"""Opening the eqarena DuckDB warehouse: path resolution, schema migrations, waiting for the file's
lock, and one-line errors for a busy, damaged or unusable file."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import duckdb
import psutil

from eqarena.exceptions import EqarenaError, OptionError, exception_chain
from eqarena.messages import bounded
from eqarena.warehouse.journal import ForeignJournalError, replay_journals
from eqarena.warehouse.runs import mark_abandoned_runs

WAREHOUSE_DIR = Path(__file__).resolve().parent
DEFAULT_DB_PATH = Path("eqarena.duckdb")  # in the working directory
SCHEMA_FILE = WAREHOUSE_DIR / "schema.sql"
MIGRATIONS_DIR = WAREHOUSE_DIR / "migrations"
DB_ENV_VAR = "EQARENA_DB"
WAIT_ENV_VAR = "EQARENA_WAIT"
DEFAULT_LOCK_WAIT_S = 60.0

_log = logging.getLogger("eqarena.warehouse")

_LOCK_PID = re.compile(r"\(PID (\d+)\)")
_MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


class WarehouseInUseError(EqarenaError, RuntimeError):
    """Another process held the DuckDB file for longer than this one would wait (DuckDB allows one
    writing process, or any number of reading ones)."""


class WarehouseUnusableError(EqarenaError, RuntimeError):
    """The path is no usable warehouse: a directory, another kind of file, a damaged DuckDB file, or a
    place where no file can be created."""


def resolve_db_path(path: str | os.PathLike | None = None) -> Path:
    """`path` if given, else `$EQARENA_DB`, else `eqarena.duckdb` in the working directory."""
    if path is not None:
        return Path(path)
    env = os.environ.get(DB_ENV_VAR)
    return Path(env) if env else DEFAULT_DB_PATH


def lock_wait_s() -> float:
    """How long opening the warehouse waits for another process to let go of it: `$EQARENA_WAIT`
    seconds (what the commands' --wait sets), else DEFAULT_LOCK_WAIT_S."""
    value = os.environ.get(WAIT_ENV_VAR, "")
    try:
        return max(float(value), 0.0) if value else DEFAULT_LOCK_WAIT_S
    except ValueError:
        raise OptionError(f"{WAIT_ENV_VAR}={value!r} is not a number of seconds") from None


def connect(
    path: str | os.PathLike | None = None, *, read_only: bool = False, wait_s: float | None = None
) -> duckdb.DuckDBPyConnection:
    """Open the warehouse; a writable connection is migrated to the latest schema first and marks the
    runs of processes that died as `abandoned` (eqarena/warehouse/runs.py) and commits the rows their
    write buffers had received but not stored (eqarena/warehouse/journal.py).

    While another process holds the file, waits up to `wait_s` seconds (default: lock_wait_s()),
    saying so once on the `eqarena.warehouse` logger, then raises WarehouseInUseError. A directory,
    another kind of file or a damaged one raises WarehouseUnusableError; all errors are one line.
    """
    db_path = resolve_db_path(path)
    if db_path.is_dir():
        raise WarehouseUnusableError(f"{db_path} is a directory, not a DuckDB warehouse file")
    if read_only and not db_path.exists():
        raise FileNotFoundError(f"database {db_path} does not exist yet (run `eqarena ingest` first)")
    if db_path.is_symlink() and not db_path.exists() and not db_path.resolve().parent.is_dir():
        raise WarehouseUnusableError(f"{db_path} is a link to {os.readlink(db_path)}, whose folder does not exist")
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WarehouseUnusableError(f"cannot create {db_path}: {exc.strerror or exc}") from None
    con = _open_waiting(db_path, read_only, lock_wait_s() if wait_s is None else wait_s)
    if read_only:
        return con
    try:
        migrate(con)
        mark_abandoned_runs(con)
        recovered = replay_journals(con)
    except duckdb.Error as exc:
        con.close()
        raise unusable_warehouse(exc, db_path) or exc from None
    except ForeignJournalError as exc:
        con.close()
        raise WarehouseUnusableError(str(exc)) from None
    if recovered:
        _log.info("committed %d rows that a stopped run had received but not yet stored", recovered)
    return con


def _open_waiting(db_path: Path, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + wait_s
    pause = 0.05
    said = False
    while True:
        try:
            return duckdb.connect(str(db_path), read_only=read_only)
        except duckdb.Error as exc:
            message = str(exc)
            if "lock" not in message.lower():
                found = unusable_warehouse(exc, db_path)
                if found is None and isinstance(exc, duckdb.IOException):  # any other reason the file will not open
                    found = WarehouseUnusableError(
                        f"{db_path} cannot be opened (DuckDB: {bounded(message.splitlines()[0])})"
                    )
                raise found or exc from None
            holder = _lock_holder(message)
            if time.monotonic() >= deadline:
                waited = f" (waited {wait_s:g} s; --wait SECONDS waits longer)" if wait_s > 0 else ""
                raise WarehouseInUseError(f"database {db_path} is in use by {holder}{waited}") from None
            if not said:
                _log.warning("database %s is in use by %s; waiting up to %g s for it (--wait)", db_path, holder, wait_s)
                said = True
            time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(pause * 2, 0.5)


def _lock_holder(message: str) -> str:
    """'process 6402 (python3 notebook.py)' from DuckDB's lock error, as far as it can be told."""
    match = _LOCK_PID.search(message)
    if not match:
        return "another process"
    pid = int(match.group(1))
    try:
        command = " ".join(" ".join(psutil.Process(pid).cmdline()).split())
    except psutil.Error:
        command = ""
    if len(command) > 60:
        command = command[:59] + "…"
    return f"process {pid} ({command})" if command else f"process {pid}"


# DuckDB's words for a file that is not (or no longer) a readable database, and what they mean here.
_DAMAGE = (
    ("is a directory", "is a directory, not a DuckDB warehouse file"),
    ("not a valid duckdb database file", "is not a DuckDB database file"),
    ("could not read enough bytes", "is damaged (cut short)"),
    ("corrupt database file", "is damaged (a block's checksum does not match)"),
    ("checksum", "is damaged (a block's checksum does not match)"),
    ("permission denied", "cannot be opened: permission denied"),
    ("read-only file system", "cannot be written: read-only file system"),
    ("no space left", "cannot be written: no space left on the device"),
    ("operation not permitted", "cannot be written: operation not permitted (an immutable file, chattr +i?)"),
    ("no such file or directory", "cannot be opened: no such file or directory"),
)


def unusable_warehouse(exc: BaseException, db_path: Path | str | None = None) -> WarehouseUnusableError | None:
    """The one-line WarehouseUnusableError a DuckDB error means, if it says the file is unusable
    (a directory, not DuckDB, damaged, unreadable or unwritable); None for any other error."""
    for error in exception_chain(exc):  # the cause may hide behind a failed clean-up's error
        found = _damage(error, db_path) if isinstance(error, duckdb.Error) else None
        if found is not None:
            return found
    return None


def interrupted_query(exc: BaseException) -> bool:
    """Whether `exc` (or an error behind it) is DuckDB's report of a query stopped by SIGINT: DuckDB
    catches the signal itself while a query runs and raises this error instead of KeyboardInterrupt."""
    return any(
        isinstance(error, duckdb.InterruptException)
        or (isinstance(error, RuntimeError) and str(error) == "Query interrupted")
        for error in exception_chain(exc)
    )


def _damage(exc: duckdb.Error, db_path: Path | str | None) -> WarehouseUnusableError | None:
    lowered = str(exc).lower()
    for words, meaning in _DAMAGE:
        if words in lowered:
            where = f"{db_path} " if db_path is not None else "the warehouse "
            hint = "; `eqarena check` verifies every table" if "damaged" in meaning else ""
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return WarehouseUnusableError(f"{where}{meaning}{hint} (DuckDB: {bounded(detail)})")
    return None


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
