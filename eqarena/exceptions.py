"""Walking an error's chain: what an exception says about its cause may sit in its causes, contexts, or
in the members of an exception group among them."""

from __future__ import annotations

from typing import Iterator


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
