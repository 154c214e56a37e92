"""Every error eqarena raises for its user derives from one base, `EqarenaError`, and keeps the builtin type
it had (callers catching ValueError or LookupError still catch it)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import eqarena
from eqarena.exceptions import EqarenaError, NotFoundError, OptionError

pytestmark = pytest.mark.unit

# Control flow inside one module, never shown to a user: a stop signal's unwinding (two of them), a
# recording's missing sample (stored as an error row), an LP's infeasible round (retried).
INTERNAL = {"Stopping", "RecordingMissing", "_Infeasible", "_Stopped"}


def _exception_classes():
    for info in pkgutil.walk_packages(eqarena.__path__, "eqarena."):
        if info.name.endswith(("__main__", "build_seeds")):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name:
                yield info.name, name, value


def test_every_error_class_of_eqarena_derives_from_the_base():
    classes = list(_exception_classes())
    assert len(classes) >= 15, [name for _, name, _ in classes]
    outside = [
        f"{module}.{name}"
        for module, name, cls in classes
        if name not in INTERNAL and not issubclass(cls, EqarenaError)
    ]
    assert not outside, f"error classes without the EqarenaError base: {outside}"


def test_option_and_lookup_errors_keep_their_builtin_types():
    from eqarena.methods import parse_methods
    from eqarena.options import RunLimits

    with pytest.raises(OptionError) as raised:
        parse_methods("ne,no-such-method")
    assert isinstance(raised.value, ValueError) and "no-such-method" in str(raised.value)
    with pytest.raises(OptionError, match="--concurrency"):
        RunLimits(concurrency=0)
    assert issubclass(NotFoundError, LookupError) and issubclass(OptionError, ValueError)


def _builtin_exceptions_handed_to_cli_errors(source: str) -> list[str]:
    """Names of builtin exception classes a module's source passes to `cli_errors(...)`."""
    import ast
    import builtins

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "cli_errors":
            for arg in node.args:
                value = getattr(builtins, getattr(arg, "id", ""), None)
                if inspect.isclass(value) and issubclass(value, BaseException):
                    found.append(arg.id)
    return found


def test_the_command_line_turns_only_eqarenas_errors_into_one_line():
    """A builtin ValueError or RuntimeError is a bug, to be seen with its traceback, not a user's error line:
    the command line hands `cli_errors` eqarena's error classes only."""
    from pathlib import Path

    assert _builtin_exceptions_handed_to_cli_errors("@cli_errors(LookupError, MyError)\ndef f(): ...") == [
        "LookupError"
    ]
    cli = Path(eqarena.__file__).parent / "cli"
    offending = {
        path.name: names
        for path in sorted(cli.glob("*.py"))
        if (names := _builtin_exceptions_handed_to_cli_errors(path.read_text(encoding="utf-8")))
    }
    assert not offending, offending
