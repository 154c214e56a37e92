"""Tasks: rate a payoff tensor by every chosen method of the registry, bootstrap the equilibria, and
write the run to the warehouse."""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from eqarena import warehouse
from eqarena.datasets.records import DatasetError
from eqarena.exceptions import NotFoundError
from eqarena.methods import RatingMethod, get_method, uses_option
from eqarena.options import BootstrapOptions, RateOptions
from eqarena.orchestration.progress import say
from eqarena.orchestration.steps import step
from eqarena.runtime.dask_pool import dask_map
from eqarena.runtime.worker_count import bootstrap_workers
from eqarena.runtime.worker_pool import process_map
from eqarena.solvers.analyses.contributions import contributions
from eqarena.solvers.bootstrap.confidence import SCHEMES, Settling, bootstrap_ratings
from eqarena.solvers.games.equilibrium import solve_equilibrium
from eqarena.solvers.games.normal_form import KING, KOTH_PLAYER_NAMES, REBEL, koth_game
from eqarena.solvers.pairwise.style_features import battle_style_features
from eqarena.solvers.pairwise.win_rate import most_compared
from eqarena.solvers.sparse.group_game import GroupReplicates
from eqarena.solvers.sparse.imputed_share import imputed_shares
from eqarena.warehouse.catalog import dataset_response_texts
from eqarena.warehouse.category_ratings import GroupRecord
from eqarena.warehouse.ratings import EquilibriumRecord, IntervalRecord, MethodRatings, write_rate_run
from eqarena.warehouse.runs import RunRecord
from eqarena.warehouse.snapshot import publish_snapshot
from eqarena.warehouse.tensor import PayoffTensor


def rate_parameters(options: RateOptions, methods: tuple[str, ...], judges: list[str]) -> dict:
    """The `runs.parameters` of a rate run (what `refresh` compares to find a current run)."""
    parameters = {
        "dataset": options.dataset,
        "judges": list(judges),
        "methods": list(methods),
        "missing": options.missing.value,
        "bootstrap": options.bootstrap.replicates,
        "seed": options.bootstrap.seed,
        "settle": options.bootstrap.settle,
        "orders": options.orders.value,
    }
    if options.baseline is not None:  # only when given: older runs stay current for `refresh`
        parameters["baseline"] = options.baseline
    # Always present: a run of the whole dataset (null) never matches a category run, nor the reverse.
    parameters["category"] = options.category
    if options.by is not None:
        parameters["by"] = options.by.value
    return parameters


@step("method_battles")
def method_battles(
    db: str | None, tensor: PayoffTensor, battles: dict[str, np.ndarray], options: RateOptions, methods: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """`battles` with what the chosen methods need beyond them: the `winrate` baseline's index
    (`options.baseline`; default: the model in the most judgments) and, for `bt-style`, the style
    features of each judgment's two answers (solvers.pairwise.style_features, from the stored responses)."""
    out = dict(battles)
    if uses_option(methods, "baseline") and len(battles.get("score", ())):
        if options.baseline is not None:
            if options.baseline not in tensor.models:
                raise NotFoundError(
                    f"--baseline {options.baseline!r} is not a rated model (models: {', '.join(tensor.models)})"
                )
            out["baseline"] = np.asarray(tensor.models.index(options.baseline))
        else:
            out["baseline"] = np.asarray(most_compared(battles, len(tensor.models)))
    if uses_option(methods, "style_control") and len(battles.get("score", ())):
        with closing(warehouse.connect(db, read_only=True)) as con:
            texts = dataset_response_texts(con, tensor.dataset, list(tensor.models))
        out["style"] = battle_style_features(battles, tensor.prompts, tensor.models, texts)
        if np.isnan(out["style"]).any(axis=1).all():
            raise DatasetError(
                f"--style-control: dataset {tensor.dataset} has no answer texts for the judged "
                "pairs (style features come from the answers); ingest or import the responses "
                "first, or rate without --style-control"
            )
    return out


@dataclass(frozen=True, eq=False)
class Solved:
    """What one method produced, ready to store."""

    method: str
    ratings: list[MethodRatings]
    equilibrium: EquilibriumRecord | None
    seconds: float
    diagnostics: dict = field(default_factory=dict)
    multipliers: list[np.ndarray] | None = None  # a CCE's dual multipliers: bootstrap replicates start there


def _scalar_diagnostics(diagnostics: dict) -> dict:
    """Diagnostics fit for a JSON column: scalars, strings and short lists only."""
    kept = {}
    for key, value in (diagnostics or {}).items():
        if isinstance(value, (bool, int, float, str, np.generic)) or value is None:
            kept[str(key)] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, (list, tuple, np.ndarray)) and np.size(value) <= 32:
            kept[str(key)] = np.asarray(value).tolist()
    return kept


