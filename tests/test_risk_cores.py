"""The risk analysis's equilibrium search finds the same equilibria for a seed whatever the number of
cores the command may use (`runtime/one_core.py`): run here with one core and with every core."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

SEARCH = """
import hashlib, json
import numpy as np
from eqarena.solvers import koth_game
from eqarena.solvers.nash.limiting_logit import nash
from eqarena.tasks.risk_analysis import search_equilibria
from eqarena.warehouse.analyses import RunGame
from tests.test_clones import _vicuna_gpt4_tensor

u, models = _vicuna_gpt4_tensor()
game = RunGame("run", "vicuna80", tuple(f"p{k}" for k in range(len(u))), tuple(models), u)
found = search_equilibria(game, nash(koth_game(u)).marginals, 128, 0)
digest = hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in found.marginals)).hexdigest()
print(json.dumps({"distinct": int(found.distinct.sum()), "marginals": digest}))
"""


def _search(cores: set[int]) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SEARCH],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        preexec_fn=lambda: os.sched_setaffinity(0, cores),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_equilibrium_search_does_not_depend_on_the_core_count():
    every = os.sched_getaffinity(0)
    one, all_cores = _search({min(every)}), _search(every)
    assert one["distinct"] >= 20  # the search found many equilibria, not a trivial few
    assert one == all_cores
