"""Where the report's static figures are drawn: here, one after another (the default), or also by helper
processes, which start on them while this one assembles the rest of the page (`drawn_by(pool)`;
`eqarena run` lends its bootstrap's worker processes, idle by then: `runtime.worker_pool.kept_workers`).

A section asks for a figure with `figure_uri(make, *args)`: `make` is a module-level function that
returns a matplotlib Figure (so a helper process can call it by reference) and `args` its picklable
inputs. Drawn here, the call returns the PNG data URI at once; under `drawn_by`, it returns a placeholder
that `drawn_by`'s `fill` replaces with the data URI: the helpers take the figures first first, and
`fill` draws here, last first, those no helper has started. The bytes are the same either way.
A helper pool that breaks (a helper killed) is not an error: its figures are drawn here instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from eqarena.report.figures import data_uri


@dataclass
class _Deferred:
    """The figures handed to a pool during one page's rendering, by placeholder."""

    pool: Executor
    jobs: dict[str, tuple[Future | None, Callable, tuple, dict]] = field(default_factory=dict)

    def submit(self, make: Callable, args: tuple, kwargs: dict) -> str:
        token = f"@@eqarena-figure-{len(self.jobs)}@@"
        try:
            future = self.pool.submit(draw_figure, make, args, kwargs)
        except (BrokenProcessPool, RuntimeError):  # broken, or shut down: drawn here when filled in
            future = None
        self.jobs[token] = (future, make, args, kwargs)
        return token

    def fill(self, html: str) -> str:
        """Draw here, last first, every figure no helper has started (`Future.cancel` succeeds only on
        those), while the helpers work through them first first; then take the helpers' ones."""
        uris = {}
        for token, (future, make, args, kwargs) in reversed(self.jobs.items()):
            if future is None or future.cancel():
                uris[token] = draw_figure(make, args, kwargs)
        for token, (future, make, args, kwargs) in self.jobs.items():
            if token not in uris:
                uris[token] = _result(future) or draw_figure(make, args, kwargs)
        for token, uri in uris.items():
            html = html.replace(token, uri, 1)
        return html


_DEFERRED: ContextVar[_Deferred | None] = ContextVar("eqarena_report_figures", default=None)


def draw_figure(make: Callable, args: tuple, kwargs: dict) -> str:
    """The PNG data URI of `make(*args, **kwargs)` (what a helper runs)."""
    return data_uri(make(*args, **kwargs))


def figure_uri(make: Callable, *args, **kwargs) -> str:
    """The figure `make(*args, **kwargs)` as a PNG data URI, or, inside `drawn_by`, a placeholder for it."""
    deferred = _DEFERRED.get()
    if deferred is None:
        return draw_figure(make, args, kwargs)
    return deferred.submit(make, args, kwargs)


@contextmanager
def drawn_by(pool: Executor | None) -> Iterator[Callable[[str], str]]:
    """Within the block, `figure_uri` hands figures to `pool` (None: draws them here); yields `fill`,
    which takes the page with its placeholders and returns it with the figures in place."""
    if pool is None:
        yield lambda html: html
        return
    deferred = _Deferred(pool)
    reset = _DEFERRED.set(deferred)
    try:
        yield deferred.fill
    finally:
        _DEFERRED.reset(reset)
        for future, *_ in deferred.jobs.values():  # an error on the way: nothing left running for us
            if future is not None:
                future.cancel()


def _result(future: Future | None) -> str | None:
    """The helper's data URI, or None when the pool broke before it drew the figure."""
    if future is None:
        return None
    try:
        return future.result()
    except BrokenProcessPool:
        return None
