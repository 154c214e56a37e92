"""Pipeline `rate`: judgments -> payoff tensor -> every chosen rating method -> warehouse (one run_id).

assemble (missing-cell policy) -> rate_method per method -> bootstrap the equilibria -> write (one transaction)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from eqarena.options import RateOptions
from eqarena.orchestration.progress import stage
from eqarena.orchestration.runtime import publish_ratings
from eqarena.orchestration.steps import run_logger
from eqarena.runtime.worker_count import chosen_methods, planned_bootstrap_workers
from eqarena.runtime.worker_pool import prewarm_workers, release_prewarmed
from eqarena.tasks.assemble import assemble
from eqarena.tasks.rate import (
    Solved,
    bootstrap_equilibria,
    method_battles,
    rate_method,
    rate_parameters,
    solved_twin,
    write_run,
)
from eqarena.tasks.rate_groups import rate_groups
from eqarena.tasks.runs import RunLog
from eqarena.warehouse.tensor import PayoffTensor


@dataclass(frozen=True)
class RateResult:
    run_id: str
    dataset: str
    judges: tuple[str, ...]
    shape: tuple[int, int, int]
    dropped: str
    exploitability: dict[str, float]
    timings: dict[str, float]
    notes: tuple[str, ...] = ()  # what the defaults did (e.g. how many bootstrap replicates, and why)


@dataclass(frozen=True, eq=False)
class SolvedRun:
    """A rate run's full-data solves, before its bootstrap and before anything is written."""

    run_id: str
    tensor: PayoffTensor
    methods: tuple[str, ...]
    solved: list[Solved]


def rate(
    options: RateOptions, db: str | None = None, on_solved: Callable[[SolvedRun], None] | None = None
) -> RateResult:
    """Rate the models and prompts of `options.dataset` from the pooled judgments of `options.judges`
    by each of `options.methods` (the method registry's names) and store everything under a new run_id.
    The bootstrap (`options.bootstrap`) gives every equilibrium method's intervals and rank
    probabilities, over prompts and over judge samples (eqarena/solvers/bootstrap/confidence.py).
    on_solved: called with what the full data solved, before the bootstrap (the main job starts its
    analyses there, on a background thread, and writes them once the run is written)."""
    methods = chosen_methods(options)
    prewarm_workers(planned_bootstrap_workers(options))  # they start while the tensor is assembled and solved
    try:
        return _rate(options, db, on_solved, methods)
    finally:
        release_prewarmed()  # if the bootstrap did not take them


def _rate(options: RateOptions, db: str | None, on_solved, methods: tuple[str, ...]) -> RateResult:
    log = RunLog(db, "rate", {}, start=False)  # the row is written with the results, in one transaction
    with log.timed("assemble"), stage("assembling the payoff tensor"):
        assembled = assemble(db, options)
    tensor = assembled.tensor
    parameters = rate_parameters(options, methods, tensor.judges)
    if assembled.grouping is not None:
        parameters["prompt_groups"] = assembled.grouping
    run_logger().info(
        f"u_king {tensor.shape[0]} prompts x {tensor.shape[1]} models from {len(assembled.battles['score'])} "
        f"ok judgments of {', '.join(tensor.judges)}; {assembled.dropped.summary()}"
    )
    solved = []
    boot = options.bootstrap
    battles = method_battles(db, tensor, assembled.battles, options, methods)
    for method in methods:
        with log.timed(method), stage(f"solving {method} ({tensor.shape[0]} x {tensor.shape[1]})"):
            twin = solved_twin(tensor, method, solved)  # e.g. ne-shannon where the affinity target is uniform
            solved.append(twin or rate_method(tensor, battles, method, boot.replicates, boot.seed))
        if solved[-1].diagnostics:
            parameters[method] = solved[-1].diagnostics
    if on_solved is not None:
        on_solved(SolvedRun(log.run_id, tensor, methods, list(solved)))
    with log.timed("bootstrap"), stage("bootstrap replicates", total=boot.replicates) as done:
        intervals, parameters["bootstrap_equilibria"] = bootstrap_equilibria(
            tensor, assembled.battles, solved, boot, progress=done, source=assembled.replicates
        )
    notes = _group_game_notes(assembled) + _twin_notes(solved) + _bootstrap_notes(parameters["bootstrap_equilibria"])
    groups = []
    if options.by is not None:
        with log.timed(f"by-{options.by.value}"), stage(f"rating each {options.by.value}") as done:
            groups = rate_groups(db, options, methods, progress=done)
        notes += _group_notes(groups)
    run = log.record(parameters=parameters, data_fingerprint=tensor.fingerprint, message=assembled.dropped.summary())
    with log.timed("write"), stage("writing the run"):
        write_run(db, run, assembled, solved, intervals, groups)
    run_id, timings = run.run_id, log.timings
    publish_ratings(
        run_id,
        options.dataset,
        [
            {"method": r.method, "model": model, "rating": round(float(value), 6)}
            for s in solved
            for r in s.ratings
            if r.player == "king"
            for model, value in zip(r.actions, r.rating)
        ],
    )
    exploitability = {s.method: s.equilibrium.exploitability for s in solved if s.equilibrium is not None}
    for method, value in exploitability.items():
        run_logger().info(f"{method}: exploitability {value:.2e} ({timings[method]:.1f} s)")
    return RateResult(
        run_id=run_id,
        dataset=options.dataset,
        judges=tuple(tensor.judges),
        shape=tensor.shape,
        dropped=assembled.dropped.summary(),
        exploitability=exploitability,
        timings=timings,
        notes=notes,
    )


