"""The result type every equilibrium solver returns, and how a registered method is solved."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from eqarena.methods import Battles, RatingMethod, resolve
from eqarena.solvers.games.normal_form import KING, KothGame, koth_game


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


def solve_equilibrium(method: RatingMethod, game: KothGame, target=None, start=None) -> Equilibrium:
    """The equilibrium method's equilibrium of `game`, selected by `target` (default: the method's);
    from the multipliers `start` where the method `warm_starts` (ignored elsewhere)."""
    if method.solve is None:
        raise ValueError(f"rating method {method.name!r} is a model fit, not an equilibrium")
    options = {"start": start} if start is not None and method.warm_starts else {}
    return resolve(method.solve)(game, target=method.target if target is None else target, **options)


def king_ratings(method: RatingMethod, u_king, battles: Battles | None = None) -> tuple[np.ndarray, float | None]:
    """King-model ratings (M,) of u_king (P, M, M) by `method` (and the battles behind it, if known),
    with the equilibrium's exploitability (None for a model-rating method)."""
    u = np.asarray(u_king, dtype=np.float64)
    if method.is_equilibrium:
        eq = solve_equilibrium(method, koth_game(u))
        return np.asarray(eq.ratings[KING], dtype=np.float64), float(eq.exploitability)
    return np.asarray(method.model_fit(u, battles).ratings, dtype=np.float64), None
