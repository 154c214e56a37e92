"""The Prefect API a command's flows report to, started for the command when none is configured.

Without `PREFECT_API_URL`, Prefect starts a temporary API server itself (uvicorn serving Prefect's
app on 127.0.0.1) and stops it at exit, but a command killed with SIGKILL never reaches its exit
handlers and that server keeps running. eqarena starts the same server, the same way, so that it
never outlives the command by more than a moment (`tests/test_prefect_api_lifetime.py`):

- the kernel kills it when the command dies (Linux `prctl(PR_SET_PDEATHSIG, SIGKILL)`): a kill -9 of
  the command takes the server at once. (SIGTERM starts uvicorn's graceful shutdown, which waits
  for every request in flight: one unfinished request kept the server of a killed command alive.)
- it runs in its own session, so Ctrl-C in a terminal (SIGINT to the whole foreground process group)
  or `timeout` (SIGTERM to its group) reach the command only: the command still needs its API to
  record the interrupted flow run, then stops it at exit;
- at exit the command sends SIGTERM to the server's process group and SIGKILL after STOP_GRACE_S.

With an API configured (a Prefect server, a test harness), nothing starts.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack

import httpx

from eqarena.exceptions import EqarenaError
from eqarena.orchestration.prefect_exit import release_prefect_at_exit

STOP_GRACE_S = 1.0  # an idle server stops in about 0.2 s after SIGTERM

# Runs in the server's process before uvicorn: ask to be killed when the parent dies, and give up at
# once if it already has (the parent may die between fork and prctl). Linux only; elsewhere the
# server is still stopped at normal exit.
_DIE_WITH_PARENT = """
import ctypes, os, signal, sys
parent = int(sys.argv[1])
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
if os.getppid() != parent:
    sys.exit(0)
sys.argv = ["uvicorn", *sys.argv[2:]]
from uvicorn.main import main
main()
"""


class TemporaryApiError(EqarenaError, RuntimeError):
    """The temporary Prefect API did not come up."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_temporary_api(timeout_s: float) -> tuple[subprocess.Popen, str]:
    """Start Prefect's API server on a free 127.0.0.1 port as a child that dies with this process;
    returns (process, api_url) once it answers /health."""
    import prefect
    from prefect.settings import get_current_settings

    port = _free_port()
    env = {
        **os.environ,
        **get_current_settings().to_environment_variables(exclude_unset=True),
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }
    args = [
        sys.executable,
        "-c",
        _DIE_WITH_PARENT,
        str(os.getpid()),
        "--app-dir",
        str(prefect.__module_path__.parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]
    errors = tempfile.TemporaryFile()  # a file, not a pipe: nobody reads it while the server runs
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True)
    atexit.register(stop_temporary_api, process)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + timeout_s
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                errors.seek(0)
                error = errors.read().decode(errors="replace").strip().splitlines()[-1:]
                raise TemporaryApiError(
                    f"the temporary Prefect API server exited with code {process.returncode}"
                    + (f": {error[0]}" if error else "")
                )
            try:
                if client.get(f"{url}/health", timeout=2).status_code == 200:
                    return process, url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    stop_temporary_api(process)
    raise TemporaryApiError(
        f"the temporary Prefect API server did not answer within {timeout_s:.0f} s "
        "(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); or set PREFECT_API_URL"
    )


def stop_temporary_api(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Stop the server and whatever it started (its process group): SIGTERM, then SIGKILL after `grace_s`."""
    if process.poll() is not None:
        return
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(process.pid, signal.SIGKILL)  # the server if it is still there, and any child it left
    process.wait()


def _signal_group(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:  # the group is empty
        pass


_temporary = ExitStack()  # holds the settings that point this process at its temporary API
_temporary_url: list[str] = []


def ensure_prefect_api() -> str | None:
    """Make this process's flows report to the configured Prefect API, or else to a temporary one
    started for it (module docstring), for the rest of the process, and free what Prefect holds at
    exit (eqarena/orchestration/prefect_exit.py). Returns the temporary API's URL (None when an API is
    configured); idempotent."""
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    settings = get_current_settings()
    if settings.api.url:
        release_prefect_at_exit()
        return _temporary_url[0] if _temporary_url else None
    timeout = float(settings.server.ephemeral.startup_timeout_seconds)
    _, url = start_temporary_api(timeout)
    release_prefect_at_exit()  # registered after the server's stop, so it runs before it
    _temporary.enter_context(temporary_settings(updates={PREFECT_API_URL: url}))
    _temporary_url.append(url)
    return url