def _group_game_notes(assembled) -> tuple[str, ...]:
    """One line on a prompt-group game: its grouping and groups, and what rests on the smoothing."""
    if assembled.grouping is None:
        return ()
    tensor = assembled.tensor
    smoothed = tensor.imputed.sum(axis=(1, 2)) / max(tensor.shape[1] * (tensor.shape[1] - 1), 1)
    log = assembled.replicates.battles
    battles = np.bincount(log.member_group, minlength=log.num_groups)
    shown = "; ".join(
        f"{g}: {n:,} battles, {s:.0%} of pairs smoothed only"
        for g, n, s in list(zip(tensor.prompts, battles, smoothed))[:8]
    )
    more = f"; ... (+{len(smoothed) - 8} more)" if len(smoothed) > 8 else ""
    return (
        f"prompt groups by {assembled.grouping}: {len(tensor.prompts)} group(s) as the prompt player's actions, "
        f"payoffs from every battle of a group by a Bradley-Terry fit shrunk towards the global one "
        f"(shrinkage {assembled.replicates.full.shrinkage:g}); {shown}{more}",
    )


def _group_notes(groups) -> tuple[str, ...]:
    """One line on the per-group ratings of `--by`: how many groups were rated, and each skipped one."""
    if not groups:
        return ()
    grouping = groups[0].grouping
    rated = sum(not g.skipped for g in groups)
    lines = [f"by {grouping}: {rated} of {len(groups)} rated separately (point ratings, no bootstrap)"]
    lines += [f"  skipped {grouping} {g.category!r}: {g.reason}" for g in groups if g.skipped]
    return tuple(lines)


def _twin_notes(solved) -> tuple[str, ...]:
    """One line per method that restates an earlier one's equilibrium (`tasks.rate.solved_twin`)."""
    lines = []
    for s in solved:
        d = s.equilibrium.diagnostics if s.equilibrium is not None else {}
        if "same_as" in d:
            lines.append(f"{s.method}: the same equilibrium as {d['same_as']} ({d['same_because']}; solved once)")
    return tuple(lines)


def _bootstrap_notes(diagnostics: dict) -> tuple[str, ...]:
    """One line on the equilibria's bootstrap: replicates used of the most allowed, and why it stopped."""
    if not diagnostics:
        return ()
    return (
        f"bootstrap: {diagnostics['replicates']} of at most {diagnostics['max_replicates']} replicates per "
        f"method and scheme ({diagnostics['stopped']}; {diagnostics['seconds']:.1f} s)",
    )
