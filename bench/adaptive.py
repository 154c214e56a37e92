"""Benchmark: how many judge calls adaptive judging (solvers/adaptive.py) needs to recover the full data's
NE model ranking, against uniform random sampling of cells.

    uv run python bench/adaptive.py [--replicates 20] [--seed 0] [--skip-prd] [--skip-synthetic]

PRD Vicuna-80 (80 prompts x 5 models, every ordered cell judged once per judge): each judge alone, and
the five judges pooled (a cell's k-th sample is judge k's verdict, judges in a seeded order per cell,
at most 5 samples per order). The "judge" serves the recorded score of the asked (cell, sample): what
`recorded:<judge>` returns through the judge flow (tests/test_replay_judge.py checks the scores are
identical); it is served from an array here so that the bench measures selection, not I/O. Full data =
every recorded judgment; its NE (affinity LLE) king ratings are the reference. Full calls = 1600 per judge,
8000 pooled.

Synthetic: u = synthetic_king_tensor(500, 17); a call draws a verdict +1 with probability (1 + u) / 2,
else -1 (mean u), at most 4 samples per order. Reference = the NE ranking of u itself; "full calls" =
one sample per order of every cell (500 x 17 x 16 = 136,000).

Both strategies start from the same seeded design (every pair on 5 prompts, one sample per order) and
judge `batch` calls per round up to the budget (no early stop, so the curves are comparable; the round
at which the stop rule, every adjacent pair ordered with probability >= 0.95, would have stopped the
adaptive run is printed too). After each round: Kendall's tau-b of the round's NE king ratings against
the reference (scipy.stats.kendalltau; 1.0 when both have no variation), top-1 = the same best model
(ties within 1e-4 share a rank, solvers.clones.dense_ranks). "reach" = the fewest calls after which tau
>= 0.95 and the top model is identical, as a fraction of the full calls.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solvers import synthetic_king_tensor  # noqa: E402
from solvers.adaptive import adaptive_judging  # noqa: E402
from solvers.bootstrap import solve_king_ratings  # noqa: E402
from solvers.clones import dense_ranks  # noqa: E402

PRD_JUDGES = ("prd:gpt4", "prd:claude", "prd:gpt35", "prd:bard", "prd:vicuna-13b")
CHECKPOINTS = (0.05, 0.10, 0.15, 0.25, 0.40)


def tau(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) < 1e-9 and np.ptp(b) < 1e-9:
        return 1.0
    t = kendalltau(a, b).statistic
    return 0.0 if np.isnan(t) else float(t)


def same_top(a: np.ndarray, b: np.ndarray) -> bool:
    return set(np.flatnonzero(dense_ranks(a, 1e-4) == 1)) == set(np.flatnonzero(dense_ranks(b, 1e-4) == 1))


def prd_recordings(seed: int) -> dict[str, tuple[np.ndarray, list[str]]]:
    """{name: (scores (S, P, M, M) with NaN where not recorded, models)} per judge and pooled."""
    import tasks.ingest as ingest
    import warehouse

    db = Path(tempfile.mkdtemp()) / "prd.duckdb"
    ingest.write_dataset.fn(str(db), ingest.read_dataset.fn("vicuna80"), False, "bench-adaptive")
    con = warehouse.connect(db, read_only=True)
    rows = con.execute("SELECT judge, prompt_id, model_a, model_b, score FROM judgments WHERE status = 'ok'").fetchall()
    con.close()
    prompts = sorted({r[1] for r in rows}, key=lambda p: (len(p), p))
    models = sorted({r[2] for r in rows})
    pi, mi = {p: k for k, p in enumerate(prompts)}, {m: k for k, m in enumerate(models)}
    shape = (len(prompts), len(models), len(models))
    per = {j: np.full((1, *shape), np.nan) for j in PRD_JUDGES}
    for judge, p, a, b, score in rows:
        per[judge][0, pi[p], mi[a], mi[b]] = score
    out = {j: (per[j], models) for j in PRD_JUDGES}
    stacked = np.concatenate([per[j] for j in PRD_JUDGES])               # (5, P, M, M)
    rng = np.random.default_rng([seed, 99])
    order = np.argsort(rng.random(stacked.shape), axis=0)                # a seeded judge order per cell
    out["pooled (5 judges)"] = (np.take_along_axis(stacked, order, axis=0), models)
    return out


def reference_ratings(scores: np.ndarray) -> np.ndarray:
    mean = np.nanmean(scores, axis=0)
    u = 0.5 * (mean - mean.transpose(0, 2, 1))
    return solve_king_ratings("ne", np.nan_to_num(u))[0]


def recorded_judge(scores: np.ndarray):
    served = np.zeros(scores.shape[1:], int)

    def judge(requests):
        p, a, b = requests.T
        k = served[p, a, b]
        np.add.at(served, (p, a, b), 1)
        return np.where(k < len(scores), scores[np.minimum(k, len(scores) - 1), p, a, b], np.nan)

    return judge


def noisy_judge(u: np.ndarray, seed: int):
    rng = np.random.default_rng([seed, 7])

    def judge(requests):
        p, a, b = requests.T
        return np.where(rng.random(len(requests)) < (1 + u[p, a, b]) / 2, 1.0, -1.0)

    return judge


def curve(result, reference) -> list[tuple[int, float, bool]]:
    return [(c, tau(r, reference), same_top(r, reference)) for c, r in zip(result.calls, result.ratings)]


def reach(points, full_calls) -> float | None:
    hit = next((c for c, t, top in points if t >= 0.95 and top), None)
    return None if hit is None else hit / full_calls


def at(points, calls) -> tuple[float, bool] | None:
    """tau and top-1 of the last round with at most `calls` calls."""
    done = [(t, top) for c, t, top in points if c <= calls]
    return done[-1] if done else None


def run_case(name, make_judge, P, M, reference, full_calls, budget, batch, max_samples, args) -> dict:
    out = {}
    for strategy in ("adaptive", "uniform"):
        started = time.perf_counter()
        result = adaptive_judging(make_judge(), P, M, max_calls=budget, batch_calls=batch, stop_probability=1.01,
                                  replicates=args.replicates, max_samples_per_order=max_samples,
                                  strategy=strategy, seed=args.seed)
        points = curve(result, reference)
        stop_at = next((c for c, p in zip(result.calls, result.probabilities) if np.all(p >= 0.95)), None)
        out[strategy] = dict(points=points, seconds=time.perf_counter() - started, stop_at=stop_at)
    print(f"\n## {name}: P={P}, M={M}, full calls {full_calls:,}, budget {budget:,}, batch {batch:,}")
    print(f"{'calls':>8} {'share':>6} | {'tau adaptive':>12} {'top1':>5} | {'tau uniform':>11} {'top1':>5}")
    for share in CHECKPOINTS:
        calls = int(round(share * full_calls))
        if calls > budget:
            continue
        a, u = at(out["adaptive"]["points"], calls), at(out["uniform"]["points"], calls)
        fmt = lambda x: f"{x[0]:>12.3f} {('yes' if x[1] else 'no'):>5}" if x else f"{'-':>12} {'-':>5}"  # noqa: E731
        print(f"{calls:>8,} {share:>6.0%} | {fmt(a)} | {fmt(u).replace('  ', ' ', 1)}")
    for strategy in ("adaptive", "uniform"):
        r = reach(out[strategy]["points"], full_calls)
        stop = out[strategy]["stop_at"]
        print(f"{strategy:>8}: reach tau>=0.95 & same top-1 at "
              f"{'not within budget' if r is None else f'{r:.1%} of full calls'}; "
              f"stop rule (all adjacent P>=0.95) would stop at "
              f"{'never within budget' if stop is None else f'{stop:,} calls'}; {out[strategy]['seconds']:.0f}s")
    out["reach"] = {s: reach(out[s]["points"], full_calls) for s in ("adaptive", "uniform")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-prd", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args()
    print("command: uv run python bench/adaptive.py " + " ".join(sys.argv[1:]))
    summary = []
    if not args.skip_prd:
        for name, (scores, models) in prd_recordings(args.seed).items():
            P, M = scores.shape[1], scores.shape[2]
            full = int((~np.isnan(scores)).sum())
            ref = reference_ratings(scores)
            order = " > ".join(models[k] for k in np.lexsort((np.arange(M), -ref)))
            print(f"\nfull-data NE ranking of {name}: {order} (ratings {np.round(np.sort(ref)[::-1], 3).tolist()})")
            res = run_case(name, lambda s=scores: recorded_judge(s), P, M, ref, full, budget=full // 2,
                           batch=full // 32, max_samples=len(scores), args=args)
            summary.append((name, full, res["reach"]))
    if not args.skip_synthetic:
        u = np.asarray(synthetic_king_tensor(500, 17))
        P, M = u.shape[:2]
        full = P * M * (M - 1)
        ref = solve_king_ratings("ne", u)[0]
        i, j = np.triu_indices(M, 1)
        cells = np.array([(p, a, b) for p in range(P) for a, b in zip(i, j)])
        judge, once = noisy_judge(u, args.seed + 1), np.zeros_like(u)
        first, second = judge(cells), judge(cells[:, [0, 2, 1]])
        once[cells[:, 0], cells[:, 1], cells[:, 2]] = 0.5 * (first - second)
        once -= once.transpose(0, 2, 1)
        ceiling = solve_king_ratings("ne", once)[0]
        print(f"\nceiling: one full noisy pass ({full:,} calls) vs the NE ranking of u: tau {tau(ceiling, ref):.3f}, "
              f"same top-1 {'yes' if same_top(ceiling, ref) else 'no'}")
        res = run_case("synthetic_king_tensor(500, 17), noisy judge", lambda: noisy_judge(u, args.seed), P, M, ref,
                       full, budget=int(0.4 * full), batch=full // 40, max_samples=4, args=args)
        summary.append(("synthetic 500x17", full, res["reach"]))
    print("\n## summary: share of the full data's calls to reach tau >= 0.95 with the same top model (goal <= 25%)")
    print(f"{'case':<28} {'full calls':>10} {'adaptive':>10} {'uniform':>10}")
    for name, full, r in summary:
        f = lambda x: "n/a" if x is None else f"{x:.1%}"  # noqa: E731
        print(f"{name:<28} {full:>10,} {f(r['adaptive']):>10} {f(r['uniform']):>10}")


if __name__ == "__main__":
    main()
