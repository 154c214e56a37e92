"""eqarena solvers: pure numerical code (JAX/NumPy) for games, equilibria and ratings. No I/O.

Equilibria must be exact to ~1e-6, so JAX runs in float64 (set on import).
"""

import jax

jax.config.update("jax_enable_x64", True)

from solvers.games import (
    Game,
    KothGame,
    NormalFormGame,
    action_values,
    deviation_gains,
    expected_payoffs,
    exploitability,
    koth_game,
)
from solvers.entropy import (
    affinity_entropy,
    affinity_kernel,
    affinity_target,
    affinity_targets,
    shannon_entropy,
    strategic_dissimilarity,
    tsallis_entropy,
)
from solvers.equilibrium import Equilibrium
from solvers.nash import nash
from solvers.cce import cce, joint_deviation_gains, joint_exploitability, joint_marginals
from solvers.contributions import contributions
from solvers.bradley_terry import EloRatings, bradley_terry, online_elo, score_to_outcome
from solvers.toy_games import chicken, rps, synthetic_king_tensor
from solvers.clones import CloneOutcome, clone_experiment, clone_verdicts, dense_ranks, with_clones
from solvers.risk import DiverseNash, RiskDominance, diverse_nash, pure_nash_equilibria, risk_dominance
from solvers.imputation import ImputationError, ImputedTensor, impute_payoffs
from solvers.imputed_share import imputed_shares

__all__ = [
    "Game",
    "KothGame",
    "NormalFormGame",
    "action_values",
    "deviation_gains",
    "expected_payoffs",
    "exploitability",
    "koth_game",
    "affinity_entropy",
    "affinity_kernel",
    "affinity_target",
    "affinity_targets",
    "shannon_entropy",
    "strategic_dissimilarity",
    "tsallis_entropy",
    "Equilibrium",
    "nash",
    "cce",
    "joint_deviation_gains",
    "joint_exploitability",
    "joint_marginals",
    "contributions",
    "EloRatings",
    "bradley_terry",
    "online_elo",
    "score_to_outcome",
    "chicken",
    "rps",
    "synthetic_king_tensor",
    "CloneOutcome",
    "clone_experiment",
    "clone_verdicts",
    "dense_ranks",
    "with_clones",
    "DiverseNash",
    "RiskDominance",
    "diverse_nash",
    "pure_nash_equilibria",
    "risk_dominance",
    "ImputationError",
    "ImputedTensor",
    "impute_payoffs",
    "imputed_shares",
]
