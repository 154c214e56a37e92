"""A command of eqarena as one row: its name, the options it takes, its pipeline, its flow run's name.

The table of every command is `eqarena/flows.py:COMMANDS`; the command line runs a row's pipeline as
plain Python, or as the row's Prefect flow when a Prefect API is configured (`steps.prefect_wanted`).
A flow is built from the row (`flow_of`), so a flow takes exactly its pipeline's parameters and its
description is the pipeline's docstring: nothing is written twice.

A pipeline that another pipeline calls (the main job calls the judge pipeline) is marked `@subflow`:
inside a flow run the call runs the callee's own flow, a child flow run of the caller's, so the
judging shows in the Prefect UI as its own flow run under the main job's; elsewhere a plain call.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, TypeVar

from eqarena.orchestration.steps import in_flow_run

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True)
class Command:
    """One command: `name` (the CLI's command and its Prefect flow's name), `options` (the options
    dataclass of eqarena/options.py its pipeline takes first; None for one that takes none),
    `pipeline` (the plain-Python pipeline of eqarena/pipelines/) and `run_name` (a callable naming its
    flow runs in the Prefect UI, eqarena/orchestration/runtime.py; None: Prefect's generated names)."""

    name: str
    options: type | None
    pipeline: Callable
    run_name: Callable[[], str] | None = None

    @property
    def function(self) -> Callable:
        """The pipeline itself, without its `@subflow` wrapper."""
        return getattr(self.pipeline, "fn", self.pipeline)


_BUILT: dict[Callable, Command] = {}  # pipeline -> its command, for every command whose flow was built


@functools.cache
def flow_of(command: Command):
    """The Prefect flow of `command`: its pipeline as a flow named `command.name` (built once)."""
    from prefect import flow

    _BUILT[command.pipeline] = command
    return flow(command.function, name=command.name, flow_run_name=command.run_name)


def subflow(pipeline: F) -> F:
    """Mark `pipeline` as one that runs as its command's flow when called inside a flow run (module
    docstring); a plain call outside one, or where its command's flow was not built."""

    @functools.wraps(pipeline)
    def call(*args, **kwargs):
        command = _BUILT.get(call) if in_flow_run() else None
        if command is None:
            return pipeline(*args, **kwargs)
        return flow_of(command)(*args, **kwargs)

    call.fn = pipeline  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]
