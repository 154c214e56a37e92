"""Tasks of the risk-dominance analysis (paper App. F.4): the pure Nash equilibria of a rate run's
game, many distinct mixed ones around its selected NE, how risky each is, as polars frames."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from eqarena.exceptions import EqarenaError
from eqarena.orchestration.steps import step
from eqarena.runtime.one_core import on_one_core
from eqarena.solvers.analyses.risk import DEFAULT_TOL as EQUILIBRIUM_TOL
from eqarena.solvers.analyses.risk import (
    DiverseNash,
    RiskDominance,
    diverse_nash,
    pure_nash_equilibria,
    risk_dominance,
    risk_rank,
)
from eqarena.warehouse.analyses import RunGame

PLAYERS = ("prompt", "king", "rebel")


@dataclass(frozen=True, eq=False)
class RiskFindings:
    """The kept equilibria (0 = the selected NE) and their risk."""

    searched: int
    marginals: list[np.ndarray]  # (K, A_i) per player
    ratings: list[np.ndarray]  # (K, A_i) per player, deviation gains (eq. 1)
    exploitability: np.ndarray  # (K,)
    risk: RiskDominance
    search_seconds: float


@step("enumerate_pure_nash")
def enumerate_pure_nash(game: RunGame) -> np.ndarray:
    """Every pure-strategy NE (prompt, king, rebel) as indices, (n, 3)."""
    return pure_nash_equilibria(game.u_king)


@step("search_equilibria")
def search_equilibria(game: RunGame, selected: list[np.ndarray], num: int, seed: int) -> DiverseNash:
    """`num` profiles descending exploitability in parallel, pushed apart in ratings; profile 0 is the
    selected NE, fixed. On one core in its own process: the same profiles for a seed on every machine
    (`runtime.one_core`)."""
    return on_one_core(diverse_nash, game.u_king, num, seed=seed, fixed=[selected])


@step("rank_risk")
def rank_risk(game: RunGame, found: DiverseNash, eta: float, steps: int) -> RiskFindings:
    """Risk of the distinct equilibria found (exploitability <= 1e-2), under uniform and iterated priors."""
    keep = np.flatnonzero(found.distinct)
    if len(keep) == 0 or keep[0] != 0:
        raise EqarenaError(
            "the selected NE is not among the equilibria kept: its exploitability exceeds "
            f"{EQUILIBRIUM_TOL} ({found.exploitability[0]:.2e})"
        )
    marginals = [np.asarray(x)[keep] for x in found.marginals]
    risk = risk_dominance(game.u_king, marginals, eta=eta, steps=steps, reference=0)
    return RiskFindings(
        len(found.exploitability),
        marginals,
        [np.asarray(r)[keep] for r in found.ratings],
        found.exploitability[keep],
        risk,
        found.seconds,
    )


def risk_frames(game: RunGame, pure: np.ndarray, findings: RiskFindings) -> dict[str, pl.DataFrame]:
    """The rows of risk_dominance, risk_equilibrium_ratings and pure_nash_equilibria (without run_id)."""
    risk = findings.risk
    k = len(findings.exploitability)
    rank_uniform = np.array([risk_rank(risk.total_uniform, e) for e in range(k)])
    rank_updated = np.array([risk_rank(risk.total_updated, e) for e in range(k)])
    dominance = pl.DataFrame(
        {
            "equilibrium": np.arange(k, dtype=np.int32),
            "is_selected": np.arange(k) == 0,
            "exploitability": findings.exploitability,
            **{f"{p}_uniform": risk.payoffs_uniform[:, i] for i, p in enumerate(PLAYERS)},
            "sum_uniform": risk.total_uniform,
            "rank_uniform": rank_uniform.astype(np.int32),
            **{f"{p}_updated": risk.payoffs_updated[:, i] for i, p in enumerate(PLAYERS)},
            "sum_updated": risk.total_updated,
            "rank_updated": rank_updated.astype(np.int32),
        }
    ).with_columns(source_run_id=pl.lit(game.run_id))
    actions = (game.prompts, game.models, game.models)
    ratings = pl.concat(
        [
            pl.DataFrame(
                {
                    "equilibrium": np.repeat(np.arange(k, dtype=np.int32), len(names)),
                    "player": [player] * (k * len(names)),
                    "action": list(names) * k,
                    "rating": findings.ratings[i].reshape(-1),
                    "mass": findings.marginals[i].reshape(-1),
                }
            )
            for i, (player, names) in enumerate(zip(PLAYERS, actions))
        ]
    )
    pure_rows = pl.DataFrame(
        {
            "prompt_id": [game.prompts[p] for p in pure[:, 0]],
            "king": [game.models[m] for m in pure[:, 1]],
            "rebel": [game.models[m] for m in pure[:, 2]],
        },
        schema={"prompt_id": pl.String, "king": pl.String, "rebel": pl.String},
    )
    return {"risk_dominance": dominance, "risk_equilibrium_ratings": ratings, "pure_nash_equilibria": pure_rows}
