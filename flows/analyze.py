"""Flows `analyze-clones` and `analyze-risk`: the robustness analyses of a finished rate run.

    clones: rate run's game → + n adversarial copies (exact / noisy) → every method's ranks → DuckDB
    risk:   rate run's game → pure NEs, K diverse NEs (equilibrium 0 = the run's NE) → risk → DuckDB

Each writes a run of its own (kind `clones` / `risk`, parameters.source_run_id = the rate run); the
report of the rate run shows the newest of each (warehouse/VIEWS.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from time import perf_counter

from prefect import flow, get_run_logger

from flows.rate import new_run_id
from flows.run_context import current_flow_run_id
from tasks.analysis_io import read_rate_game, read_selected_equilibrium, top_model, write_analysis_run
from tasks.clone_analysis import CloneSettings, clone_frames, run_clone_experiment
from tasks.rate import package_versions, parse_methods
from tasks.report_analyses import risk_sentence
from tasks.risk_analysis import EQUILIBRIUM_TOL, enumerate_pure_nash, rank_risk, risk_frames, search_equilibria
from warehouse.runs import RunRecord

ANALYSES = ("clones", "risk")


@dataclass(frozen=True)
class AnalysisResult:
    run_id: str
    kind: str
    source_run_id: str
    summary: list[str] = field(default_factory=list)  # the lines the CLI prints
    seconds: float = 0.0


def parse_analyses(analyses: str | list[str] | None) -> list[str]:
    """`clones,risk` / ['clones'] → known analyses in canonical order; '' or 'none' → []."""
    items = analyses.split(",") if isinstance(analyses, str) else list(analyses or [])
    items = [a.strip().lower() for a in items if a.strip() and a.strip().lower() != "none"]
    unknown = [a for a in items if a not in ANALYSES]
    if unknown:
        raise ValueError(f"--analyses: unknown analysis {', '.join(unknown)} (choose from {', '.join(ANALYSES)})")
    return [a for a in ANALYSES if a in items]


@flow(name="analyze-clones")
def clones_flow(
    db: str | None = None,
    run_id: str | None = None,
    target: str | None = None,
    lam: float = 10.0,
    seed: int = 0,
    ns_exact: list[int] = (0, 250, 500),
    ns_noisy: list[int] = (0, 250, 500, 750, 1000),
    noise: float = 0.01,
    methods: list[str] | None = None,
) -> AnalysisResult:
    """Add n copies of prompts adversarial to `target` (default: the rate run's top NE model), drawn from
    softmax(-lam * mean_rebel u_king(., target, .)), exact and with Uniform(-noise, noise) payoff noise;
    rank the models by every method (default: the rate run's) at every n (paper Section 4.2, App. F.5)."""
    started, t0 = datetime.now(timezone.utc), perf_counter()
    game = read_rate_game(db, run_id)
    summary = []
    if target is None:
        target, method = top_model(db, game.run_id)
        summary.append(f"target {target}: the top {method} model of rate run {game.run_id}")
    settings = CloneSettings(target=target, lam=float(lam), seed=int(seed), ns_exact=tuple(ns_exact),
                             ns_noisy=tuple(ns_noisy), noise=float(noise),
                             methods=tuple(parse_methods(methods or list(game.methods) or None)))
    outcomes = run_clone_experiment(game, settings)
    frames = clone_frames(game, settings, outcomes)
    solved = perf_counter() - t0
    run = RunRecord(
        flow_run_id=current_flow_run_id(),
        run_id=new_run_id("clones"), kind="clones", started_at=started, finished_at=datetime.now(timezone.utc),
        parameters={"source_run_id": game.run_id, "dataset": game.dataset, "target": target, "lambda": settings.lam,
                    "seed": settings.seed, "ns_exact": list(settings.ns_exact), "ns_noisy": list(settings.ns_noisy),
                    "noise": settings.noise, "methods": list(settings.methods)},
        versions=package_versions(), timings={"experiment": solved},
        message=f"{len(outcomes)} (variant, n, method) outcomes on {game.u_king.shape[0]} prompts")
    write_analysis_run(db, run, frames)
    summary += frames["clone_verdicts"]["verdict"].to_list()
    for line in summary:
        get_run_logger().info(line)
    return AnalysisResult(run.run_id, "clones", game.run_id, summary, perf_counter() - t0)


@flow(name="analyze-risk")
def risk_flow(
    db: str | None = None,
    run_id: str | None = None,
    num: int = 128,
    seed: int = 0,
    eta: float = 1e-2,
    steps: int = 10_000,
) -> AnalysisResult:
    """Enumerate the pure NEs of the rate run's game, search `num` distinct NEs (equilibrium 0 = the run's
    selected NE) and rank them by risk: expected payoffs when co-players draw their equilibria from
    uniform priors, and from priors updated `steps` times with step size `eta` (paper App. F.4)."""
    started, t0 = datetime.now(timezone.utc), perf_counter()
    game = read_rate_game(db, run_id)
    selected = read_selected_equilibrium(db, game, "ne")
    pure = enumerate_pure_nash(game)
    found = search_equilibria(game, selected, num, seed)
    findings = rank_risk(game, found, eta, steps)
    frames = risk_frames(game, pure, findings)
    run = RunRecord(
        flow_run_id=current_flow_run_id(),
        run_id=new_run_id("risk"), kind="risk", started_at=started, finished_at=datetime.now(timezone.utc),
        parameters={"source_run_id": game.run_id, "dataset": game.dataset, "num": num, "seed": seed, "eta": eta,
                    "steps": steps, "equilibrium_tol": EQUILIBRIUM_TOL},
        versions=package_versions(), timings={"search": findings.search_seconds, "total": perf_counter() - t0},
        message=f"{len(findings.exploitability)} distinct NEs of {num} searched; {len(pure)} pure NEs")
    write_analysis_run(db, run, frames)
    summary = [f"{len(pure)} pure-strategy Nash equilibria; {len(findings.exploitability)} distinct Nash "
               f"equilibria with exploitability <= {EQUILIBRIUM_TOL:g} among {num} searched",
               risk_sentence(frames["risk_dominance"])]
    for line in summary:
        get_run_logger().info(line)
    return AnalysisResult(run.run_id, "risk", game.run_id, summary, perf_counter() - t0)
