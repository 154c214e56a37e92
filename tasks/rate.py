"""Tasks: rate a payoff tensor by Bradley-Terry and by equilibria, and write the run to the warehouse."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np
from prefect import task
from prefect.cache_policies import NONE

import solvers
import warehouse
from solvers.bootstrap import SCHEMES, bootstrap_ratings
from solvers.bradley_terry import FALLBACK_REGULARIZATION
from solvers.equilibrium import EQUILIBRIUM_METHODS
from solvers.games import KING, KOTH_PLAYER_NAMES, REBEL
from solvers.imputed_share import imputed_shares
from warehouse.ratings import (
    EquilibriumRecord,
    IntervalRecord,
    MethodRatings,
    write_rate_run,
)
from warehouse.runs import RunRecord
from warehouse.tensor import PayoffTensor

METHODS = ("bt", *EQUILIBRIUM_METHODS)
DEFAULT_METHODS = METHODS
# Below this many replicate solves the worker processes' start-up (~2 s) costs more than it saves.
_PARALLEL_FROM = 200
_VERSIONED = ("eqarena", "jax", "numpy", "duckdb", "prefect")


def parse_methods(methods: list[str] | str | None) -> list[str]:
    """Normalise `bt,ne` / ['bt', 'ne'] to a list of known methods in canonical order."""
    if methods is None:
        return list(DEFAULT_METHODS)
    items = methods.split(",") if isinstance(methods, str) else [p for m in methods for p in m.split(",")]
    items = [m.strip().lower() for m in items if m.strip()]
    unknown = [m for m in items if m not in METHODS]
    if unknown:
        raise ValueError(f"--methods: unknown method {', '.join(unknown)} (choose from {', '.join(METHODS)})")
    if not items:
        raise ValueError(f"--methods: give at least one of {', '.join(METHODS)}")
    return [m for m in METHODS if m in items]


def package_versions() -> dict[str, str]:
    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "unknown"
    return versions


@dataclass(frozen=True, eq=False)
class Solved:
    """What one method produced, ready to store."""

    method: str
    ratings: list[MethodRatings]
    equilibrium: EquilibriumRecord | None
    seconds: float
    diagnostics: dict = field(default_factory=dict)


@task(name="rate_bradley_terry", cache_policy=NONE)
def rate_bradley_terry(tensor: PayoffTensor, battles: dict[str, np.ndarray], bootstrap: int, seed: int) -> Solved:
    """Bradley-Terry on every ok judgment (a battle of model A vs B, A's score s in [-1, 1] counted as
    (1 + s) / 2 of a win), Elo scale (mean 1000) with percentile bootstrap confidence intervals.

    When the plain maximum-likelihood fit does not exist (a model never loses or never wins), a small
    L2 penalty (solvers.bradley_terry.FALLBACK_REGULARIZATION) keeps it finite; the run records which was used."""
    start = time.perf_counter()
    args = (battles["model_a"], battles["model_b"], solvers.score_to_outcome(battles["score"]))
    options = dict(num_models=len(tensor.models), bootstrap=bootstrap, seed=seed)
    regularization = 0.0
    try:
        fit = solvers.bradley_terry(*args, **options)
    except ValueError as exc:
        if "does not exist" not in str(exc):
            raise
        regularization = FALLBACK_REGULARIZATION
        fit = solvers.bradley_terry(*args, regularization=regularization, **options)
    ci_lo = None if fit.ci_lo is None else np.asarray(fit.ci_lo)
    ci_hi = None if fit.ci_hi is None else np.asarray(fit.ci_hi)
    ratings = MethodRatings("bt", "king", tensor.models, np.asarray(fit.ratings), ci_lo=ci_lo, ci_hi=ci_hi)
    diagnostics = {"battles": int(fit.num_battles), "iterations": int(fit.iterations),
                   "regularization": regularization, "bootstrap": bootstrap, "confidence": float(fit.confidence)}
    return Solved("bt", [ratings], None, time.perf_counter() - start, diagnostics)


def _scalar_diagnostics(diagnostics: dict) -> dict:
    """Diagnostics fit for a JSON column: scalars, strings and short lists only."""
    kept = {}
    for key, value in (diagnostics or {}).items():
        if isinstance(value, (bool, int, float, str, np.generic)) or value is None:
            kept[str(key)] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, (list, tuple, np.ndarray)) and np.size(value) <= 32:
            kept[str(key)] = np.asarray(value).tolist()
    return kept


@task(name="solve_equilibrium", cache_policy=NONE)
def solve_equilibrium(tensor: PayoffTensor, method: str) -> Solved:
    """NE (limiting logit equilibrium) or CCE (max relative entropy) of the king-of-the-hill game,
    ratings = deviation gains (paper eq. 1) for all three players, king x rebel contributions (Sec. 5.3)."""
    concept, target = EQUILIBRIUM_METHODS[method]
    start = time.perf_counter()
    game = solvers.koth_game(tensor.u_king)
    eq = solvers.nash(game, target=target) if concept == "nash" else solvers.cce(game, target=target)
    delta = np.asarray(solvers.contributions(game, eq, KING, REBEL))
    seconds = time.perf_counter() - start
    actions = (tensor.prompts, tensor.models, tensor.models)
    shares = (None,) * 3 if tensor.imputed is None else imputed_shares(tensor.imputed, eq.marginals, eq.joint)
    ratings = [
        MethodRatings(method, name, acts, np.asarray(eq.ratings[k]), mass=np.asarray(eq.marginals[k]),
                      imputed_share=shares[k])
        for k, (name, acts) in enumerate(zip(KOTH_PLAYER_NAMES, actions))
    ]
    record = EquilibriumRecord(
        method=method,
        solution_concept=concept,
        target=target,
        solver=eq.method or concept,
        exploitability=float(eq.exploitability),
        steps=int(eq.steps) if eq.steps is not None else None,
        final_temperature=eq.final_temperature,
        seconds=float(eq.seconds) if eq.seconds else seconds,
        diagnostics=_scalar_diagnostics(eq.diagnostics),
        marginals={name: np.asarray(eq.marginals[k]) for k, name in enumerate(KOTH_PLAYER_NAMES)},
        joint=None if eq.joint is None else np.asarray(eq.joint),
        contributions=delta,
    )
    return Solved(method, ratings, record, seconds)


@task(name="bootstrap_equilibria", cache_policy=NONE)
def bootstrap_equilibria(tensor: PayoffTensor, battles: dict[str, np.ndarray], solved: list[Solved],
                         replicates: int, seed: int) -> tuple[list[IntervalRecord], dict]:
    """Bootstrap confidence of every solved equilibrium method's model ratings (solvers.bootstrap):
    each replicate's game re-solved exactly, over prompts and over judge samples within cells.

    Returns the records to store and diagnostics (seconds, worker processes, largest exploitability)."""
    full = {s.method: r.rating for s in solved if s.equilibrium is not None for r in s.ratings if r.player == "king"}
    if replicates < 2 or not full:
        return [], {}
    schemes = SCHEMES if len(battles.get("score", ())) else ("prompts",)
    solves = replicates * len(full) * len(schemes)
    workers = min(2, os.cpu_count() or 1) if solves >= _PARALLEL_FROM else 1
    start = time.perf_counter()
    results = bootstrap_ratings(tensor.u_king, list(full), replicates=replicates, seed=seed, schemes=schemes,
                                battles=battles, imputed=tensor.imputed, workers=workers)
    records = [
        IntervalRecord(
            method=b.method, scheme=b.scheme, models=tensor.models, rating=np.asarray(full[b.method]),
            lo=b.lo, hi=b.hi, median=np.median(b.ratings, axis=0), confidence=b.confidence,
            rank_probabilities=b.rank_probabilities, top_k=b.top_k, replicates=len(b.ratings),
            max_exploitability=b.diagnostics["max_exploitability"])
        for b in results
    ]
    diagnostics = {"replicates": replicates, "schemes": list(schemes), "workers": workers,
                   "seconds": time.perf_counter() - start,
                   "max_exploitability": max(b.diagnostics["max_exploitability"] for b in results)}
    return records, diagnostics


@task(name="write_ratings", cache_policy=NONE)
def write_run(db: str | None, run: RunRecord, assembled, solved: list[Solved],
              intervals: list[IntervalRecord] | None = None) -> None:
    """Write the run's rows (runs, payoffs, ratings, equilibria, contributions, coverage, bootstrap
    intervals and rank probabilities) in one transaction."""
    con = warehouse.connect(db)
    try:
        write_rate_run(
            con, run, assembled.tensor, assembled.raw, assembled.dropped,
            [r for s in solved for r in s.ratings],
            [s.equilibrium for s in solved if s.equilibrium is not None],
            intervals or (),
        )
    finally:
        con.close()
