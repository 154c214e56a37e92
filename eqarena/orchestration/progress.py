"""What a long step shows while it runs: a progress bar with an ETA on a terminal, one line otherwise.

    with stage("bootstrap", total=200) as done:
        ...
        done(48)          # replicates finished so far

On a terminal (stderr) a step gets a rich bar (spinner and elapsed time without a total), removed when
it ends; elsewhere (CI, a pipe, a Prefect worker) a step that took `LINE_AFTER_S` or longer leaves one
line `eqarena: <step> done in 12.3 s`. Set EQARENA_PROGRESS=0 to silence both.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator

LINE_AFTER_S = 2.0


def _enabled() -> bool:
    return os.environ.get("EQARENA_PROGRESS", "1").strip() not in ("0", "false", "no")


@contextmanager
def stage(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """Show the step `description` (module docstring); yields `done(n)` to report n of `total` finished."""
    start = time.perf_counter()
    if not _enabled():
        yield lambda n: None
        return
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn()]
        if total is not None:
            columns[3:3] = [MofNCompleteColumn(), TimeRemainingColumn()]
        with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task(description, total=total)
            yield lambda n: progress.update(task, completed=n)
        return
    yield lambda n: None
    seconds = time.perf_counter() - start
    if seconds >= LINE_AFTER_S:
        print(f"eqarena: {description} done in {seconds:.1f} s", file=sys.stderr, flush=True)


def say(line: str) -> None:
    """One line on stderr now, for what a user should know before a long step ends: a choice the
    defaults made, or how long the step will take. A log or pipe gets it as `eqarena: <line>`, like the
    steps' lines; a terminal as it is, above the bars. Silenced by EQARENA_PROGRESS=0."""
    if _enabled():
        print(line if sys.stderr.isatty() else f"eqarena: {line}", file=sys.stderr, flush=True)
