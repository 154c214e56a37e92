"""Benchmark: how often the bootstrap's 95% rating intervals (eqarena/solvers/bootstrap/confidence.py) hold
the true rating.

    uv run python bench/coverage.py [--seeds 48] [--methods ne,cce] [--truths grid,smooth] [--replicates 100]
                                    [--verdicts 8] [--compare]

Judge noise alone ("judgments" scheme): for each seed s the expected payoffs are
synthetic_king_tensor(30, 4, seed=200 + s, judgments=16) ("grid": means of 16 verdicts, so many cells are
exactly +-1 and ties are exact) or the same skills' Bradley-Terry expectations (judgments=None,
"smooth"), and the truth is the method's king ratings of that expected game; a simulated judge
(solvers.toys.games.simulated_battles) gives `--verdicts` (8) +-1 verdicts per ordered cell, and the interval is that of
`--replicates` judgment replicates (their central 95% range widened to hold the full-data rating,
solvers.bootstrap.intervals). Per truth and method: the share of (seed,
model) cases whose interval holds the truth, with a binomial 95% interval for that share
(scipy.stats.binomtest), the mean width, and the misses split by kind: the estimate's equilibrium has the
model in the king's support (rating 0) and the truth has not, or the other way round ("support"), or the
support agrees and the interval is too narrow or off-centre ("spread"). tests/test_bootstrap.py runs the
first 24 grid seeds for NE and CCE and asserts >= 90%. --compare adds, from the same replicates, the
plain percentile interval and the shifted percentile interval (the replicates' median moved onto the
full-data rating, clipped to [-2, 0]), with how many of each left out the full-data rating.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from scipy.stats import binomtest

from eqarena.runtime.worker_pool import process_map  # noqa: E402
from eqarena.solvers import synthetic_king_tensor
from eqarena.solvers.bootstrap.confidence import bootstrap_ratings, solve_king_ratings  # noqa: E402
from eqarena.solvers.toys.games import simulated_battles  # noqa: E402

SUPPORT = 1e-6  # |rating| below this: the model is in the king's support


TRUTHS = {"grid": 16, "smooth": None}  # synthetic_king_tensor's `judgments`: a 1/8 grid, or expected payoffs


def alternatives(ratings: np.ndarray, rating: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Other 95% intervals from replicate ratings (B, M) and the full-data rating (M,)."""
    q_lo, median, q_hi = np.percentile(ratings, [2.5, 50.0, 97.5], axis=0)
    return {
        "percentile": (q_lo, q_hi),
        "shifted": (np.clip(rating - (median - q_lo), -2.0, 0.0), np.clip(rating + (q_hi - median), -2.0, 0.0)),
    }


def cover(
    truth_kind: str, methods: list[str], seeds: int, replicates: int, workers: int, started: float, verdicts: int = 8
) -> dict:
    """Per method: hits (one per seed and model), mean widths per seed, misses by kind; per alternative
    construction (`alternatives`): hits, widths and how often the full-data rating fell outside."""
    out = {m: {"hits": [], "widths": [], "support": 0, "spread": 0, "other": {}} for m in methods}
    for seed in range(seeds):
        u = synthetic_king_tensor(30, 4, seed=200 + seed, judgments=TRUTHS[truth_kind])
        judged, battles = simulated_battles(u, verdicts, np.random.default_rng(seed))
        results = bootstrap_ratings(
            judged,
            methods,
            replicates=replicates,
            seed=seed,
            schemes=("judgments",),
            battles=battles,
            map_units=process_map(workers),
        )
        for r in results:
            truth = solve_king_ratings(r.method, u)[0]
            estimate = r.rating  # the full-data ratings, solved by bootstrap_ratings
            hit = (r.lo - 1e-6 <= truth) & (truth <= r.hi + 1e-6)
            switched = (np.abs(truth) < SUPPORT) != (np.abs(estimate) < SUPPORT)
            o = out[r.method]
            o["hits"].extend(hit)
            o["widths"].append(np.mean(r.hi - r.lo))
            o["support"] += int(np.sum(~hit & switched))
            o["spread"] += int(np.sum(~hit & ~switched))
            for name, (lo, hi) in alternatives(r.ratings, r.rating).items():
                a = o["other"].setdefault(name, {"hits": [], "widths": [], "outside": 0})
                a["hits"].extend((lo - 1e-6 <= truth) & (truth <= hi + 1e-6))
                a["widths"].append(np.mean(hi - lo))
                a["outside"] += int(np.sum((r.rating < lo - 1e-9) | (r.rating > hi + 1e-9)))
        print(
            f"{truth_kind}: seed {seed + 1}/{seeds} done ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    return out


def _coverage_columns(outcome) -> str:
    """Coverage, its 95% Clopper-Pearson interval and the mean width of one row's intervals."""
    k, n = int(np.sum(outcome["hits"])), len(outcome["hits"])
    ci = binomtest(k, n).proportion_ci(0.95)
    return f"{k / n:>9.1%} {f'{ci.low:.1%} - {ci.high:.1%}':>19} {np.mean(outcome['widths']):>11.3f}"


def _print_table(header: str, rows: list[str]) -> None:
    print(header)
    print("-" * len(header))
    for row in rows:
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=48)
    parser.add_argument("--methods", default="ne,cce", help="comma-separated: ne, cce, ne-shannon, cce-shannon")
    parser.add_argument("--truths", default="grid,smooth", help="comma-separated: grid, smooth")
    parser.add_argument("--replicates", type=int, default=100)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--verdicts", type=int, default=8, help="judge verdicts per ordered cell")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also the plain and the shifted percentile intervals of the same replicates",
    )
    args = parser.parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    truths = [t.strip() for t in args.truths.split(",") if t.strip()]
    unknown = sorted(set(truths) - set(TRUTHS))
    if unknown:
        parser.error(f"--truths: unknown {', '.join(unknown)}; choose among {', '.join(TRUTHS)}")

    started = time.perf_counter()
    results = {t: cover(t, methods, args.seeds, args.replicates, args.workers, started, args.verdicts) for t in truths}
    print(
        f"judge noise alone: {args.seeds} games of 30 prompts x 4 models, {args.verdicts} verdicts per ordered cell, "
        f"{args.replicates} judgment replicates, 95% intervals (percentile, widened to the full-data rating)"
    )
    print()
    _print_table(
        f"{'truth':<7} {'method':<12} {'cases':>6} {'coverage':>9} {'95% CI of coverage':>19} "
        f"{'mean width':>11} {'misses: support':>16} {'spread':>7}",
        [
            f"{t:<7} {m:<12} {len(o['hits']):>6} {_coverage_columns(o)} {o['support']:>16} {o['spread']:>7}"
            for t in truths
            for m, o in ((m, results[t][m]) for m in methods)
        ],
    )
    if args.compare:
        print("\nthe same replicates, other intervals")
        _print_table(
            f"{'truth':<7} {'method':<12} {'interval':<11} {'coverage':>9} {'95% CI of coverage':>19} "
            f"{'mean width':>11} {'rating outside':>15}",
            [
                f"{t:<7} {m:<12} {name:<11} {_coverage_columns(a)} {a['outside']:>15}"
                for t in truths
                for m in methods
                for name, a in results[t][m]["other"].items()
            ],
        )
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
