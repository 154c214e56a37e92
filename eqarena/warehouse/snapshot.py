"""The readers' copy of the warehouse: `<name>.snapshot.duckdb` beside `<name>.duckdb`.

DuckDB lets one process write a file or any number read it, never both: a dashboard holding the live
file read-only makes the next writer wait, and a writer makes the dashboard's next open fail. So
after every finished run the writer publishes a snapshot: it checkpoints the live file (the write-
ahead log folded in), copies it while it still holds the lock (no other process can change it
meanwhile) and renames the copy over the last snapshot. The copy is made by a child process: DuckDB
locks the file with a POSIX record lock, which the kernel drops when the holding process closes *any*
descriptor of that file, so reading the file from this process would let a waiting writer in while
this one still writes. The rename is atomic: a reader that has the snapshot open keeps reading the
copy it opened, the next open sees the newest. Before the rename every table of the copy is read
(`warehouse.verify`: DuckDB checks each block's checksum), so damage in the live file, even in blocks
the run did not read, is never published: the last sound snapshot stays. No eqarena process ever
opens the snapshot, so readers of it never meet a lock.

One race is DuckDB's own: `duckdb.connect` opens the path once to read the file's headers and again
to read its blocks. A connect whose two opens straddle a publish reads the previous copy's headers
with the new copy's blocks and fails with an IOException (a short read, a checksum). `connect_snapshot`
connects again when that happens.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from contextlib import closing
from pathlib import Path

import duckdb

from eqarena.exceptions import EqarenaError
from eqarena.messages import bounded
from eqarena.warehouse.verify import verify_tables

SNAPSHOT_SUFFIX = ".snapshot.duckdb"
SNAPSHOT_ENV_VAR = "EQARENA_SNAPSHOT"  # "0" turns publishing off
CONNECT_ATTEMPTS = 3


class SnapshotNotPublished(EqarenaError, OSError):
    """The run is committed to the warehouse, but its readers' snapshot could not be written (a full
    disk, a quota, a directory in the way): readers see the previous snapshot."""


class WarehouseDamaged(SnapshotNotPublished):
    """A block of the warehouse fails its checksum: no snapshot is published from it (the run is stored)."""


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
    temporary = None
    try:
        con.execute("CHECKPOINT")
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(handle)
        _copy_in_child_process(source, Path(temporary))
        with open(temporary, "rb") as copy:
            os.fsync(copy.fileno())  # whole on disk before it replaces the last snapshot
        damaged = _damaged_tables(Path(temporary))
        if damaged:
            raise WarehouseDamaged(
                f"{source} is damaged (blocks of {', '.join(damaged)} fail their checksums): its readers' "
                f"snapshot was not published; `eqarena check` says more"
            )
        os.chmod(temporary, 0o444)  # a reader's copy: nothing should write to it
        os.replace(temporary, target)
    except BaseException as exc:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, WarehouseDamaged) or not (isinstance(exc, OSError) or _out_of_space(exc)):
            raise
        raise SnapshotNotPublished(
            f"the run is stored in {source}, but its readers' snapshot {target} could not be written "
            f"({bounded(exc)}); readers see the previous one until a later run publishes it"
        ) from None
    return target


def _damaged_tables(copy: Path) -> list[str]:
    """The tables of the copy `copy` whose blocks fail their checksums (`warehouse.verify`): the copy is
    read, not the live file, so no descriptor of that one is touched (module docstring)."""
    with closing(duckdb.connect(str(copy), read_only=True)) as con:
        return [check.table for check in verify_tables(con) if not check.ok]


def _out_of_space(exc: BaseException) -> bool:
    """Whether `exc` is DuckDB failing to write its checkpoint for want of space (other DuckDB errors,
    such as a damaged block, are the warehouse's own and keep their meaning)."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.IOException) and ("no space left" in text or "quota" in text)


def _copy_in_child_process(source: Path, target: Path) -> None:
    """`cp source target`, run as a child process so that no descriptor of `source` is opened or
    closed by this one, which holds DuckDB's lock on it (module docstring)."""
    done = subprocess.run(["cp", "--", str(source), str(target)], capture_output=True, text=True)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        # cp ends its message with the system's reason ("...: No space left on device")
        raise OSError(said[-1].rsplit(": ", 1)[-1] if said else f"cp exited {done.returncode}")
