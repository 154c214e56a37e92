"""Idempotent inserts of rows given column-wise: the one statement every row writer of the warehouse uses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import duckdb


def insert_new_rows(con: duckdb.DuckDBPyConnection, table: str, key: str, columns: dict[str, tuple[str, list]]) -> int:
    """Insert rows given column-wise ({column: (DuckDB type, values)}) whose `key` (comma-separated
    columns) is not in `table` yet; returns how many were new. Runs in the caller's transaction if one is
    open. One statement of unnested column parameters: orders of magnitude faster than executemany."""
    names = list(columns)
    if not names or not columns[names[0]][1]:
        return 0
    selects = ", ".join(f"unnest(${i + 1}::{columns[name][0]}[]) AS {name}" for i, name in enumerate(names))
    before = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    con.execute(
        f"INSERT INTO {table} ({', '.join(names)}) SELECT * FROM (SELECT {selects}) ON CONFLICT ({key}) DO NOTHING",
        [list(values) for _, values in columns.values()],
    )
    return con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before


@dataclass(frozen=True)
class RowTable:
    """A table that rows (dataclasses) are inserted into idempotently: its name, key and the DuckDB type of
    each column written, read from the row's attribute of the same name."""

    table: str
    key: str  # comma-separated key columns
    types: dict[str, str]

    def values(self, row) -> dict:
        return {name: getattr(row, name) for name in self.types}

    def insert(self, con: duckdb.DuckDBPyConnection, rows: Iterable) -> int:
        """Insert the rows whose key is not present yet; returns how many were new."""
        batch = [self.values(r) for r in rows]
        return self.insert_values(con, batch)

    def insert_values(self, con: duckdb.DuckDBPyConnection, batch: list[dict]) -> int:
        """`insert` for rows given as {column: value} (as `values` gives them)."""
        return insert_new_rows(
            con,
            self.table,
            self.key,
            {name: (kind, [row.get(name) for row in batch]) for name, kind in self.types.items()},
        )