@step("rate_method", task_run_name="rate-{name}")
def rate_method(tensor: PayoffTensor, battles: dict[str, np.ndarray], name: str, bootstrap: int, seed: int) -> Solved:
    """Rate `tensor` by the registered method `name`: an equilibrium method's ratings of all three
    players (deviation gains, paper eq. 1) with the king x rebel contributions (paper Section 4.3), or a
    model-rating method's king ratings (with its own interval from `bootstrap` resamples, if it has one)."""
    method = get_method(name)
    if method.is_equilibrium:
        return _solve_equilibrium(tensor, method)
    start = time.perf_counter()
    fit = method.model_fit(tensor.u_king, battles if len(battles.get("score", ())) else None, bootstrap, seed)
    ratings = MethodRatings(name, "king", tensor.models, np.asarray(fit.ratings), ci_lo=fit.ci_lo, ci_hi=fit.ci_hi)
    return Solved(name, [ratings], None, time.perf_counter() - start, _scalar_diagnostics(fit.diagnostics))


def solved_twin(tensor: PayoffTensor, name: str, solved: list[Solved]) -> Solved | None:
    """The equilibrium of an earlier method in `solved` that the equilibrium method `name` selects too on
    this tensor, restated as `name`'s (None if there is none): both call the same solver, and their
    selection targets are the same distributions here. The affinity target is uniform when no two
    prompts, kings or rebels are near-clones (paper Section 3.3, App. B), so on such a game
    "ne-shannon" is "ne" and "cce-shannon" is "cce": solved once (at 805 x 200, 60 to 80 s each)."""
    method = get_method(name)
    if not method.is_equilibrium:
        return None
    game = None
    for earlier in solved:
        other = get_method(earlier.method)
        if earlier.equilibrium is None or other.solve != method.solve:
            continue
        game = game or koth_game(tensor.u_king)
        if _same_targets(game, other.target, method.target):
            return _restated(earlier, method)
    return None


def _same_targets(game, a: str, b: str) -> bool:
    """Whether selection targets `a` and `b` resolve to the same distributions on `game`
    (`solvers.games.entropy.affinity_is_uniform`)."""
    if a == b:
        return True
    if {a, b} != {"affinity", "uniform"}:
        return False
    from eqarena.solvers.games.entropy import affinity_is_uniform

    return affinity_is_uniform(game)


def _restated(twin: Solved, method: RatingMethod) -> Solved:
    ratings = [
        MethodRatings(method.name, r.player, r.actions, r.rating, mass=r.mass, imputed_share=r.imputed_share)
        for r in twin.ratings
    ]
    reason = (
        "the same solver and target"
        if method.target == get_method(twin.method).target
        else "no two prompts or models are clones here, so the affinity target is uniform"
    )
    diagnostics = {**twin.equilibrium.diagnostics, "same_as": twin.method, "same_because": reason}
    record = replace(
        twin.equilibrium, method=method.name, target=str(method.target), seconds=0.0, diagnostics=diagnostics
    )
    return Solved(method.name, ratings, record, 0.0, multipliers=twin.multipliers)


