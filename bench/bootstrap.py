"""Benchmark: bootstrap confidence of the equilibrium ratings (eqarena/solvers/bootstrap/confidence.py), as
`eqarena rate` runs it.

    uv run python bench/bootstrap.py [--prompts 500] [--models 17] [--replicates 200] [--workers 2]
                                     [--schemes prompts] [--seed 0]

The game is `synthetic_king_tensor(P, M, seed)`. Every replicate is solved exactly (LLE / max relative
entropy CCE from the affinity target, on the replicate's distinct prompts), `--workers` processes in
parallel. For the "judgments" scheme the bench draws 4 + 4 position-balanced +-1 verdicts per cell with
P(+1) = (1 + u) / 2 and rebuilds u_king from them. The reference row is one NE + one CCE solve of the
full game, measured in the same run: "x reference" compares with it. "worker s" is the time spent
solving (summed over processes); "wall s" includes starting the worker processes.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--models", type=int, default=17)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--schemes", default="prompts", help="comma-separated: prompts, judgments")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from eqarena.runtime.worker_pool import process_map
    from eqarena.solvers import cce, koth_game, nash, synthetic_king_tensor
    from eqarena.solvers.bootstrap.confidence import bootstrap_ratings
    from eqarena.solvers.toys.games import simulated_battles

    u = synthetic_king_tensor(args.prompts, args.models, seed=args.seed)
    schemes = tuple(s.strip() for s in args.schemes.split(",") if s.strip())
    battles = None
    if "judgments" in schemes:
        u, battles = simulated_battles(u, 4, np.random.default_rng(args.seed))
    game = koth_game(u)
    nash(game), cce(game)  # warm-up: imports, first-call costs
    t0 = time.perf_counter()
    ne, ce = nash(game), cce(game)
    reference = time.perf_counter() - t0

    t0 = time.perf_counter()
    results = bootstrap_ratings(
        u,
        ["ne", "cce"],
        replicates=args.replicates,
        seed=args.seed,
        schemes=schemes,
        battles=battles,
        map_units=process_map(args.workers),
    )
    wall = time.perf_counter() - t0

    print(
        f"bootstrap of u_king {args.prompts} x {args.models} x {args.models}, {args.replicates} replicates "
        f"per method and scheme, {args.workers} worker process(es), {os.cpu_count()} CPUs"
    )
    print()
    header = f"{'step':<44} {'worker s':>9} {'wall s':>8} {'x reference':>12} {'max expl.':>10} {'> 1e-6':>7}"
    print(header)
    print("-" * len(header))
    print(
        f"{'reference: 1 NE + 1 CCE solve (full game)':<44} {reference:>9.3f} {reference:>8.3f} {1.0:>12.1f} "
        f"{max(ne.exploitability, ce.exploitability):>10.1e} {'':>7}"
    )
    for r in results:
        label = f"{r.method.upper()} x {len(r.ratings)} replicates ({r.scheme})"
        print(
            f"{label:<44} {r.seconds:>9.2f} {'':>8} {'':>12} {r.diagnostics['max_exploitability']:>10.1e} "
            f"{r.diagnostics['above_1e-6']:>7}"
        )
    total = sum(r.seconds for r in results)
    print(f"{'total (all of the above, in parallel)':<44} {total:>9.2f} {wall:>8.2f} {wall / reference:>12.1f}")
    print()
    goal = 30.0 * len(schemes)
    print(f"goal: wall <= {goal:.0f} s -> {'met' if wall <= goal else 'NOT met'} ({wall:.1f} s)")


if __name__ == "__main__":
    main()
