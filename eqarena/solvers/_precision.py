"""Float64 for the solvers, without switching it on for the whole process.

Equilibria must be exact to ~1e-6, so every public solver that runs JAX code does so in float64:
`@float64` runs the function under `jax.enable_x64(True)` (a context local to the calling thread)
and hands JAX arrays back as NumPy arrays, so callers never hold 64-bit JAX arrays outside it.
Importing eqarena changes no JAX setting.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import jax
import numpy as np

F = TypeVar("F", bound=Callable)


def _to_numpy(value):
    if isinstance(value, jax.Array):
        return np.asarray(value)
    if isinstance(value, list):
        return [_to_numpy(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_to_numpy(v) for v in value)
    return value


def float64(function: F) -> F:
    """Run `function` with JAX in float64 (thread-local); JAX arrays it returns become NumPy arrays."""

    @functools.wraps(function)
    def run(*args, **kwargs):
        with jax.enable_x64(True):
            return _to_numpy(function(*args, **kwargs))

    return run  # type: ignore[return-value]
