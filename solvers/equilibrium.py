"""The result type every equilibrium solver returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Rating method -> (solution concept, selection target). ne / cce select by the clone-invariant
# affinity entropy (paper Section 3.3); the -shannon variants start from the uniform target (classic
# LLE / maximum-entropy CCE).
EQUILIBRIUM_METHODS = {
    "ne": ("nash", "affinity"),
    "cce": ("cce", "affinity"),
    "ne-shannon": ("nash", "uniform"),
    "cce-shannon": ("cce", "uniform"),
}


@dataclass(frozen=True, eq=False)
class Equilibrium:
    """An NE (product of `marginals`, `joint` None) or a CCE (`joint` set, `marginals` its marginals).

    ratings[i][a] is action a's deviation gain u_i(a, x_-i) - u_i(x) (paper eq. 1); exploitability is
    the sum over players of the largest one (NE: max-regret sum; CCE: max-gap sum).
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
