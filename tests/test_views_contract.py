"""eqarena/warehouse/VIEWS.md as a contract, checked like dbt's schema tests: every view and table its markdown
tables list exists, as that kind, with exactly the columns listed; every view of the warehouse is listed; its SQL
examples run; and a rate run fills the views a rate run feeds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from eqarena import warehouse

pytestmark = pytest.mark.unit

VIEWS_DOC = Path(__file__).resolve().parents[1] / "eqarena" / "warehouse" / "VIEWS.md"

# A contract table's header: its first cell says what its rows name, its last cell holds their columns.
ROW_KINDS = {"view": "view", "table": "table", "table / view": "table"}  # a row's "(view)" overrides the default
COLUMN_HEADERS = {"columns", "content"}
WAREHOUSE_KINDS = {"VIEW": "view", "BASE TABLE": "table"}
# Views a rate run does not fill: analysis runs are written by `eqarena analyze`.
NOT_FILLED_BY_RATE = {"analysis_runs"}

_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")  # a `\|` inside a cell is text
_NAME_CELL = re.compile(r"`(\w+)`(?:\s*\((view|table)\))?")
_SAME_AS = re.compile(r"as `(\w+)`")
_INNERMOST_PARENTHESES = re.compile(r"\([^()]*\)")
_BRACES = re.compile(r"(\w*)\{([\w,]+)\}(\w*)")  # {prompt,king,rebel}_uniform
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_SQL_EXAMPLE = re.compile(r"^```sql\n(.*?)^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Documented:
    """A view or table as a contract table of the doc lists it."""

    name: str
    kind: str  # "view" or "table"
    columns: frozenset[str]
    section: str


def _cells(line: str) -> list[str]:
    return [cell.strip().replace(r"\|", "|") for cell in _CELL_SEPARATOR.split(line.strip())[1:-1]]


def _markdown_tables(markdown: str) -> list[tuple[str, list[list[str]]]]:
    """(section heading, rows of cells, header first) of every markdown table, separator rows left out."""
    tables: list[tuple[str, list[list[str]]]] = []
    section, current = "", None
    for line in markdown.splitlines():
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        if not line.lstrip().startswith("|"):
            current = None
            continue
        if current is None:
            current = []
            tables.append((section, current))
        cells = _cells(line)
        if not all(re.fullmatch(r":?-{3,}:?", cell) for cell in cells):
            current.append(cells)
    return tables


def column_names(cell: str) -> list[str] | str:
    """The columns a columns cell lists, or the name of the entry whose columns it says it has (`as `rate_runs``).

    Parenthesised explanations are dropped, `{a,b}_x` stands for a_x, b_x, and prose before or after a colon
    ("one row per group: run_id, ...", "..., delta: marginal rating contributions") is not a column: exactly one
    colon-separated part must be a comma-separated list of identifiers."""
    text = cell
    while (stripped := _INNERMOST_PARENTHESES.sub("", text)) != text:
        text = stripped
    if same := _SAME_AS.fullmatch(text.strip()):
        return same.group(1)
    text = _BRACES.sub(lambda m: ", ".join(m[1] + part + m[3] for part in m[2].split(",")), text)
    parts = [[name.strip() for name in part.split(",")] for part in text.split(":")]
    lists = [names for names in parts if all(_IDENTIFIER.fullmatch(name) for name in names)]
    if len(lists) != 1:
        raise ValueError(f"{len(lists)} lists of column names (not exactly 1) in {cell!r}")
    return lists[0]


def parse_contract(markdown: str) -> dict[str, Documented]:
    """Every view and table the doc's contract tables list, by name, with `as `other`` resolved."""
    rows: list[tuple[str, str, str, list[str] | str]] = []
    for section, table in _markdown_tables(markdown):
        header, *body = table
        default_kind = ROW_KINDS.get(header[0].lower())
        if default_kind is None:
            continue  # another kind of table, e.g. coverage percentages
        if header[-1].lower() not in COLUMN_HEADERS:
            raise ValueError(
                f"{section}: a contract table's last column is one of {sorted(COLUMN_HEADERS)}, not {header[-1]!r}"
            )
        for cells in body:
            named = _NAME_CELL.fullmatch(cells[0])
            if named is None:
                raise ValueError(f"{section}: {cells[0]!r} names no view or table in backticks")
            try:
                columns = column_names(cells[-1])
            except ValueError as exc:
                raise ValueError(f"{section}: `{named[1]}`: {exc}") from None
            rows.append((section, named[1], named[2] or default_kind, columns))
    names = [name for _, name, _, _ in rows]
    if duplicated := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"listed more than once: {duplicated}")
    listed = {name: columns for _, name, _, columns in rows if not isinstance(columns, str)}
    contract = {}
    for section, name, kind, columns in rows:
        if isinstance(columns, str) and columns not in listed:
            raise ValueError(f"{section}: `{name}` has the columns of `{columns}`, which lists none")
        resolved = listed[columns] if isinstance(columns, str) else columns
        contract[name] = Documented(name, kind, frozenset(resolved), section)
    return contract


