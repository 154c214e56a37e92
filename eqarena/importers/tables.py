"""Tabular input files (CSV, TSV, Parquet, JSON Lines, JSON arrays) as polars frames that remember
where each row came from, and the row checks the importers share.

Every frame returned has a `where` column (`file:line`, or `file: row N` for Parquet) so a bad row is
reported where the user can find it. CSV cells are read as text (ids like `007` keep their zeros);
numbers are parsed by `numeric_column`, which names the first cell that is not a number.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

import polars as pl

from eqarena.datasets.records import DatasetError, json_error, read_jsonl
from eqarena.importers.limits import refuse_binary

WHERE = "where"
Record = Callable[[dict], dict]  # picks (and flattens) the fields an importer needs from a JSON object

_FORMATS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}


def table_format(path: Path) -> str:
    """'csv' | 'tsv' | 'parquet' | 'jsonl' | 'json' from the file name (a trailing .gz is allowed for JSONL)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
        if suffixes and _FORMATS.get(suffixes[-1]) == "jsonl":
            return "jsonl"
    kind = _FORMATS.get(suffixes[-1]) if suffixes else None
    if kind is None:
        raise DatasetError(f"{path}: unknown table format (use .csv, .tsv, .parquet, .jsonl or .json)")
    return kind


def read_table(path: Path, record: Record | None = None) -> pl.DataFrame:
    """All rows of `path` with a `where` column; JSON objects pass through `record` (default: their
    scalar fields). Raises DatasetError naming the file (and line) when it cannot be read."""
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    kind = table_format(path)
    if kind != "parquet" and not path.name.lower().endswith(".gz"):
        refuse_binary(path)
    if kind in ("csv", "tsv"):
        return _read_csv(path, "\t" if kind == "tsv" else ",")
    if kind == "parquet":
        return _read_parquet(path)
    pick = record or _scalars
    if kind == "jsonl":
        rows = [(f"{line.where}", pick(line.data)) for line in read_jsonl(path)]
    else:
        rows = [(f"{path}:{number}", pick(obj)) for number, obj in _json_array(path)]
    return _frame(path, rows)


def _scalars(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if v is None or isinstance(v, (str, int, float, bool))}


def _frame(path: Path, rows: list[tuple[str, dict]]) -> pl.DataFrame:
    if not rows:
        raise DatasetError(f"{path}: no rows")
    try:
        frame = pl.from_dicts([r for _, r in rows], infer_schema_length=None, strict=False)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
        raise DatasetError(f"{path}: rows of mixed shape ({exc})") from None
    return frame.with_columns(pl.Series(WHERE, [w for w, _ in rows], dtype=pl.Utf8))


