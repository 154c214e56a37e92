"""Pipeline steps that are Prefect tasks inside a Prefect flow run and plain calls everywhere else.

A command that needs no Prefect API (an import, a rate run, a report, the main job on recorded
judgments) runs its pipeline (eqarena/pipelines/) as plain Python: Prefect is not even imported, so
a 3-line import starts in about a second. When a Prefect API is configured (`PREFECT_API_URL` in the
environment or in the active Prefect profile, or `EQARENA_PREFECT=always`), the command runs the same
pipeline as a Prefect flow (eqarena/flows.py), and every `@step` inside it becomes a Prefect task with
its own task run, logs and artifacts, as under `eqarena serve` and deployments.

    @step("assemble_tensor")
    def assemble(db, options): ...
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import Callable, TypeVar

from eqarena.exceptions import OptionError

F = TypeVar("F", bound=Callable)

PREFECT_MODES = ("auto", "always", "never")


def step(name: str, **task_options) -> Callable[[F], F]:
    """Mark `fn` as the pipeline step `name` (module docstring); `task_options` (e.g. task_run_name)
    go to its Prefect task."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if in_flow_run():
                return _prefect_task(fn, name, tuple(sorted(task_options.items())))(*args, **kwargs)
            return fn(*args, **kwargs)

        call.fn = fn  # the undecorated step
        return call  # type: ignore[return-value]

    return decorate


@functools.cache
def _prefect_task(fn: Callable, name: str, options: tuple):
    from prefect import task
    from prefect.cache_policies import NONE

    return task(fn, name=name, cache_policy=NONE, **dict(options))


def in_flow_run() -> bool:
    """Whether this code runs inside a Prefect flow run (never true when Prefect was not imported)."""
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The flow run's logger inside a flow run (its lines reach the Prefect API), else `eqarena`'s."""
    if in_flow_run():
        from prefect import get_run_logger

        return get_run_logger()
    return logging.getLogger("eqarena")


def prefect_wanted() -> bool:
    """Whether a command should run its pipeline as a Prefect flow (module docstring).

    `EQARENA_PREFECT`: auto (default: when a Prefect API is configured), always, or never."""
    mode = os.environ.get("EQARENA_PREFECT", "auto").strip().lower() or "auto"
    if mode not in PREFECT_MODES:
        raise OptionError(f"EQARENA_PREFECT must be one of {', '.join(PREFECT_MODES)}; got {mode!r}")
    if mode != "auto":
        return mode == "always"
    if os.environ.get("PREFECT_API_URL"):
        return True
    if "prefect" in sys.modules:  # already imported (e.g. a test harness or a notebook set the API)
        from prefect.settings import get_current_settings

        return bool(get_current_settings().api.url)
    return _profile_sets_api_url()


def _profile_sets_api_url() -> bool:
    """Whether the active profile of Prefect's profiles file sets PREFECT_API_URL (read without
    importing Prefect)."""
    import tomllib

    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    settings = profiles.get("profiles", {}).get(active, {})
    return bool(isinstance(settings, dict) and settings.get("PREFECT_API_URL"))
