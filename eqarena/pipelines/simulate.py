"""Pipeline `simulate improvement-path`: Algorithm 1 (paper Section 2) under each method and setting
→ DuckDB (simulation_runs, simulation_steps, a `runs` row of kind `simulate`) → an HTML page.

    trials (worker processes) → steps frame → final entropies, elo − ne differences → DuckDB → page
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from eqarena.exceptions import OptionError
from eqarena.options import PathSizes
from eqarena.report.simulation_page import write_page
from eqarena.solvers.analyses.improvement_summary import EntropyDifference, FinalEntropy
from eqarena.tasks.runs import RunLog
from eqarena.tasks.simulation import run_trials, steps_frame, store_simulation, summarise

KIND = "improvement-path"


@dataclass(frozen=True)
class SimulationResult:
    run_id: str
    page: Path
    finals: list[FinalEntropy]
    differences: list[EntropyDifference]
    seconds: float


def simulate_improvement_path(
    methods: list[str],
    settings: list[str],
    sizes: PathSizes,
    trials: int,
    seed: int,
    db: str | None,
    out: Path,
    workers: int = 1,
    on_done: Callable | None = None,
) -> SimulationResult:
    """Run every (method, setting, trial), store the steps in one transaction and write the page
    `out/improvement-path-<run id>.html`."""
    if trials < 1:
        raise OptionError("--trials must be at least 1")
    parameters = {**asdict(sizes), "methods": list(methods), "settings": list(settings), "trials": trials, "seed": seed}
    with RunLog(db, "simulate", parameters) as log:
        with log.timed("trials"):
            results = run_trials(methods, settings, sizes, trials, seed, workers, on_done)
        frame = steps_frame(results)
        finals, differences = summarise(frame, list(methods), list(settings), seed)
        with log.timed("page"):
            page = write_page(
                Path(out) / f"improvement-path-{log.run_id}.html",
                log.run_id,
                parameters,
                frame,
                finals,
                differences,
                list(methods),
                list(settings),
            )
        run = log.record(message=f"{len(results)} trials of {sizes.iterations} iterations; page {page}")
        store_simulation(db, run, KIND, frame)
    return SimulationResult(run.run_id, page, finals, differences, sum(run.timings.values()))
