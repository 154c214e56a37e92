"""The paper's toy-game tables (App. D rock-paper-scissors, App. E chicken), with and without a cloned
action: each rating method's equilibrium mass and rating of the row player's actions, and whether the
ratings of the original actions survive the clone (clone invariance, paper Section 3.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eqarena.solvers.cce.deviation import deviation
from eqarena.solvers.cce.max_entropy import cce
from eqarena.solvers.games.normal_form import NormalFormGame
from eqarena.solvers.nash.limiting_logit import nash
from eqarena.solvers.toys.games import chicken, rps

CLONE_TOLERANCE = 1e-6  # ratings closer than this count as unchanged by the clone

# (name, solve): NE and CCE with the affinity target (clone-invariant) and the uniform one, deviation ratings
TOY_METHODS = (
    ("NE (affinity)", lambda g: nash(g, target="affinity")),
    ("NE (uniform)", lambda g: nash(g, target="uniform")),
    ("CCE (affinity)", lambda g: cce(g, target="affinity")),
    ("CCE (uniform)", lambda g: cce(g, target="uniform")),
    ("Deviation ratings", deviation),
)


@dataclass(frozen=True)
class ToyGame:
    """A toy game and its version with a cloned action; `origin[k]` is the action of the original game
    that action k of the cloned game copies."""

    name: str
    actions: tuple[str, ...]
    game: NormalFormGame
    cloned_actions: tuple[str, ...]
    cloned: NormalFormGame
    origin: tuple[int, ...]


@dataclass(frozen=True)
class ToyRow:
    game: str
    cloned: bool
    method: str
    actions: tuple[str, ...]
    mass: np.ndarray  # the row player's marginal
    rating: np.ndarray  # the row player's deviation gains (paper eq. 1)
    exploitability: float


@dataclass(frozen=True)
class CloneCheck:
    game: str
    method: str
    largest_change: float  # over the original actions' ratings (and each clone against its original)

    @property
    def invariant(self) -> bool:
        return self.largest_change <= CLONE_TOLERANCE


def toy_games() -> tuple[ToyGame, ...]:
    return (
        ToyGame(
            "rock-paper-scissors",
            ("Rock", "Paper", "Scissors"),
            rps(),
            ("Rock", "Rock (clone)", "Paper", "Scissors"),
            rps(clone_rock=True),
            (0, 0, 1, 2),
        ),
        ToyGame(
            "chicken",
            ("Swerve", "Straight"),
            chicken(),
            ("Swerve", "Straight", "Straight (clone)"),
            chicken(clone_straight=True),
            (0, 1, 1),
        ),
    )


def toy_tables() -> tuple[list[ToyRow], list[CloneCheck]]:
    """Every toy game, with and without its clone, solved by every method of TOY_METHODS."""
    rows, checks = [], []
    for toy in toy_games():
        for method, solve in TOY_METHODS:
            plain, cloned = solve(toy.game), solve(toy.cloned)
            rows.append(
                ToyRow(toy.name, False, method, toy.actions, plain.marginals[0], plain.ratings[0], plain.exploitability)
            )
            rows.append(
                ToyRow(
                    toy.name,
                    True,
                    method,
                    toy.cloned_actions,
                    cloned.marginals[0],
                    cloned.ratings[0],
                    cloned.exploitability,
                )
            )
            change = np.abs(np.asarray(cloned.ratings[0]) - np.asarray(plain.ratings[0])[list(toy.origin)]).max()
            checks.append(CloneCheck(toy.name, method, float(change)))
    return rows, checks
