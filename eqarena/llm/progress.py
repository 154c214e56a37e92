"""The judge's progress bar (rich): samples done / total, rate per minute, ETA and spend so far."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text


class RateColumn(ProgressColumn):
    """Samples per minute, from rich's moving estimate of the speed."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-/min" if speed is None else f"{speed * 60:,.0f}/min", style="progress.data.speed")


class SpendColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(f"${task.fields.get('spend', 0.0):,.4f}", style="green")


class JudgeProgress:
    """A context manager around one rich progress bar; every method is a no-op when disabled."""

    def __init__(self, total: int, *, label: str = "judging", enabled: bool = True, console: Console | None = None):
        self.enabled = enabled and total > 0
        self._progress: Progress | None = None
        self._task = None
        self._total = total
        self._label = label
        self._console = console or Console(stderr=True)

    def __enter__(self) -> JudgeProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                RateColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                SpendColumn(),
                console=self._console,
                speed_estimate_period=60.0,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self._label, total=self._total, spend=0.0)
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def advance(self, samples: int, spend_usd: float) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=samples, spend=spend_usd)

    def add_to_total(self, samples: int) -> None:
        """More work appeared (a sample is asked again after unparseable output)."""
        if self._progress is not None:
            self._total += samples
            self._progress.update(self._task, total=self._total)

    def note(self, line: str) -> None:
        """Print a line above the bar (on stderr as it is when there is no bar)."""
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)
