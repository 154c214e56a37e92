"""The arrival journal of a write buffer: every row a provider returned is appended to a file beside
the warehouse the moment it arrives, before it waits in the buffer for its commit, and the file is
emptied once the rows are committed. A process killed in between (kill -9, an out-of-memory kill, a
power-off of the terminal) leaves the journal behind, and the next writable `warehouse.connect` commits
its rows (`replay_journals`): an answer that was paid for is never asked for again.

A journal is `<warehouse>.<table>.<pid>-<n>.journal`, JSON lines: a header naming the table, its key
and its column types, then one object per row. Appends go straight to the operating system (no
buffering in this process), which keeps them across a killed process; a line cut short by the kill is
the last one and is skipped. Only one process writes a warehouse at a time (DuckDB's file lock), so
a journal of another process is one that process left behind; a live process's own journals are never
replayed from under it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

import duckdb

from eqarena.exceptions import EqarenaError
from eqarena.warehouse.inserts import insert_new_rows


class ForeignJournalError(EqarenaError):
    """A file named like a journal beside the warehouse that eqarena did not write."""


SUFFIX = ".journal"
JOURNALED_TABLES = ("judgments", "responses")
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_numbers = itertools.count()


def warehouse_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The file `con` writes, or None for an in-memory database."""
    row = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    return Path(row[0]) if row and row[0] else None


class Journal:
    """One write buffer's journal (module docstring). `append` before buffering, `clear` after a commit."""

    def __init__(self, warehouse: Path, table: str, key: str, types: dict[str, str]):
        self.path = warehouse.with_name(f"{warehouse.name}.{table}.{os.getpid()}-{next(_numbers)}{SUFFIX}")
        self._header = json.dumps({"table": table, "key": key, "types": types}) + "\n"
        self._fd: int | None = None

    def append(self, rows: list[dict]) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            os.write(self._fd, self._header.encode())
        os.write(self._fd, "".join(json.dumps(row) + "\n" for row in rows).encode())

    def clear(self) -> None:
        """Forget the rows appended so far (they are committed): the file is removed."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self.path.unlink(missing_ok=True)


def _owner(path: Path) -> int | None:
    try:
        return int(path.name[: -len(SUFFIX)].rsplit(".", 1)[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def left_journals(warehouse: Path) -> list[Path]:
    """Journals of `warehouse` that other (ended) processes left behind."""
    return sorted(p for p in warehouse.parent.glob(f"{warehouse.name}.*{SUFFIX}") if _owner(p) != os.getpid())


def replay_journals(con: duckdb.DuckDBPyConnection) -> int:
    """Commit the rows of every journal left beside the warehouse `con` writes, then remove the journals;
    returns the rows that were new. Rows already committed are skipped (the inserts are idempotent)."""
    file = warehouse_file(con)
    if file is None:
        return 0
    new = 0
    for journal in left_journals(file):
        lines = journal.read_text(encoding="utf-8", errors="replace").splitlines()
        header, rows = _parse(lines)
        if header is not None and rows:
            types = header["types"]
            names = [*types, *(k.strip() for k in header["key"].split(","))]
            if header["table"] not in JOURNALED_TABLES or not all(_NAME.match(n) for n in names):
                raise ForeignJournalError(
                    f"{journal}: not a journal of eqarena's (table {header['table']!r}); move it away"
                )
            columns = {name: (kind, [row.get(name) for row in rows]) for name, kind in types.items()}
            con.execute("BEGIN TRANSACTION")
            try:
                new += insert_new_rows(con, header["table"], header["key"], columns)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        journal.unlink(missing_ok=True)
    return new


def _parse(lines: list[str]) -> tuple[dict | None, list[dict]]:
    """(header, rows) of a journal's lines; a line cut short by a kill (the last) is dropped."""
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    if not parsed or not isinstance(parsed[0], dict) or "table" not in parsed[0]:
        return None, []
    return parsed[0], [row for row in parsed[1:] if isinstance(row, dict)]
