"""Benchmark: the two robustness analyses on a synthetic king-of-the-hill game, step by step.

    uv run python bench/analyses.py [--prompts 500] [--models 17] [--equilibria 128] [--seed 0]

The game is `synthetic_king_tensor(P, M, seed)`. Each analysis runs the same steps as its flow
(the analyze flows of eqarena/flows.py), without Prefect: clones over the default grid (0, 250, 500 exact and 0 .. 1000
noisy copies, every method), then risk (pure NEs, K diverse NEs around the LLE, uniform and iterated
priors), each written to a temporary DuckDB warehouse. The reference row is one NE + one CCE solve of
the original game, measured in the same run: the "x reference" column compares with it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--models", type=int, default=17)
    parser.add_argument("--equilibria", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from eqarena import warehouse
    from eqarena.methods import method_names
    from eqarena.options import CloneOptions
    from eqarena.solvers import cce, koth_game, nash, synthetic_king_tensor
    from eqarena.tasks.clone_analysis import clone_frames, run_clone_experiment
    from eqarena.tasks.risk_analysis import enumerate_pure_nash, rank_risk, risk_frames, search_equilibria
    from eqarena.warehouse.analyses import RunGame, write_analysis
    from eqarena.warehouse.runs import RunRecord

    u = synthetic_king_tensor(args.prompts, args.models, seed=args.seed)
    game = RunGame(
        "rate-synthetic",
        "synthetic",
        tuple(f"p{k}" for k in range(args.prompts)),
        tuple(f"m{k}" for k in range(args.models)),
        u,
        method_names(default_only=True),
    )
    rows: list[tuple[str, float, str]] = []

    def timed(name: str, fn, note=lambda result: ""):
        start = time.perf_counter()
        result = fn()
        seconds = time.perf_counter() - start
        rows.append((name, seconds, note(result)))
        return result

    lle = timed(
        "reference: NE + CCE (affinity) of the game",
        lambda: (nash(koth_game(u)), cce(koth_game(u))),
        lambda r: f"exploitability {r[0].exploitability:.1e} / {r[1].exploitability:.1e}",
    )[0]
    reference = rows[-1][1]
    target = game.models[int(np.argmax(lle.ratings[1] + 1e-9 * lle.marginals[1]))]
    settings = CloneOptions(target=target, methods=game.methods)

    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "bench.duckdb")
        warehouse.connect(db).close()

        def write(kind: str, frames):
            con = warehouse.connect(db)
            try:
                now = datetime.now(timezone.utc)
                write_analysis(
                    con,
                    RunRecord(
                        run_id=f"{kind}-bench",
                        kind=kind,
                        started_at=now,
                        finished_at=now,
                        parameters={"source_run_id": game.run_id},
                    ),
                    frames,
                )
            finally:
                con.close()
            return frames

        t0 = time.perf_counter()
        outcomes = timed(
            "clones: 7 games x 5 methods (default grid)",
            lambda: run_clone_experiment.fn(game, settings),
            lambda o: f"target {target}",
        )
        frames = timed(
            "clones: frames + DuckDB write",
            lambda: write("clones", clone_frames(game, settings, outcomes)),
            lambda f: f"{f['clone_robustness'].height} rows",
        )
        clones_total = time.perf_counter() - t0
        for verdict in frames["clone_verdicts"]["verdict"]:
            print(verdict)

        t0 = time.perf_counter()
        pure = timed("risk: pure NE enumeration", lambda: enumerate_pure_nash.fn(game), lambda p: f"{len(p)} pure NEs")
        found = timed(
            f"risk: {args.equilibria} diverse NEs (JIT included)",
            lambda: search_equilibria.fn(game, [np.asarray(x) for x in lle.marginals], args.equilibria, args.seed),
            lambda f: f"{int(f.distinct.sum())} distinct with exploitability <= 1e-2",
        )
        findings = timed(
            "risk: uniform + iterated priors (T = 10,000)",
            lambda: rank_risk.fn(game, found, 1e-2, 10_000),
            lambda f: f"LLE rank {f.risk.rank_uniform} (uniform), {f.risk.rank_updated} (iterated) "
            f"of {len(f.exploitability)}",
        )
        timed(
            "risk: frames + DuckDB write",
            lambda: write("risk", risk_frames(game, pure, findings)),
            lambda f: f"{f['risk_equilibrium_ratings'].height} rating rows",
        )
        risk_total = time.perf_counter() - t0

    rows += [("clones: total", clones_total, ""), ("risk: total", risk_total, "")]
    width = max(len(name) for name, _, _ in rows)
    print(f"\neqarena analyses benchmark: synthetic_king_tensor({args.prompts}, {args.models}, seed={args.seed})")
    print(f"{'step'.ljust(width)}  {'seconds':>8}  {'x reference':>11}  notes")
    print(f"{'-' * width}  {'-' * 8}  {'-' * 11}  {'-' * 40}")
    for name, seconds, note in rows:
        print(f"{name.ljust(width)}  {seconds:8.2f}  {seconds / reference:11.1f}  {note}")


if __name__ == "__main__":
    main()
