"""Method names live in the registry: no module of eqarena but methods.py spells a registered method's name
as a string (its roles, HEADLINE, REFERENCE, ..., say which method plays which part). Docstrings may
name methods, and `__all__` lists functions (`solvers.cce` is a function as well as a method)."""

from __future__ import annotations

import ast
from pathlib import Path

from eqarena.methods import method_names

PACKAGE = Path(__file__).resolve().parents[1] / "eqarena"


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, nodes)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _exported(tree: ast.AST) -> set[int]:
    return {
        id(element)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        for element in ast.walk(node.value)
    }


def spelled_names(path: Path, names: set[str]) -> list[str]:
    """`file:line: 'name'` for each string constant of `path` that is one of `names` (docstrings and
    `__all__` left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree) | _exported(tree)
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in names
        and id(node) not in skip
    ]


def test_no_module_but_the_registry_spells_a_method_name():
    names = set(method_names())
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "methods.py" or path.parent != PACKAGE
        for hit in spelled_names(path, names)
    ]
    assert found == []


def test_the_scan_finds_a_spelled_name():
    module = PACKAGE / "tasks" / "rate.py"  # a real module, scanned with a name it spells as a constant
    assert spelled_names(module, {"king"}), "the scan found none of rate.py's 'king' constants"
