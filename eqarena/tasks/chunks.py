"""Running a plan chunk by chunk through one shared runner: a few chunks in flight at a time (the next
one starts while the last requests of the previous one finish), none started once the runner halted."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Sequence, TypeVar

Chunk = TypeVar("Chunk")

CHUNKS_IN_FLIGHT = 2


async def run_chunks(
    chunks: Sequence[Chunk],
    run: Callable[[Chunk], Awaitable[object]],
    halted: Callable[[], bool],
    skip: Callable[[Chunk], None],
    in_flight: int = CHUNKS_IN_FLIGHT,
) -> None:
    """`run` each chunk, `in_flight` at a time; a chunk whose turn comes once `halted()` is `skip`ped.
    Raises the first chunk's error after every chunk has ended."""
    gate = asyncio.Semaphore(in_flight)

    async def one(chunk: Chunk) -> None:
        async with gate:
            if halted():
                skip(chunk)
                return
            await run(chunk)

    outcomes = await asyncio.gather(*(one(c) for c in chunks), return_exceptions=True)
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    if failures:
        raise failures[0]