def _solve_equilibrium(tensor: PayoffTensor, method: RatingMethod) -> Solved:
    start = time.perf_counter()
    game = koth_game(tensor.u_king)
    eq = solve_equilibrium(method, game)
    delta = np.asarray(contributions(game, eq, KING, REBEL))
    seconds = time.perf_counter() - start
    actions = (tensor.prompts, tensor.models, tensor.models)
    shares = (None,) * 3 if tensor.imputed is None else imputed_shares(tensor.imputed, eq.marginals, eq.joint)
    ratings = [
        MethodRatings(
            method.name,
            name,
            acts,
            np.asarray(eq.ratings[k]),
            mass=np.asarray(eq.marginals[k]),
            imputed_share=shares[k],
        )
        for k, (name, acts) in enumerate(zip(KOTH_PLAYER_NAMES, actions))
    ]
    record = EquilibriumRecord(
        method=method.name,
        solution_concept=method.concept,
        target=str(method.target),
        solver=eq.method or method.concept,
        exploitability=float(eq.exploitability),
        steps=int(eq.steps) if eq.steps is not None else None,
        final_temperature=eq.final_temperature,
        seconds=float(eq.seconds) if eq.seconds else seconds,
        diagnostics=_scalar_diagnostics(eq.diagnostics),
        marginals={name: np.asarray(eq.marginals[k]) for k, name in enumerate(KOTH_PLAYER_NAMES)},
        joint=None if eq.joint is None else np.asarray(eq.joint),
        contributions=delta,
    )
    return Solved(method.name, ratings, record, seconds, multipliers=eq.multipliers)


@step("bootstrap_equilibria")
def bootstrap_equilibria(
    tensor: PayoffTensor,
    battles: dict[str, np.ndarray],
    solved: list[Solved],
    options: BootstrapOptions,
    progress: Callable[[int], None] | None = None,
    source: GroupReplicates | None = None,
) -> tuple[list[IntervalRecord], dict]:
    """Bootstrap confidence of every solved equilibrium method's model ratings (solvers.bootstrap.confidence):
    each replicate's game re-solved exactly, over prompts and over judge samples within cells, until
    the intervals settle (`options.settle`) or `options.replicates` are done. A prompt-group game
    (`source`) resamples the log's prompts and refits its groups ("prompts" only).

    Before it starts it says what the replicates will cost (`replicate_plan`, from the full-data
    solves), plans fewer where they would not fit `options.time_limit`, and stops at that limit.
    Returns the records to store and diagnostics (replicates used and why it stopped, seconds, worker
    processes, largest exploitability). `progress(n)`: n replicates done."""
    seed = options.seed
    full = {s.method: r.rating for s in solved if s.equilibrium is not None for r in s.ratings if r.player == "king"}
    if options.replicates < 2 or not full:
        return [], {}
    schemes = SCHEMES if len(battles.get("score", ())) and source is None else ("prompts",)
    address = options.dask_address
    workers = 1 if address else bootstrap_workers(options.replicates * len(full) * len(schemes))
    plan = replicate_plan(solved, options, len(schemes), workers)
    if plan.seconds >= SAY_FROM_S or plan.replicates < options.replicates:
        say(plan.line)
    replicates = plan.replicates
    start = time.perf_counter()
    deadline = start + options.time_limit if options.time_limit > 0 else None
    settling = Settling(tol=options.settle) if options.settle > 0 else None
    results = bootstrap_ratings(
        tensor.u_king,
        list(full),
        replicates=replicates,
        seed=seed,
        schemes=schemes,
        battles=battles,
        imputed=tensor.imputed,
        map_units=dask_map(address) if address else process_map(workers),
        settling=settling,
        progress=progress,
        full=full,
        starts={s.method: s.multipliers for s in solved if s.multipliers is not None},
        source=source,
        deadline=deadline,
        unit_size=1 if plan.seconds / max(replicates, 1) >= SLOW_REPLICATE_S else None,
    )
    records = [
        IntervalRecord(
            method=b.method,
            scheme=b.scheme,
            models=tensor.models,
            rating=np.asarray(full[b.method]),
            lo=b.lo,
            hi=b.hi,
            median=np.median(b.ratings, axis=0),
            confidence=b.confidence,
            rank_probabilities=b.rank_probabilities,
            top_k=b.top_k,
            replicates=len(b.ratings),
            max_exploitability=b.diagnostics["max_exploitability"],
        )
        for b in results
    ]
    diagnostics = {
        "replicates": len(results[0].ratings),
        "max_replicates": options.replicates,
        "engine": "dask" if address else "processes",
        "planned_replicates": replicates,
        "estimate_s": plan.seconds,
        "stopped": results[0].diagnostics["stopped"],
        "schemes": list(schemes),
        "workers": workers,
        "seconds": time.perf_counter() - start,
        "max_exploitability": max(b.diagnostics["max_exploitability"] for b in results),
    }
    return records, diagnostics


