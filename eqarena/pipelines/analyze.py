"""Pipelines `analyze-clones` and `analyze-risk`: the robustness analyses of a finished rate run.

    clones: rate run's game → + n adversarial copies (exact / noisy) → every method's ranks → DuckDB
    risk:   rate run's game → pure NEs, K diverse NEs (equilibrium 0 = the run's NE) → risk → DuckDB

Each writes a run of its own (kind `clones` / `risk`, parameters.source_run_id = the rate run); the
report of the rate run shows the newest of each (eqarena/warehouse/VIEWS.md). `clones_of` and `risk_of`
compute an analysis from a game in memory and `write_computed` writes it: the main job computes its
analyses while the rate run's bootstrap is still going (eqarena/pipelines/run.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from time import perf_counter

import numpy as np
import polars as pl

from eqarena.methods import SELECTED_NE, parse_methods, tensor_methods
from eqarena.options import CloneOptions, RiskOptions
from eqarena.orchestration.steps import run_logger
from eqarena.report.analysis_headlines import clone_headline, risk_headline, risk_sentence
from eqarena.report.verdict import headline_method
from eqarena.tasks.analysis_io import read_rate_game, read_selected_equilibrium, top_model, write_analysis_run
from eqarena.tasks.clone_analysis import clone_frames, run_clone_experiment
from eqarena.tasks.risk_analysis import EQUILIBRIUM_TOL, enumerate_pure_nash, rank_risk, risk_frames, search_equilibria
from eqarena.tasks.runs import RunLog
from eqarena.warehouse.analyses import RunGame


@dataclass(frozen=True)
class AnalysisResult:
    run_id: str
    kind: str
    source_run_id: str
    summary: list[str] = field(default_factory=list)  # the lines `eqarena analyze` prints
    seconds: float = 0.0
    headline: str = ""  # one plain sentence: does this analysis put the ranking in doubt?


@dataclass(frozen=True, eq=False)
class ComputedAnalysis:
    """An analysis computed but not yet written: its run (id and start), tables, and what it says."""

    log: RunLog
    game: RunGame
    frames: dict[str, pl.DataFrame]
    parameters: dict
    message: str
    summary: list[str]
    headline: str
    started: float  # perf_counter at its start


def analyze_clones(
    options: CloneOptions = CloneOptions(), run_id: str | None = None, db: str | None = None
) -> AnalysisResult:
    """Add copies of prompts adversarial to `options.target` (default: rate run `run_id`'s top NE
    model; run default: the latest), exact and noisy, and rank the models by every method (default:
    the rate run's) at every count (paper Section 4.2, App. F.5)."""
    t0 = perf_counter()
    game = read_rate_game(db, run_id)
    top = top_model(db, game.run_id) if options.target is None else None
    return write_computed(db, clones_of(game, options, top, db, t0))


def clones_of(
    game: RunGame,
    options: CloneOptions,
    top: tuple[str, str] | None,
    db: str | None = None,
    started: float | None = None,
) -> ComputedAnalysis:
    """`analyze_clones` on `game` without reading or writing the warehouse; `top`: (model, method) of the
    rate run's best model, the target when `options.target` is None."""
    log, t0 = RunLog(db, "clones", {}, start=False), perf_counter() if started is None else started
    summary = []
    if options.target is None:
        target, method = top
        summary.append(f"target {target}: the top {method} model of rate run {game.run_id}")
        options = replace(options, target=target)
    options = replace(options, methods=parse_methods(options.methods or tensor_methods(game.methods or ()) or None))
    outcomes = run_clone_experiment(game, options)
    frames = clone_frames(game, options, outcomes)
    log.timings["experiment"] = perf_counter() - t0
    parameters = {
        "source_run_id": game.run_id,
        "dataset": game.dataset,
        "target": options.target,
        "lambda": options.lam,
        "seed": options.seed,
        "ns_exact": list(options.ns_exact),
        "ns_noisy": list(options.ns_noisy),
        "noise": options.noise,
        "methods": list(options.methods),
    }
    summary += frames["clone_verdicts"]["verdict"].to_list()
    headline = clone_headline(frames["clone_robustness"], headline_method(list(options.methods)), options.target)
    return ComputedAnalysis(
        log,
        game,
        frames,
        parameters,
        f"{len(outcomes)} (variant, n, method) outcomes on {game.u_king.shape[0]} prompts",
        summary,
        headline,
        t0,
    )


def analyze_risk(
    options: RiskOptions = RiskOptions(), run_id: str | None = None, db: str | None = None
) -> AnalysisResult:
    """Enumerate the pure NEs of rate run `run_id`'s game (default: the latest), search
    `options.equilibria` distinct NEs (equilibrium 0 = the run's selected NE) and rank them by risk:
    expected payoffs when co-players draw their equilibria from uniform priors, and from priors updated
    `options.steps` times with step size `options.eta` (paper App. F.4)."""
    t0 = perf_counter()
    game = read_rate_game(db, run_id)
    return write_computed(db, risk_of(game, read_selected_equilibrium(db, game, SELECTED_NE), options, db, t0))


def risk_of(
    game: RunGame, selected: list[np.ndarray], options: RiskOptions, db: str | None = None, started: float | None = None
) -> ComputedAnalysis:
    """`analyze_risk` on `game` and its selected NE's marginals, without reading or writing the warehouse."""
    log, t0 = RunLog(db, "risk", {}, start=False), perf_counter() if started is None else started
    pure = enumerate_pure_nash(game)
    found = search_equilibria(game, selected, options.equilibria, options.seed)
    findings = rank_risk(game, found, options.eta, options.steps)
    frames = risk_frames(game, pure, findings)
    log.timings.update(search=findings.search_seconds, total=perf_counter() - t0)
    parameters = {
        "source_run_id": game.run_id,
        "dataset": game.dataset,
        "num": options.equilibria,
        "seed": options.seed,
        "eta": options.eta,
        "steps": options.steps,
        "equilibrium_tol": EQUILIBRIUM_TOL,
    }
    summary = [
        f"{len(pure)} pure-strategy Nash equilibria; {len(findings.exploitability)} distinct Nash "
        f"equilibria with exploitability <= {EQUILIBRIUM_TOL:g} among {options.equilibria} searched",
        risk_sentence(frames["risk_dominance"]),
    ]
    ratings = frames["risk_equilibrium_ratings"]
    headline = risk_headline(
        frames["risk_dominance"],
        ratings.filter(ratings["player"] == "king"),
        frames["pure_nash_equilibria"]["king"].to_list(),
    )
    return ComputedAnalysis(
        log,
        game,
        frames,
        parameters,
        f"{len(findings.exploitability)} distinct NEs of {options.equilibria} searched; {len(pure)} pure NEs",
        summary,
        headline,
        t0,
    )


def write_computed(db: str | None, computed: ComputedAnalysis) -> AnalysisResult:
    """Write a computed analysis as its own run (one transaction) and log what it says."""
    run = computed.log.record(parameters=computed.parameters, message=computed.message)
    write_analysis_run(db, run, computed.frames)
    for line in [computed.headline, *computed.summary]:
        run_logger().info(line)
    return AnalysisResult(
        run.run_id,
        run.kind,
        computed.game.run_id,
        computed.summary,
        perf_counter() - computed.started,
        computed.headline,
    )
