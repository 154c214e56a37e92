"""The persistent compilation cache the `eqarena` command sets up (eqarena/runtime/compile_cache.py): where it
points JAX, how it is turned off, and that a second process reads back what the first compiled."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
from eqarena.runtime.compile_cache import use_compile_cache
directory = use_compile_cache()
import jax
print(directory, jax.config.jax_compilation_cache_dir)
"""

BATCHED_SOLVE = """
from eqarena.runtime.compile_cache import use_compile_cache
use_compile_cache()
import numpy as np
from eqarena import solvers
from eqarena.solvers.bootstrap.confidence import bootstrap_ratings
u = solvers.synthetic_king_tensor(20, 4, seed=5)
out = bootstrap_ratings(u, ["ne"], replicates=4, seed=0, schemes=("prompts",))[0]
print(out.diagnostics["max_exploitability"])
"""


def _run(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "EQARENA_JAX", "XDG_CACHE"))}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True, timeout=300, check=True
    )
    return out.stdout.strip()


def test_the_cache_goes_where_eqarena_jax_cache_says(tmp_path):
    assert _run(PROBE, EQARENA_JAX_CACHE=str(tmp_path)) == f"{tmp_path} {tmp_path}"


def test_by_default_it_is_in_the_user_cache_directory(tmp_path):
    expected = tmp_path / "eqarena" / "jax"
    assert _run(PROBE, XDG_CACHE_HOME=str(tmp_path), HOME=str(tmp_path)) == f"{expected} {expected}"


def test_off_leaves_jax_without_a_cache():
    assert _run(PROBE, EQARENA_JAX_CACHE="off") == "None None"


@pytest.mark.integration  # two processes compiling the batched NE solver
def test_a_second_process_reads_back_what_the_first_compiled(tmp_path):
    first = _run(BATCHED_SOLVE, EQARENA_JAX_CACHE=str(tmp_path))
    entries = sorted(p.name for p in tmp_path.iterdir())
    assert any(name.startswith("jit_run_lane") for name in entries), entries
    modified = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    second = _run(BATCHED_SOLVE, EQARENA_JAX_CACHE=str(tmp_path))
    assert float(first) <= 1e-6 and float(second) <= 1e-6
    # read, not compiled again: no entry was rewritten and none added
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == modified