SAY_FROM_S = 10.0  # a bootstrap estimated to take this long says so before it starts
SLOW_REPLICATE_S = 2.0  # replicates estimated this slow are units of one (the deadline sees each)


@dataclass(frozen=True)
class ReplicatePlan:
    """How many replicates the bootstrap plans, its estimated seconds, and the line that says so."""

    replicates: int
    seconds: float
    line: str


def replicate_plan(solved: list[Solved], options: BootstrapOptions, schemes: int, workers: int) -> ReplicatePlan:
    """The bootstrap's cost estimated from the full-data solves: a replicate re-solves each equilibrium
    method that was solved (a twin restated from another costs nothing), on `workers` processes. When
    `options.replicates` would take longer than `options.time_limit`, fewer are planned (at least
    `Settling.min_replicates`, or 2), and the line says so."""
    per_replicate = sum(s.seconds for s in solved if s.equilibrium is not None) * schemes / max(workers, 1)
    on = (
        f"the Dask cluster at {options.dask_address}"
        if options.dask_address
        else f"{workers} worker{'s' * (workers != 1)}"
    )
    replicates, limit = options.replicates, options.time_limit
    seconds = per_replicate * replicates
    methods = sum(1 for s in solved if s.equilibrium is not None)
    what = f"{methods} equilibrium method{'s' * (methods != 1)} x {schemes} scheme{'s' * (schemes != 1)}"
    if limit > 0 and seconds > limit and per_replicate > 0:
        fit = max(2, min(replicates, int(limit / per_replicate)))
        replicates = max(fit, min(Settling.min_replicates, options.replicates))
        return ReplicatePlan(
            replicates,
            per_replicate * replicates,
            (
                f"bootstrap: {options.replicates} replicates of {what} would take about {_duration(seconds)} by the "
                f"full-data solves ({per_replicate:.1f} s each on {on}); planning "
                f"{replicates} within --bootstrap-time {limit:g} s (stops there with the replicates done)"
            ),
        )
    return ReplicatePlan(
        replicates,
        seconds,
        (
            f"bootstrap: up to {replicates} replicates of {what} on {on}, about "
            f"{_duration(seconds)} at most by the full-data solves (fewer once the intervals settle; "
            f"--bootstrap-time SECONDS caps it, default {BootstrapOptions.time_limit:g})"
        ),
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


@step("write_ratings")
def write_run(
    db: str | None,
    run: RunRecord,
    assembled,
    solved: list[Solved],
    intervals: list[IntervalRecord] | None = None,
    groups: list[GroupRecord] | None = None,
) -> None:
    """Write the run's rows (runs, payoffs, ratings, equilibria, contributions, coverage, bootstrap
    intervals and rank probabilities, per-category ratings) in one transaction."""
    with closing(warehouse.connect(db)) as con:
        write_rate_run(
            con,
            run,
            assembled.tensor,
            assembled.raw,
            assembled.dropped,
            [r for s in solved for r in s.ratings],
            [s.equilibrium for s in solved if s.equilibrium is not None],
            intervals or (),
            groups or (),
        )
        publish_snapshot(con)
