"""eqarena's errors, and walking an error's chain.

`EqarenaError` is the base of every error eqarena raises for its user to fix (bad input or options, a
busy or damaged warehouse, an unknown dataset, run or method, a provider that refuses): the command line
shows one as a single `error:` line with exit status 1. Each subclass also derives from the builtin
exception it used to be (ValueError, LookupError, RuntimeError, OSError), so callers catching those keep
working. What an exception says about its cause may sit in its causes, contexts, or in the members of an
exception group among them (`exception_chain`)."""

from __future__ import annotations

from typing import Iterator


class EqarenaError(Exception):
    """An error for the user to fix; the command line prints it as one `error:` line, exit status 1."""


class OptionError(EqarenaError, ValueError):
    """An option's or field's value is invalid; the message names the flag or field."""


class NotFoundError(EqarenaError, LookupError):
    """A named thing (dataset, run, method, category, table) is not in the warehouse or the registry."""


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc`, its causes and contexts, and the members of exception groups among them, each once."""
    todo: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while todo:
        error = todo.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        yield error
        todo += [error.__cause__, error.__context__]
        if isinstance(error, BaseExceptionGroup):
            todo += error.exceptions
