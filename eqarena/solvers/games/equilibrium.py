"""The result type every equilibrium solver returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False)
class Equilibrium:
    """An NE (product of `marginals`, `joint` None) or a CCE (`joint` set, `marginals` its marginals).

    ratings[i][a] is action a's deviation gain u_i(a, x_-i) - u_i(x) (paper eq. 1, docs/game.md#ratings);
    exploitability is the sum over players of the largest one (NE: max-regret sum; CCE: max-gap sum).
    """

    marginals: list[np.ndarray]
    joint: np.ndarray | None
    ratings: list[np.ndarray]
    exploitability: float
    method: str = ""
    target: str = ""
    steps: int = 0
    final_temperature: float | None = None
    seconds: float = 0.0
    diagnostics: dict = field(default_factory=dict)
    multipliers: list[np.ndarray] | None = None  # CCE: the dual's, one (A_i,) array per player (`cce` start=)
