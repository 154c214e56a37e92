"""A write buffer for rows that return one by one from a provider (judgments, generated answers): rows
are committed in small batches, at the latest `max_delay_s` after the oldest buffered row arrived (call
`flush_due` at least that often) or as soon as `max_rows` are waiting. Each flush is one idempotent
insert (one commit). Until its commit a row is kept in the buffer's arrival journal
(eqarena/warehouse/journal.py), so a killed process loses none: the next writer commits them."""

from __future__ import annotations

import time
from typing import Generic, Iterable, TypeVar

import duckdb

from eqarena.warehouse.inserts import RowTable
from eqarena.warehouse.journal import Journal, warehouse_file

Row = TypeVar("Row")


class WriteBuffer(Generic[Row]):
    """Buffers rows of `table` and commits them (module docstring)."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, table: RowTable, *, max_delay_s: float = 0.25, max_rows: int = 64
    ):
        self.con = con
        self.table = table
        self.max_delay_s = max_delay_s
        self.max_rows = max_rows
        file = warehouse_file(con)
        self._journal = Journal(file, table.table, table.key, table.types) if file is not None else None
        self._rows: list[dict] = []
        self._oldest: float | None = None
        self.rows_written = 0
        self.commits = 0
        self.seconds_writing = 0.0

    @property
    def buffered(self) -> int:
        return len(self._rows)

    def add(self, rows: Iterable[Row]) -> None:
        new = [self.table.values(r) for r in rows]
        if not new:
            return
        if self._journal is not None:
            self._journal.append(new)  # kept before anything else can happen to them
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
        started = time.perf_counter()
        written = self.table.insert_values(self.con, self._rows)
        self._rows, self._oldest = [], None
        if self._journal is not None:
            self._journal.clear()
        self.seconds_writing += time.perf_counter() - started
        self.rows_written += written
        self.commits += 1
        return written
