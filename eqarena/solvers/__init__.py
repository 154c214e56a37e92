"""eqarena solvers: pure numerical code (NumPy, and JAX where it pays) for games, equilibria and
ratings. No I/O. Equilibria must be exact to ~1e-6: every public solver that runs JAX code runs it in
float64 within the call (solvers/_precision.py); importing changes no JAX setting.
"""

from eqarena.methods import (
    ModelFit,
    RatingMethod,
    get_method,
    method_names,
    parse_methods,
    register,
    registered,
    unregister,
)
from eqarena.solvers.analyses.clones import CloneOutcome, clone_experiment, clone_verdicts, dense_ranks, with_clones
from eqarena.solvers.analyses.contributions import contributions
from eqarena.solvers.analyses.risk import DiverseNash, RiskDominance, diverse_nash, pure_nash_equilibria, risk_dominance
from eqarena.solvers.cce.max_entropy import cce, joint_deviation_gains, joint_exploitability, joint_marginals
from eqarena.solvers.games.entropy import (
    affinity_entropy,
    affinity_kernel,
    affinity_target,
    affinity_targets,
    shannon_entropy,
    strategic_dissimilarity,
    tsallis_entropy,
)
from eqarena.solvers.games.equilibrium import Equilibrium
from eqarena.solvers.games.normal_form import (
    Game,
    KothGame,
    NormalFormGame,
    action_values,
    deviation_gains,
    expected_payoffs,
    exploitability,
    koth_game,
)
from eqarena.solvers.nash.limiting_logit import nash
from eqarena.solvers.pairwise.bradley_terry import EloRatings, bradley_terry, online_elo, score_to_outcome
from eqarena.solvers.sparse.imputation import ImputationError, ImputedTensor, impute_payoffs
from eqarena.solvers.sparse.imputed_share import imputed_shares
from eqarena.solvers.toys.games import chicken, rps, synthetic_king_tensor

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
    "ModelFit",
    "RatingMethod",
    "get_method",
    "method_names",
    "parse_methods",
    "register",
    "registered",
    "unregister",
]