def warehouse_objects(con) -> dict[str, tuple[str, frozenset[str]]]:
    """Kind and columns of every table and view, as a SELECT returns them. Not information_schema.columns: DuckDB
    keeps a view's column names as of its creation there, and `latest_rate_run` (`SELECT * FROM rate_runs`) was
    created before migration 014 widened `rate_runs`."""
    objects = {}
    for name, table_type in con.execute(
        "SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall():
        selected = con.execute(f'SELECT * FROM "{name}" LIMIT 0').description
        objects[name] = (WAREHOUSE_KINDS.get(table_type, table_type), frozenset(column[0] for column in selected))
    return objects


def contract_mismatches(contract: dict[str, Documented], objects: dict[str, tuple[str, frozenset[str]]]) -> list[str]:
    """One line per disagreement between the documented views and tables and the warehouse's."""
    problems = []
    for entry in contract.values():
        if entry.name not in objects:
            problems.append(f"{entry.name} ({entry.section}): documented {entry.kind}, not in the warehouse")
            continue
        kind, columns = objects[entry.name]
        if kind != entry.kind:
            problems.append(f"{entry.name}: documented as a {entry.kind}, the warehouse has a {kind}")
        if missing := sorted(entry.columns - columns):
            problems.append(f"{entry.name}: documented columns not in the warehouse: {', '.join(missing)}")
        if undocumented := sorted(columns - entry.columns):
            problems.append(f"{entry.name}: undocumented columns: {', '.join(undocumented)}")
    for name, (kind, _) in sorted(objects.items()):
        if kind == "view" and name not in contract:
            problems.append(f"{name}: view in the warehouse, not documented")
    return problems


@pytest.fixture(scope="module")
def contract() -> dict[str, Documented]:
    return parse_contract(VIEWS_DOC.read_text())


@pytest.fixture(scope="module")
def new_warehouse(tmp_path_factory):
    """A connection to a new warehouse: the migrations create every table and view."""
    con = warehouse.connect(tmp_path_factory.mktemp("contract") / "new.duckdb")
    yield con
    con.close()


@pytest.fixture(scope="module")
def rated_warehouse(tmp_path_factory) -> tuple[Path, str]:
    """(path, run_id): the bundled vicuna80 rated from one judge, per category too, without bootstrap."""
    from eqarena import api

    db = tmp_path_factory.mktemp("contract") / "rated.duckdb"
    api.ingest("vicuna80", db=db)
    return db, api.rate("vicuna80", db=db, judges=["prd:gpt4"], bootstrap=0, by="category").run_id


RATE_RUNS_COLUMNS = (
    "run_id, started_at, finished_at, dataset, judges, methods, data_fingerprint, timings, category, by_grouping"
)
# A doc in the ways VIEWS.md writes its tables, with mistakes: `ratings` misspells imputed_share, `payoffs` is no
# view, `no_such_table` does not exist, and most views are left out.
SNIPPET = r"""
## Views

| view | one row per | columns |
| --- | --- | --- |
| `rate_runs` | finished rate run | RATE_RUNS_COLUMNS |
| `latest_rate_run` | (at most one row) the newest | as `rate_runs` (same columns) |
| `payoffs` | cell | run_id, prompt_id, king, rebel, u_king, samples, imputed |

## Tables

| table | content |
| --- | --- |
| `ratings` | per action: run_id, method, player (`king`: a), action, rating, rank, mass, ci_lo, ci_hi, imputed_shares |
| `contributions` | run_id, method, king, rebel, delta: marginal rating contributions (paper Section 4.3) |
| `no_such_table` | run_id |

| expected payoffs | `ne` |
| --- | --- |
| grid | 100% |

| table / view | one row per | columns |
| --- | --- | --- |
| `analysis_runs` (view) | analysis run | run_id, kind, source_run_id, started_at, finished_at, parameters |
| `clone_verdicts` | run and method | run_id, method, verdict (e.g. "NE: exact \| noisy: ...") |
""".replace("RATE_RUNS_COLUMNS", RATE_RUNS_COLUMNS)


def test_parser_reads_the_ways_the_doc_lists_columns():
    contract = parse_contract(SNIPPET)
    assert set(contract) == {
        "rate_runs",
        "latest_rate_run",
        "payoffs",
        "ratings",
        "contributions",
        "no_such_table",
        "analysis_runs",
        "clone_verdicts",
    }
    assert contract["latest_rate_run"].columns == contract["rate_runs"].columns
    assert contract["contributions"].columns == {"run_id", "method", "king", "rebel", "delta"}
    assert contract["ratings"].columns >= {"run_id", "player", "action", "imputed_shares"}
    assert not contract["ratings"].columns & {"a", "king"}
    assert contract["clone_verdicts"].columns == {"run_id", "method", "verdict"}
    assert column_names("run_id, {prompt,king}_uniform (u, v), rank_{a,b}") == [
        "run_id",
        "prompt_uniform",
        "king_uniform",
        "rank_a",
        "rank_b",
    ]
    assert (contract["analysis_runs"].kind, contract["contributions"].kind, contract["payoffs"].kind) == (
        "view",
        "table",
        "view",
    )


@pytest.mark.parametrize(
    "cell, error",
    [
        ("one row per run (keyed by run_id)", "0 lists"),
        ("run_id, method: king, rebel", "2 lists"),
    ],
)
def test_parser_refuses_a_cell_without_exactly_one_column_list(cell, error):
    with pytest.raises(ValueError, match=error):
        column_names(cell)


def test_parser_refuses_a_row_naming_nothing_and_an_unresolvable_same_as():
    table = "| table | content |\n| --- | --- |\n"
    with pytest.raises(ValueError, match="names no view or table"):
        parse_contract(table + "| ratings | run_id |\n")
    with pytest.raises(ValueError, match="which lists none"):
        parse_contract(table + "| `latest_rate_run` | as `rate_runs` |\n")
    with pytest.raises(ValueError, match="more than once"):
        parse_contract(table + "| `ratings` | run_id |\n| `ratings` | run_id |\n")


def test_comparison_reports_each_kind_of_disagreement(new_warehouse):
    problems = contract_mismatches(parse_contract(SNIPPET), warehouse_objects(new_warehouse))
    assert "ratings: documented columns not in the warehouse: imputed_shares" in problems
    assert "ratings: undocumented columns: imputed_share" in problems
    assert "no_such_table (Tables): documented table, not in the warehouse" in problems
    assert "payoffs: documented as a view, the warehouse has a table" in problems
    assert "latest_model_ratings: view in the warehouse, not documented" in problems
    assert not [problem for problem in problems if problem.startswith(("rate_runs", "latest_rate_run", "clone_"))]


def test_every_documented_view_and_table_has_exactly_its_documented_columns(contract, new_warehouse):
    objects = warehouse_objects(new_warehouse)
    assert len(contract) >= 30 and sum(entry.kind == "view" for entry in contract.values()) >= 10
    problems = contract_mismatches(contract, objects)
    assert not problems, f"{VIEWS_DOC.name} and the warehouse schema disagree:\n" + "\n".join(problems)


def test_sql_examples_run(new_warehouse):
    examples = _SQL_EXAMPLE.findall(VIEWS_DOC.read_text())
    assert len(examples) >= 4
    for sql in examples:
        new_warehouse.execute(sql).fetchall()


def test_a_rate_run_fills_the_views_it_feeds(contract, rated_warehouse):
    db, run_id = rated_warehouse
    views = sorted(name for name, entry in contract.items() if entry.kind == "view" and name not in NOT_FILLED_BY_RATE)
    con = warehouse.connect(db, read_only=True)
    try:
        empty = [
            view
            for view in views
            if not con.execute(f'SELECT count(*) FROM "{view}" WHERE run_id = ?', [run_id]).fetchone()[0]
        ]
    finally:
        con.close()
    assert not empty, f"views without a row of rate run {run_id}: {empty}"
