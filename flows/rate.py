"""Flow `rate`: judgments → payoff tensor → Bradley-Terry, NE and CCE ratings → warehouse (one run_id)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from time import perf_counter

from prefect import flow, get_run_logger

from flows.run_context import current_flow_run_id, dataset_judge_name, publish_ratings
from tasks.assemble import assemble
from tasks.rate import (
    EQUILIBRIUM_METHODS,
    bootstrap_equilibria,
    package_versions,
    parse_methods,
    rate_bradley_terry,
    solve_equilibrium,
    write_run,
)
from warehouse.runs import RunRecord


@dataclass(frozen=True)
class RateResult:
    run_id: str
    dataset: str
    judges: tuple[str, ...]
    shape: tuple[int, int, int]
    dropped: str
    exploitability: dict[str, float]
    timings: dict[str, float]


def new_run_id(kind: str) -> str:
    return f"{kind}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


@flow(name="rate", flow_run_name=dataset_judge_name("judges"))
def rate_flow(
    db: str | None = None,
    dataset: str = "vicuna80",
    judges: list[str] | None = None,
    methods: list[str] | None = None,
    missing: str = "refuse",
    bootstrap: int = 200,
    seed: int = 0,
    orders: str = "both",
) -> RateResult:
    """Rate the models and prompts of `dataset` from the judgments of `judges` (pooled; default: all
    judges present; `all-prd` = the five recorded PRD judges) by each of `methods`
    (bt, ne, cce, ne-shannon, cce-shannon) and store everything under a new run_id. `orders` "any"
    counts a cell judged in one order only (battle logs with randomised positions). `bootstrap`
    resamples (seeded by `seed`) give Bradley-Terry's intervals and every equilibrium method's intervals
    and rank probabilities, over prompts and over judge samples (solvers/bootstrap.py)."""
    chosen = parse_methods(methods)
    run_id = new_run_id("rate")
    started = datetime.now(timezone.utc)
    parameters = {"dataset": dataset, "judges": judges or [], "methods": chosen, "missing": missing,
                  "bootstrap": bootstrap, "seed": seed, "orders": orders}
    timings: dict[str, float] = {}
    t0 = perf_counter()
    assembled = assemble(db, dataset, judges, missing, orders)
    timings["assemble"] = perf_counter() - t0
    tensor = assembled.tensor
    parameters["judges"] = list(tensor.judges)
    get_run_logger().info(
        f"u_king {tensor.shape[0]} prompts x {tensor.shape[1]} models from {len(assembled.battles['score'])} "
        f"ok judgments of {', '.join(tensor.judges)}; {assembled.dropped.summary()}")
    solved = []
    for method in chosen:
        t0 = perf_counter()
        if method == "bt":
            solved.append(rate_bradley_terry(tensor, assembled.battles, bootstrap, seed))
            parameters["bt"] = solved[-1].diagnostics
        else:
            solved.append(solve_equilibrium(tensor, method))
        timings[method] = perf_counter() - t0
    t0 = perf_counter()
    intervals, parameters["bootstrap_equilibria"] = bootstrap_equilibria(tensor, assembled.battles, solved,
                                                                         bootstrap, seed)
    if intervals:
        timings["bootstrap"] = perf_counter() - t0
    # Written only once everything is computed, in one transaction: a failed run leaves no rows.
    run = RunRecord(
        flow_run_id=current_flow_run_id(), run_id=run_id, kind="rate", started_at=started,
        finished_at=datetime.now(timezone.utc),
        parameters=parameters, versions=package_versions(),
        data_fingerprint=tensor.fingerprint, timings=timings,
        message=assembled.dropped.summary())
    t0 = perf_counter()
    write_run(db, run, assembled, solved, intervals)
    timings["write"] = perf_counter() - t0
    publish_ratings(run_id, dataset, [
        {"method": r.method, "model": model, "rating": round(float(value), 6)}
        for s in solved for r in s.ratings if r.player == "king" for model, value in zip(r.actions, r.rating)])
    exploitability = {s.method: s.equilibrium.exploitability for s in solved if s.equilibrium is not None}
    for method, value in exploitability.items():
        get_run_logger().info(f"{method}: exploitability {value:.2e} ({timings[method]:.1f} s)")
    return RateResult(run_id=run_id, dataset=dataset, judges=tuple(tensor.judges), shape=tensor.shape,
                      dropped=assembled.dropped.summary(), exploitability=exploitability, timings=timings)


__all__ = ["EQUILIBRIUM_METHODS", "RateResult", "rate_flow"]
