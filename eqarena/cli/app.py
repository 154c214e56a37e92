"""The `eqarena` command: one typer app, its commands registered from the modules of this package."""

from __future__ import annotations

import functools
import gc
import logging
import os
import signal
import sys
import threading
import traceback
from importlib.machinery import ExtensionFileLoader
from typing import Callable

import typer

from eqarena.cli import analyze, data, generating, judging, main_job, paper, rating, simulate, status
from eqarena.cli.help import TidyHelpGroup
from eqarena.cli.output import say
from eqarena.cli.support import release_frames
from eqarena.runtime.background import exit_now_if_busy
from eqarena.runtime.compile_cache import use_compile_cache
from eqarena.runtime.quick_exit import nothing_pending, quick_exit

app = typer.Typer(
    name="eqarena",
    help="Game-theoretic ratings of LLMs and prompts from pairwise LLM-judge evaluations.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # docstrings' single line breaks are joined; `code` shows as code
    cls=TidyHelpGroup,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        say(f"eqarena {version('eqarena')}")
        raise typer.Exit()


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(value: str | None) -> str | None:
    if value is not None and value.upper() not in LOG_LEVELS:
        raise typer.BadParameter(f"expected one of {', '.join(LOG_LEVELS)} (any case); got {value!r}")
    return None if value is None else value.upper()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    log_level: str | None = typer.Option(
        None,
        "--log-level",
        callback=_log_level,
        help="Log lines of eqarena and of Prefect (flow runs) from this level on: DEBUG, INFO, WARNING or "
        "ERROR, on standard error (default: eqarena's warnings; Prefect's level from PREFECT_LOGGING_LEVEL).",
    ),
) -> None:
    """Game-theoretic ratings of LLMs and prompts from pairwise LLM-judge evaluations."""
    # Prefect reads these when first imported (inside the commands): without a Prefect server it starts
    # a temporary local one, which may take long on a busy machine; it must never phone home.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if log_level is not None:
        _show_logs(log_level)
    use_compile_cache()  # before JAX is first imported (eqarena/runtime/compile_cache.py)


def _show_logs(level: str) -> None:
    """eqarena's log lines from `level` on to standard error, and Prefect's (read when it is first imported,
    inside the command)."""
    os.environ["PREFECT_LOGGING_LEVEL"] = level
    logger = logging.getLogger("eqarena")
    logger.setLevel(level)
    if not any(getattr(h, "eqarena_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        handler.eqarena_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)


app.command()(data.ingest)
app.command(name="import", help=data.IMPORT_HELP)(data.import_data)
app.command()(status.status)
app.command()(status.check)
app.command()(rating.rate)
app.command()(rating.report)
app.command()(rating.export)
app.command()(rating.methods)
app.command("run")(main_job.run)
app.command("refresh")(main_job.refresh)
app.command("serve")(main_job.serve)
app.command("generate")(generating.generate)
app.command("judge")(judging.judge)
app.add_typer(analyze.analyze_app, name="analyze")
app.add_typer(paper.paper_app, name="paper")
app.add_typer(simulate.simulate_app, name="simulate")


def main() -> None:
    """Console-script entry point. SIGINT and SIGTERM interrupt the command (KeyboardInterrupt), so
    its worker processes are stopped and nothing partial is written, even when it was started in the
    background with SIGINT ignored, or when the signal lands where Python drops exceptions (`_interrupted`,
    `_redelivering`)."""
    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    sys.unraisablehook = _redelivering(sys.unraisablehook)
    try:
        app()
    except SystemExit as exc:  # how every command ends: done, an `error:` line, or interrupted (130)
        _leave(exc, exc.code)
        raise
    except BaseException as exc:
        if _SIGNALLED or _interrupted_query(exc):  # an interrupt that a library turned into its own error
            _leave(exc, INTERRUPTED)
            sys.exit(INTERRUPTED)
        traceback.print_exc()  # an unexpected error: its traceback, then nothing else
        _leave(exc, 1)
        sys.exit(1)


def _leave(exc: BaseException, code: object) -> None:
    """End the process now, without the interpreter's shutdown, when no thread's work is pending
    (eqarena/runtime/quick_exit.py). Otherwise return to exit normally, unless a background
    computation is still running (eqarena/runtime/background.py). Either way, a failed or
    interrupted command first frees what its error's frames hold, so that what waits for the garbage
    collector is done before the exit handlers run, and the shutdown prints no binding's leak warnings."""
    if code not in (0, None):
        release_frames(exc)
    if nothing_pending():
        quick_exit(code)
    if code in (0, None):
        release_frames(exc)
    exit_now_if_busy(code)


INTERRUPTED = 130  # the exit code of an interrupted command (as Typer gives a KeyboardInterrupt)
_SIGNALLED: list[str] = []  # the stopping signals received


def _interrupted_query(exc: BaseException) -> bool:
    from eqarena.warehouse.connection import interrupted_query  # DuckDB: not imported before a command needs it

    return interrupted_query(exc)


class _Stopped(KeyboardInterrupt):
    """The KeyboardInterrupt of a stopping signal (`signum`)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


def _interrupted(signum, frame) -> None:
    if _drops_exceptions(frame):  # raised there, Python would print and drop it: deliver it again
        _deliver_again(signum)
        return
    _SIGNALLED.append(signal.Signals(signum).name)
    raise _Stopped(signum)


_REDELIVER_S = 0.01


def _deliver_again(signum: int) -> None:
    again = threading.Timer(_REDELIVER_S, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


# A compiled extension module's initialisation: its C code runs in one of these (single-phase or multi-phase)
_EXTENSION_INIT = {ExtensionFileLoader.create_module.__code__, ExtensionFileLoader.exec_module.__code__}


def _drops_exceptions(frame) -> bool:
    """Whether `frame` runs where an exception raised may be dropped: inside a garbage-collection callback
    (JAX registers one, and it runs often while modules import), a finalizer or the unraisable hook, where
    Python prints and drops exceptions, or inside the initialisation of a compiled extension module, whose C
    code may swallow them (every Cython module with memoryviews, numpy.random's among them, registers their
    type with `collections.abc.Sequence` in a bare `try: ... except: pass`) or crash on them (jaxlib's did,
    mid-import). The hook counts whenever it is redelivering: a signal sent again can land before it returns."""
    callbacks = {getattr(callback, "__code__", None) for callback in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if code in callbacks or code in _EXTENSION_INIT or code in _REDELIVERY or code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _redelivering(default: Callable) -> Callable:
    """A `sys.unraisablehook` that sends a stopping signal again when its KeyboardInterrupt was dropped where
    `_drops_exceptions` cannot tell (a weakref callback): the interrupt is then raised wherever the command is
    10 ms later, not lost. Everything else goes to `default`."""
    return functools.partial(_redeliver_or, default)


def _redeliver_or(default: Callable, unraisable) -> None:
    if isinstance(unraisable.exc_value, _Stopped):
        _deliver_again(unraisable.exc_value.signum)
    else:
        default(unraisable)


# Code that sends a signal again; the signal may land while it still runs (a loaded machine), and is sent again
_REDELIVERY = {_deliver_again.__code__, _redeliver_or.__code__}


if __name__ == "__main__":
    main()
