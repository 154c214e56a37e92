"""The import graph follows docs/contracts.md's layering table: a room (a package of eqarena, or one of its
top-level modules) imports only the rooms its row names. The table is read from the docs, so the docs and
the code cannot drift apart; imports under `if TYPE_CHECKING:` are annotations only and are not counted."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "eqarena"
CONTRACTS = ROOT / "docs" / "contracts.md"
NAME = re.compile(r"`([A-Za-z_]+)(?:/|\.py)?`")


def allowed_imports(text: str) -> dict[str, set[str]]:
    """Room -> the rooms it may import, from the markdown table under '## Layering' whose header is
    `| layer | room | what it is | imports from eqarena |`."""
    section = text.split("## Layering", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert header == ["layer", "room", "what it is", "imports from eqarena"], header
    table = {}
    for line in rows[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        room = NAME.search(cells[1])
        assert room, f"no room name in {line!r}"
        table[room.group(1)] = set(NAME.findall(cells[3]))
    return table


def _room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "eqarena" and len(parts) > 1 else None


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imported_rooms(source: str) -> set[str]:
    """The eqarena rooms a module's source imports (at any depth, lazily too), TYPE_CHECKING blocks aside."""
    tree = ast.parse(source)
    annotations_only = _type_checking_lines(tree)
    rooms = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [f"eqarena.{a.name}" for a in node.names] if node.module == "eqarena" else [node.module]
        else:
            continue
        rooms.update(room for module in modules if (room := _room_of(module)))
    return rooms


def room_imports() -> dict[str, dict[str, set[str]]]:
    """Room -> imported room -> the files of the room that import it."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        room = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        for imported in imported_rooms(path.read_text()) - {room}:
            graph[room][imported].add(str(path.relative_to(ROOT)))
        graph.setdefault(room, defaultdict(set))
    return graph


def test_every_room_imports_only_what_its_row_allows():
    table = allowed_imports(CONTRACTS.read_text())
    graph = room_imports()
    unlisted = sorted(set(graph) - set(table))
    assert not unlisted, f"rooms missing from the layering table of {CONTRACTS.name}: {unlisted}"
    stale = sorted(set(table) - set(graph))
    assert not stale, f"rows of the layering table with no room in eqarena/: {stale}"
    broken = [
        f"{room} -> {imported} ({', '.join(sorted(files))})"
        for room, imports in sorted(graph.items())
        for imported, files in sorted(imports.items())
        if imported not in table[room]
    ]
    assert not broken, "imports the layering table does not allow:\n" + "\n".join(broken)


def test_the_parser_reads_rows_and_ignores_annotation_only_imports():
    doc = (
        "## Layering\n\n| layer | room | what it is | imports from eqarena |\n| --- | --- | --- | --- |\n"
        "| bottom | `solvers/` | numerics | `methods`, `options.py` |\n| top | `cli/` | the CLI | nothing |\n\n"
        "## Next\n| a | b |\n"
    )
    assert allowed_imports(doc) == {"solvers": {"methods", "options"}, "cli": set()}
    source = (
        "from typing import TYPE_CHECKING\nfrom eqarena import warehouse, options\n"
        "import eqarena.solvers.nash.limiting_logit\nif TYPE_CHECKING:\n    from eqarena.tasks.rate import X\n"
        "def f():\n    from eqarena.flows import run_flow\n"
    )
    assert imported_rooms(source) == {"warehouse", "options", "solvers", "flows"}


@pytest.mark.parametrize("room", ["solvers", "warehouse"])
def test_the_bottom_rooms_stay_at_the_bottom(room):
    """Solvers and the warehouse import no room above them, whatever the table says."""
    above = {
        "cli",
        "flows",
        "pipelines",
        "tasks",
        "report",
        "judge",
        "llm",
        "generation",
        "importers",
        "runtime",
        "orchestration",
        "api",
    }
    assert not set(room_imports()[room]) & above
