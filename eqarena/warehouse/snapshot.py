"""The readers' copy of the warehouse: `<name>.snapshot.duckdb` beside `<name>.duckdb`.

DuckDB lets one process write a file or any number read it, never both: a dashboard holding the live
file read-only makes the next writer wait, and a writer makes the dashboard's next open fail. So
after every finished run the writer publishes a snapshot: it checkpoints the live file (the write-
ahead log folded in), copies it while it still holds the lock (no other process can change it
meanwhile) and renames the copy over the last snapshot. The copy is made by a child process: DuckDB
locks the file with a POSIX record lock, which the kernel drops when the holding process closes *any*
descriptor of that file, so reading the file from this process would let a waiting writer in while
this one still writes. The rename is atomic: a reader that has the snapshot open keeps reading the
copy it opened, the next open sees the newest. No eqarena process ever opens the snapshot, so readers
of it never meet a lock.

One race is DuckDB's own: `duckdb.connect` opens the path once to read the file's headers and again
to read its blocks. A connect whose two opens straddle a publish reads the previous copy's headers
with the new copy's blocks and fails with an IOException (a short read, a checksum). `connect_snapshot`
connects again when that happens.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import duckdb

SNAPSHOT_SUFFIX = ".snapshot.duckdb"
SNAPSHOT_ENV_VAR = "EQARENA_SNAPSHOT"  # "0" turns publishing off
CONNECT_ATTEMPTS = 3


def snapshot_path(db_path: str | os.PathLike) -> Path:
    """`x.snapshot.duckdb` for the warehouse `x.duckdb` (`x.db.snapshot.duckdb` for `x.db`)."""
    path = Path(db_path)
    stem = path.name[: -len(".duckdb")] if path.name.endswith(".duckdb") else path.name
    return path.with_name(stem + SNAPSHOT_SUFFIX)


def connect_snapshot(db_path: str | os.PathLike, attempts: int = CONNECT_ATTEMPTS) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the snapshot of the warehouse `db_path` (module docstring). A connect
    that straddles a publish is retried, up to `attempts` connects in all; a missing snapshot raises
    FileNotFoundError, any other error is raised as it is."""
    path = snapshot_path(db_path)
    if not path.exists():
        raise FileNotFoundError(f"no snapshot {path} yet: it is published after the first finished run")
    for attempt in range(1, attempts + 1):
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.IOException as exc:
            if attempt == attempts or "lock" in str(exc).lower():
                raise


def snapshots_enabled() -> bool:
    return os.environ.get(SNAPSHOT_ENV_VAR, "1") != "0"


def publish_snapshot(con: duckdb.DuckDBPyConnection) -> Path | None:
    """Publish the readers' copy of the warehouse `con` writes (module docstring); returns its path,
    None when publishing is off (EQARENA_SNAPSHOT=0) or `con` is an in-memory database. Call it with
    no transaction open, after the run's last write."""
    file = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    if not snapshots_enabled() or not file or not file[0]:
        return None
    source = Path(file[0])
    target = snapshot_path(source)
    con.execute("CHECKPOINT")
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    try:
        _copy_in_child_process(source, Path(temporary))
        with open(temporary, "rb") as copy:
            os.fsync(copy.fileno())  # whole on disk before it replaces the last snapshot
        os.chmod(temporary, 0o444)  # a reader's copy: nothing should write to it
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def _copy_in_child_process(source: Path, target: Path) -> None:
    """`cp source target`, run as a child process so that no descriptor of `source` is opened or
    closed by this one, which holds DuckDB's lock on it (module docstring)."""
    done = subprocess.run(["cp", "--", str(source), str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"cannot copy {source} to {target}: {done.stderr.strip() or f'cp exited {done.returncode}'}")
