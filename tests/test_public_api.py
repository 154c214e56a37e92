"""The package as users import it: one `eqarena` namespace, nothing generic installed beside it, no
import-time side effects, float64 solvers without a global JAX switch, and the README's Python example."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import eqarena

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_one_namespace_and_nothing_generic_beside_it():
    assert tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"][
        "packages"
    ] == ["eqarena"]
    for generic in ("flows", "tasks", "solvers", "warehouse"):
        assert importlib.util.find_spec(generic) is None, generic
        assert importlib.util.find_spec(f"eqarena.{generic}") is not None
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", eqarena.__version__)
    assert {"ingest", "rate", "read_ratings", "solvers"} <= set(eqarena.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nash'"):
        eqarena.nash  # noqa: B018 - the solvers live in eqarena.solvers


_PROBE = """
import sys
import eqarena
light = not {"jax", "prefect", "polars", "openai", "duckdb"} & set(sys.modules)
import jax
before = bool(jax.config.jax_enable_x64)
from eqarena import solvers
u = solvers.synthetic_king_tensor(30, 5, seed=4)
eq = solvers.nash(solvers.koth_game(u))
cc = solvers.cce(solvers.koth_game(u))
print(light, before, bool(jax.config.jax_enable_x64), eq.ratings[1].dtype, eq.exploitability, cc.exploitability)
"""


@pytest.mark.integration  # a fresh interpreter: import-time effects are only visible there
def test_importing_changes_nothing_and_solvers_still_run_in_float64():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout.split()
    light, x64_before, x64_after, dtype, ne_exploitability, cce_exploitability = out
    assert (light, x64_before, x64_after) == ("True", "False", "False")
    assert dtype == "float64" and float(ne_exploitability) <= 1e-9 and float(cce_exploitability) <= 1e-8


def test_solver_results_are_numpy_float64_in_this_process_too():
    u = eqarena.solvers.synthetic_king_tensor(20, 4, seed=1)
    uniform = [np.full(20, 1 / 20), np.full(4, 0.25), np.full(4, 0.25)]
    gains = eqarena.solvers.deviation_gains(eqarena.solvers.koth_game(u), uniform)
    assert all(isinstance(g, np.ndarray) and g.dtype == np.float64 for g in gains)


def _readme_python() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return block


def test_the_readme_python_example_runs(prefect_harness, tmp_path):
    """As a script, without an `if __name__ == "__main__":` guard: the bootstrap's spawned workers do not run
    it again (eqarena/runtime/spawning.py); before, each worker re-ran it and the pool broke."""
    from prefect.settings import get_current_settings

    env = {**os.environ, "PREFECT_API_URL": str(get_current_settings().api.url)}
    script = tmp_path / "example.py"
    script.write_text(_readme_python())
    assert "__main__" not in script.read_text()
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ratings.duckdb").is_file()
    assert "gpt4" in done.stdout and "p_top1" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert float(last.split()[-1]) <= 1e-6  # the NE's exploitability, printed last
