"""A small rated warehouse for the report's tests, written by the steps' own functions (no flow run, no
Prefect API): 10 prompts x 4 models judged from a synthetic game, rated by bt, ne and cce with a small
bootstrap, with a clone analysis."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from eqarena import warehouse
from eqarena.options import BootstrapOptions, CloneOptions, RateOptions
from eqarena.solvers import synthetic_king_tensor
from eqarena.tasks.analysis_io import read_rate_game, write_analysis_run
from eqarena.tasks.assemble import assemble
from eqarena.tasks.clone_analysis import clone_frames, run_clone_experiment
from eqarena.tasks.rate import bootstrap_equilibria, rate_method, rate_parameters, write_run
from eqarena.tasks.runs import new_run_id
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments
from eqarena.warehouse.runs import RunRecord

MODELS = ("m-a", "m-b", "m-c", "m-d")
METHODS = ("bt", "ne", "cce")


def rated_warehouse(folder: Path) -> tuple[str, str]:
    """A 10-prompt x 4-model warehouse judged from a synthetic game, rated by bt, ne and cce with a small
    bootstrap, with a clone analysis; written by the tasks' functions, no flow run. Returns (db, run id)."""
    db = str(folder / "w.duckdb")
    u = synthetic_king_tensor(10, len(MODELS), seed=2)
    con = warehouse.connect(db)
    con.execute("INSERT INTO models (model_id, family) SELECT unnest($1::VARCHAR[]), 'm'", [list(MODELS)])
    rows = []
    for p in range(10):
        con.execute("INSERT INTO prompts (dataset, prompt_id, text) VALUES ('syn', ?, ?)", [str(p), f"prompt {p}"])
        for i, a in enumerate(MODELS):
            for j, b in enumerate(MODELS):
                if i != j:
                    rows.append(JudgmentRow("judge-s", "t", "syn", str(p), a, b, 0, "ok", score=float(u[p, i, j])))
    insert_judgments(con, rows)
    con.close()

    options = RateOptions(dataset="syn", judges=("judge-s",), methods=METHODS, bootstrap=BootstrapOptions(4))
    assembled = assemble.fn(db, options)
    solved = [rate_method.fn(assembled.tensor, assembled.battles, m, 4, 0) for m in METHODS]
    intervals, _ = bootstrap_equilibria.fn(assembled.tensor, assembled.battles, solved, options.bootstrap)
    run = RunRecord(
        run_id=new_run_id("rate"),
        kind="rate",
        started_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
        finished_at=datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc),
        parameters=rate_parameters(options, METHODS, assembled.tensor.judges),
        data_fingerprint=assembled.tensor.fingerprint,
        message="complete",
    )
    write_run.fn(db, run, assembled, solved, intervals)

    game = read_rate_game.fn(db, run.run_id)
    clones = CloneOptions(target="m-a", ns_exact=(0, 20), ns_noisy=(0,), methods=METHODS)
    frames = clone_frames(game, clones, run_clone_experiment.fn(game, clones))
    write_analysis_run.fn(
        db,
        RunRecord(
            run_id=new_run_id("clones"),
            kind="clones",
            started_at=run.started_at,
            finished_at=run.finished_at,
            parameters={"source_run_id": run.run_id},
        ),
        frames,
    )
    return db, run.run_id
