"""A write buffer for rows that return one by one from a provider (judgments, generated answers): rows
are committed in small batches, at the latest `max_delay_s` after the oldest buffered row arrived (call
`flush_due` at least that often) or as soon as `max_rows` are waiting. Each flush is one idempotent
insert (one commit), so a crash loses at most the rows of the last `max_delay_s`."""

from __future__ import annotations

import time
from typing import Callable, Generic, Iterable, TypeVar

import duckdb

Row = TypeVar("Row")


def insert_new_rows(con: duckdb.DuckDBPyConnection, table: str, key: str,
                    columns: dict[str, tuple[str, list]]) -> int:
    """Insert rows given column-wise ({column: (DuckDB type, values)}) whose `key` (comma-separated
    columns) is not in `table` yet; returns how many were new. Runs in the caller's transaction if one is
    open. One statement of unnested column parameters: orders of magnitude faster than executemany."""
    names = list(columns)
    if not names or not columns[names[0]][1]:
        return 0
    selects = ", ".join(f"unnest(${i + 1}::{columns[name][0]}[]) AS {name}" for i, name in enumerate(names))
    before = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.execute(f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM (SELECT {selects}) "
                f"ON CONFLICT ({key}) DO NOTHING", [list(values) for _, values in columns.values()])
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before


class WriteBuffer(Generic[Row]):
    """Buffers rows and commits them with `insert(con, rows) -> rows new` (module docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, insert: Callable[[duckdb.DuckDBPyConnection, list[Row]], int],
                 *, max_delay_s: float = 0.25, max_rows: int = 64):
        self.con = con
        self.insert = insert
        self.max_delay_s = max_delay_s
        self.max_rows = max_rows
        self._rows: list[Row] = []
        self._oldest: float | None = None
        self.rows_written = 0
        self.commits = 0
        self.seconds_writing = 0.0

    @property
    def buffered(self) -> int:
        return len(self._rows)

    def add(self, rows: Iterable[Row]) -> None:
        new = list(rows)
        if not new:
            return
        if self._oldest is None:
            self._oldest = time.monotonic()
        self._rows.extend(new)
        if len(self._rows) >= self.max_rows:
            self.flush()

    def flush_due(self) -> int:
        """Flush if the oldest buffered row has waited `max_delay_s`; returns rows written."""
        if self._oldest is not None and time.monotonic() - self._oldest >= self.max_delay_s:
            return self.flush()
        return 0

    def flush(self) -> int:
        """Commit every buffered row now; returns how many were new."""
        if not self._rows:
            return 0
        rows, self._rows, self._oldest = self._rows, [], None
        started = time.perf_counter()
        written = self.insert(self.con, rows)
        self.seconds_writing += time.perf_counter() - started
        self.rows_written += written
        self.commits += 1
        return written
