"""Compiled solver code kept between runs: JAX's persistent compilation cache.

The batched solvers (`solvers.nash.batched`, `solvers.cce.batched`) take seconds to compile on first use
in each process, which on a small game is longer than the solve. The `eqarena` command keeps what JAX
compiles in a directory, read back by its worker processes and by later runs: EQARENA_JAX_CACHE (a
directory, or "off"), by default $XDG_CACHE_HOME/eqarena/jax, i.e. ~/.cache/eqarena/jax. JAX reads
its settings when first imported, so they are set as environment variables before that (spawned
workers inherit them); a JAX_COMPILATION_CACHE_DIR already set is left alone.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "EQARENA_JAX_CACHE"
MIN_COMPILE_SECONDS = "0.2"  # smaller compilations are not worth a file


def default_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eqarena" / "jax"


def use_compile_cache() -> str | None:
    """Point JAX's persistent compilation cache at EQARENA_JAX_CACHE (default `default_directory()`);
    returns the directory, or None when the cache is off."""
    choice = os.environ.get(ENV, "").strip()
    if choice.lower() == "off":
        return None
    directory = os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", choice or str(default_directory()))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", MIN_COMPILE_SECONDS)
    return directory