def _json_array(path: Path) -> Iterable[tuple[int, dict]]:
    """(line number, object) for each element of a JSON array of objects, in one pass over the text: the
    decoder keeps its position and the line count advances with it (linear in the file's size)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    decoder = json.JSONDecoder()
    lines = _LineCounter(text)
    position = _skip_space(text, 0)
    if position >= len(text) or text[position] != "[":
        raise DatasetError(f"{path}:{lines.at(position)}: expected a JSON array of objects")
    position = _skip_space(text, position + 1)
    first = True
    while position < len(text) and text[position] != "]":
        if not first:
            if text[position] != ",":
                raise DatasetError(f"{path}:{lines.at(position)}: expected ',' or ']'")
            position = _skip_space(text, position + 1)
        first = False
        line = lines.at(position)
        try:
            obj, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{exc.lineno}: malformed JSON ({json_error(exc)})") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
        yield line, obj
        position = _skip_space(text, position)
    if position >= len(text):
        raise DatasetError(f"{path}: the JSON array is not closed")


class _LineCounter:
    """Line numbers of increasing positions in a text, each newline counted once."""

    def __init__(self, text: str):
        self.text, self.position, self.line = text, 0, 1

    def at(self, position: int) -> int:
        self.line += self.text.count("\n", self.position, position)
        self.position = position
        return self.line


_SPACE = re.compile(r"[ \t\r\n]*")


def _skip_space(text: str, position: int) -> int:
    return _SPACE.match(text, position).end()


def _read_csv(path: Path, separator: str) -> pl.DataFrame:
    try:
        frame = pl.read_csv(path, separator=separator, infer_schema=False)
    except (pl.exceptions.PolarsError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: unreadable {separator == ',' and 'CSV' or 'TSV'} ({exc})") from None
    if frame.height == 0:
        raise DatasetError(f"{path}: no rows")
    # A row's line: the header is line 1; quoted cells with line breaks push later rows down.
    breaks = pl.sum_horizontal([pl.col(c).str.count_matches("\n").fill_null(0) for c in frame.columns])
    lines = frame.select((pl.int_range(pl.len()) + 2 + breaks.cum_sum() - breaks).alias("line"))["line"]
    return frame.with_columns((pl.lit(f"{path}:") + lines.cast(pl.Utf8)).alias(WHERE))


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except pl.exceptions.PolarsError as exc:
        raise DatasetError(f"{path}: unreadable Parquet ({exc})") from None
    if frame.height == 0:
        raise DatasetError(f"{path}: no rows")
    return frame.with_columns((pl.lit(f"{path}: row ") + (pl.int_range(pl.len()) + 1).cast(pl.Utf8)).alias(WHERE))


def require_columns(frame: pl.DataFrame, path: Path, required: Iterable[str]) -> None:
    """DatasetError naming the file and the missing column(s) (and the columns it has)."""
    missing = [c for c in required if c not in frame.columns]
    if missing:
        have = ", ".join(c for c in frame.columns if c != WHERE)
        raise DatasetError(f"{path}: missing column {', '.join(missing)} (columns: {have})")


def id_column(frame: pl.DataFrame, path: Path, given: str | None, candidates: Iterable[str]) -> str:
    """The row id column: `given` (`--id-column`), else the first of `candidates` the table has;
    DatasetError naming what was looked for and the columns found otherwise."""
    wanted = [given] if given else list(candidates)
    found = next((c for c in wanted if c in frame.columns), None)
    if found is None:
        have = ", ".join(c for c in frame.columns if c != WHERE)
        looked = (
            f"{given} (--id-column)"
            if given
            else wanted[0] + (f" (or {' / '.join(wanted[1:])})" if len(wanted) > 1 else "")
        )
        first = next((c for c in frame.columns if c != WHERE), None)
        hint = f"; if {first} names the rows, pass --id-column {first}" if first and not given else ""
        raise DatasetError(f"{path}: missing column {looked} (columns: {have}){hint}")
    return found


def fail_where(frame: pl.DataFrame, bad: pl.Expr, message: Callable[[dict], str]) -> None:
    """Raise DatasetError at the first row where `bad` holds: `file:line: message(row)`."""
    rows = frame.filter(bad.fill_null(False)).head(1).to_dicts()
    if rows:
        raise DatasetError(f"{rows[0][WHERE]}: {message(rows[0])}")


def text_column(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """`column` as text (integer ids become '7'); an empty or missing cell is an error at its row."""
    if frame.schema[column] not in (
        pl.Utf8,
        pl.Int64,
        pl.Int32,
        pl.UInt32,
        pl.UInt64,
        pl.Int16,
        pl.Int8,
        pl.Categorical,
        pl.Null,
    ):
        fail_where(frame, pl.lit(True), lambda r: f"column {column} must hold text or integer ids")
    frame = frame.with_columns(pl.col(column).cast(pl.Utf8).str.strip_chars())
    fail_where(frame, pl.col(column).is_null() | (pl.col(column) == ""), lambda r: f"empty {column}")
    return frame


def numeric_column(
    frame: pl.DataFrame, column: str, *, required: bool = True, nan_is_empty: bool = False
) -> pl.DataFrame:
    """`column` as Float64: a cell that is not a finite number is an error at its row (empty cells
    are errors only when `required`; with `nan_is_empty`, NaN cells, as pandas writes missing values,
    are empty)."""
    return numeric_columns(frame, [column], required=required, nan_is_empty=nan_is_empty)


def numeric_columns(
    frame: pl.DataFrame, columns: Sequence[str], *, required: bool = True, nan_is_empty: bool = False
) -> pl.DataFrame:
    """`numeric_column` for each of `columns`, in one pass over the frame whatever their number (a wide
    table's 10,000 score columns are parsed together); the error names the first bad column's first
    bad cell."""
    parsed, blank = {}, {}
    schema = frame.schema  # built anew on each access: once, not once per column
    for column in columns:
        source = pl.col(column)
        if schema[column] == pl.Utf8:
            parsed[column] = source.str.strip_chars().cast(pl.Float64, strict=False)
            blank[column] = source.is_null() | (source.str.strip_chars() == "")
        else:
            parsed[column] = source.cast(pl.Float64, strict=False)
            blank[column] = source.is_null()
        if nan_is_empty:
            blank[column] = blank[column] | parsed[column].is_nan().fill_null(False)
            parsed[column] = pl.when(blank[column]).then(None).otherwise(parsed[column])
    not_number = [(~blank[c] & (parsed[c].is_null() | ~parsed[c].is_finite())).alias(c) for c in columns]
    _fail_at_first(frame, frame.select(not_number), lambda c, row: f"{c} {row[c]!r} is not a finite number")
    if required:
        _fail_at_first(frame, frame.select(blank[c].alias(c) for c in columns), lambda c, row: f"empty {c}")
    return frame.with_columns(parsed[c].alias(c) for c in columns)


def _fail_at_first(frame: pl.DataFrame, flags: pl.DataFrame, message: Callable[[str, dict], str]) -> None:
    """DatasetError at the first row flagged in the first column of `flags` with a flag set."""
    flagged = [c for c, hit in flags.select(pl.all().fill_null(False).any()).row(0, named=True).items() if hit]
    if flagged:
        column = flagged[0]
        row = frame.filter(flags[column].fill_null(False)).head(1).to_dicts()[0]
        raise DatasetError(f"{row[WHERE]}: {message(column, row)}")


def first_duplicate(frame: pl.DataFrame, key: list[str], what: Callable[[dict], str]) -> None:
    """DatasetError at the second occurrence of a key, naming the first."""
    numbered = frame.with_row_index("_row")
    firsts = numbered.group_by(key, maintain_order=True).agg(
        pl.col("_row").first().alias("_first"), pl.col(WHERE).first().alias("_first_where")
    )
    joined = numbered.join(firsts, on=key, how="left", nulls_equal=True).filter(pl.col("_row") != pl.col("_first"))
    rows = joined.sort("_row").head(1).to_dicts()
    if rows:
        here, first = rows[0][WHERE], rows[0]["_first_where"]
        file, _, _ = here.rpartition(":")
        first = f"line {first.rpartition(':')[2]}" if first.rpartition(":")[0] == file else first
        raise DatasetError(f"{here}: duplicate {what(rows[0])} (first at {first})")
