"""The judge's progress bar (rich): samples done / total, rate per minute, ETA and spend so far, and a
countdown while requests wait out a long retry (a provider's Retry-After)."""

from __future__ import annotations

import sys
import time

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


class WaitColumn(ProgressColumn):
    """'retry in 4:32 (HTTP 429)' while requests wait out a long retry, else nothing."""

    def render(self, task: Task) -> Text:
        left = task.fields.get("wait_until", 0.0) - time.monotonic()
        if left <= 0:
            return Text("")
        minutes, seconds = divmod(int(left + 0.999), 60)
        return Text(f"retry in {minutes}:{seconds:02d} ({task.fields.get('wait_reason', '')})", style="yellow")


class JudgeProgress:
    """A context manager around one rich progress bar; every method is a no-op when disabled."""

    def __init__(self, total: int, *, label: str = "judging", enabled: bool = True, console: Console | None = None):
        self.enabled = enabled and total > 0
        self._progress: Progress | None = None
        self._task = None
        self._total = total
        self._label = label
        self._console = console or Console(stderr=True)
        self._wait_until = 0.0  # time.monotonic() at which the longest retry wait announced ends

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
                WaitColumn(),
                console=self._console,
                speed_estimate_period=60.0,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self._label, total=self._total, spend=0.0, wait_until=0.0)
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

    def waiting(self, seconds: float, reason: str, cap_s: float) -> None:
        """A request waits `seconds` before its retry (`reason`: 'HTTP 429'): the bar counts down to
        the latest such retry, and a line says so when no wait was running (with or without a bar)."""
        now = time.monotonic()
        until = now + seconds
        if until <= self._wait_until:
            return
        if self._wait_until <= now:
            at = time.strftime("%H:%M:%S", time.localtime(time.time() + seconds))
            capped = " (the cap, --max-retry-after)" if seconds >= cap_s else ""
            self.note(f"eqarena: {reason}: waiting {seconds:.0f} s{capped} before retrying, until {at}")
        self._wait_until = until
        if self._progress is not None:
            self._progress.update(self._task, wait_until=until, wait_reason=reason)

    def note(self, line: str) -> None:
        """Print a line above the bar (on stderr as it is when there is no bar)."""
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False)
        else:
            print(line, file=sys.stderr, flush=True)
