"""eqarena: game-theoretic ratings of LLMs and prompts from open-ended pairwise evaluations.

Nash and coarse correlated equilibria of the king-of-the-hill evaluation game, selected by the
clone-invariant affinity entropy (Liu et al., ICLR 2025; docs/game.md), beside Elo / Bradley-Terry.

    import eqarena
    eqarena.ingest("vicuna80", db="ratings.duckdb")
    eqarena.rate("vicuna80", db="ratings.duckdb", judges=["prd:gpt4"])
    eqarena.read_ratings("ratings.duckdb", method="ne")
    eqarena.solvers.nash.limiting_logit(eqarena.solvers.koth_game(u_king))    # arrays in, arrays out

Importing eqarena loads nothing heavy and changes no global setting: the names below are loaded on
first use.
"""

from __future__ import annotations

from eqarena.runtime.lifeline import tie_if_spawned_worker

tie_if_spawned_worker()  # a spawned worker dies with its command even while it is still importing

import importlib  # noqa: E402
from importlib.metadata import PackageNotFoundError, version  # noqa: E402

try:
    __version__ = version("eqarena")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

_API = {"ingest": "eqarena.api", "rate": "eqarena.api", "read_ratings": "eqarena.api"}
_SUBPACKAGES = ("solvers", "options", "warehouse")

__all__ = ["__version__", "ingest", "rate", "read_ratings", *_SUBPACKAGES]


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"eqarena.{name}")
    raise AttributeError(f"module 'eqarena' has no attribute {name!r}")
