"""Reading every table of the warehouse, so DuckDB verifies the checksum of every block in use.

DuckDB stores a checksum with each block and checks it when the block is read. Counting rows reads
only metadata, so a damaged file can still report plausible counts: `verify_tables` hashes every
row of every table (every column of every row group is read), which fails on the first damaged
block of a table.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb


@dataclass(frozen=True)
class TableCheck:
    table: str
    rows: int | None  # None when the table could not be read
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def verify_tables(con: duckdb.DuckDBPyConnection) -> list[TableCheck]:
    """One TableCheck per table of the warehouse, in name order (module docstring)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND NOT internal "
            "ORDER BY table_name"
        ).fetchall()
    ]
    checks = []
    for name in names:
        try:
            rows = con.execute(f'SELECT count(*), sum(hash(t)) FROM "{name}" AS t').fetchone()[0]
            checks.append(TableCheck(name, rows))
        except duckdb.Error as exc:
            checks.append(TableCheck(name, None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
    return checks
