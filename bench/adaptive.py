"""Benchmark: how many judge calls adaptive judging (eqarena/solvers/sparse/adaptive.py) needs to recover the
full data's NE model ranking, against uniform random sampling of cells.

    uv run python bench/adaptive.py [--seeds 5] [--replicates 20] [--skip-prd] [--skip-synthetic] [--live-seeds 10]

Every case is a recording of every ordered cell, replayed: a call returns the recorded score of the asked
(cell, sample), what `recorded:<judge>` returns through the judge flow (tests/test_replay_judge.py checks the
scores are identical); it is served from an array here so that the bench measures selection, not I/O. The
full data = the whole recording, its NE (affinity LLE) king ratings the reference; full calls = its size.

- PRD Vicuna-80 (80 prompts x 5 models, one judgment per ordered cell and judge): each judge alone (1,600
  calls), and the five judges pooled (a cell's k-th sample is judge k's verdict, judges in a seeded order
  per cell; 8,000 calls).
- synthetic_king_tensor(500, 17) with a noisy judge: `--synthetic-samples` (2) verdicts per ordered cell,
  +1 with probability (1 + u) / 2, else -1 (272,000 calls). How far the recording's NE ranking is from
  that of u itself is printed too.

Both strategies start from the same seeded design (every pair on 5 prompts, one sample per order) and
judge `batch` calls per round up to the budget (no early stop, so the curves are comparable; in how many
seeds the stop rule, every adjacent pair ordered or tied within 0.02 with probability >= 0.95, would have
stopped the adaptive run is printed too, and the probabilities the rule would see with the whole recording
judged). After each round: Kendall's tau-b of the round's NE king ratings against the reference
(scipy.stats.kendalltau; 1.0 when both have no variation), top-1 = the same best
model (ties within 1e-4 share a rank, solvers.analyses.clones.dense_ranks). Per checkpoint the mean tau and the share
of seeds with the right top model; "reach" = the fewest calls after which tau >= 0.95 and the top model is
identical, as a fraction of the full calls (median over seeds, and in how many seeds it is <= 25%). A first
hit can be luck where the full data's own ranking is unsettled (the curves go up and down), so the summary
also counts the seeds whose ranking *after 25% of the calls* is there ("at 25%") and gives the median share
from which every later round stays there ("stays").

Stop rule with a live judge (`--live-seeds`, 10): synthetic_king_tensor(P, M, seed, judgments=None) as the
expected payoffs (`--live-size`, 20x4; `--live-payoffs smooth`: Bradley-Terry probabilities; `grid`: means
of 8 verdicts, whose exact ties make some NE ratings sit exactly on a switch), a judge that draws a fresh
verdict per call (no recording to run out of), the stop rule on (0.95, indifference 0.02), a budget of
`--live-passes` (40) calls per ordered cell; per seed why it stopped, after how many passes, and whether
the ranking it stopped with is that of the expected payoffs' NE: tau, top-1, and "right" = every adjacent
pair of the stopped ranking whose true ratings differ by more than the indifference is ordered as in the
truth (what the rule promises). The last line counts the seeds where the rule fired and was right.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from eqarena.solvers import synthetic_king_tensor
from eqarena.solvers.analyses.clones import dense_ranks  # noqa: E402
from eqarena.solvers.bootstrap.confidence import solve_king_ratings  # noqa: E402
from eqarena.solvers.games.normal_form import KING  # noqa: E402
from eqarena.solvers.sparse.adaptive import (  # noqa: E402
    STOP_CONFIDENT,
    CellStats,
    adaptive_judging,
    adjacent_order_probabilities,
    cell_sd,
    ranking,
    rate,
    replicate_equilibria,
    stop_reason,
    tie_probabilities,
)

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
    from eqarena import warehouse
    from eqarena.tasks import ingest as ingest

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
    stacked = np.concatenate([per[j] for j in PRD_JUDGES])  # (5, P, M, M)
    rng = np.random.default_rng([seed, 99])
    order = np.argsort(rng.random(stacked.shape), axis=0)  # a seeded judge order per cell
    out["pooled (5 judges)"] = (np.take_along_axis(stacked, order, axis=0), models)
    return out


def reference_ratings(scores: np.ndarray) -> np.ndarray:
    count = (~np.isnan(scores)).sum(axis=0)
    mean = np.nansum(scores, axis=0) / np.maximum(count, 1)  # 0 where never recorded (the diagonal)
    u = 0.5 * (mean - mean.transpose(0, 2, 1))
    return solve_king_ratings("ne", np.nan_to_num(u))[0]


def full_data_settled(scores: np.ndarray, replicates: int, indifference: float = 0.02) -> np.ndarray:
    """P(settled) per adjacent pair with the whole recording judged: what the stop rule would see at the end."""
    stats = CellStats.empty(*scores.shape[1:3])
    for sample in scores:
        p, a, b = np.nonzero(~np.isnan(sample))
        stats.add(np.stack([p, a, b], axis=1), sample[p, a, b])
    rating = rate(stats)
    reps = replicate_equilibria(rating, cell_sd(stats, rating, 0.5), replicates, np.random.default_rng(0))
    full = rating.ratings[KING]
    return np.maximum(
        adjacent_order_probabilities(full, reps.ratings), tie_probabilities(full, reps.ratings, indifference)
    )


def recorded_judge(scores: np.ndarray):
    served = np.zeros(scores.shape[1:], int)

    def judge(requests):
        p, a, b = requests.T
        k = served[p, a, b]
        np.add.at(served, (p, a, b), 1)
        return np.where(k < len(scores), scores[np.minimum(k, len(scores) - 1), p, a, b], np.nan)

    return judge


def curve(result, reference) -> list[tuple[int, float, bool]]:
    return [(c, tau(r, reference), same_top(r, reference)) for c, r in zip(result.calls, result.ratings)]


def reach(points, full_calls) -> float | None:
    hit = next((c for c, t, top in points if t >= 0.95 and top), None)
    return None if hit is None else hit / full_calls


def stable_reach(points, full_calls) -> float | None:
    """The fewest calls from which every later round (to the budget) has tau >= 0.95 and the same top model."""
    hit = None
    for c, t, top in points:
        if t >= 0.95 and top:
            hit = c if hit is None else hit
        else:
            hit = None
    return None if hit is None else hit / full_calls


def at(points, calls) -> tuple[float, bool] | None:
    """tau and top-1 of the last round with at most `calls` calls."""
    done = [(t, top) for c, t, top in points if c <= calls]
    return done[-1] if done else None


def run_case(name, make_judge, P, M, reference, full_calls, budget, batch, max_samples, args) -> dict:
    """Both strategies over `args.seeds` seeds; prints mean tau and top-1 share per checkpoint, and reach."""
    runs = {"adaptive": [], "uniform": []}
    seconds = {"adaptive": 0.0, "uniform": 0.0}
    for seed in range(args.seed, args.seed + args.seeds):
        for strategy in runs:
            started = time.perf_counter()
            result = adaptive_judging(
                make_judge(seed),
                P,
                M,
                max_calls=budget,
                batch_calls=batch,
                stop_probability=1.01,
                replicates=args.replicates,
                max_samples_per_order=max_samples,
                strategy=strategy,
                seed=seed,
            )
            seconds[strategy] += time.perf_counter() - started
            stop_at = next(
                (
                    c
                    for c, p, t in zip(result.calls, result.probabilities, result.tie_probabilities)
                    if stop_reason(p, c, None, 0.95, t) == STOP_CONFIDENT
                ),
                None,
            )
            runs[strategy].append(dict(points=curve(result, reference), stop_at=stop_at))
    print(
        f"\n## {name}: P={P}, M={M}, full calls {full_calls:,}, budget {budget:,}, batch {batch:,}, {args.seeds} seeds"
    )
    print(f"{'calls':>8} {'share':>6} | {'mean tau adaptive':>17} {'top1':>5} | {'mean tau uniform':>16} {'top1':>5}")
    for share in CHECKPOINTS:
        calls = int(round(share * full_calls))
        if calls > budget:
            continue
        cols = []
        for strategy in runs:
            got = [at(r["points"], calls) for r in runs[strategy]]
            got = [g for g in got if g is not None]
            cols.append(
                f"{np.mean([t for t, _ in got]):>.3f} {np.mean([top for _, top in got]):>5.0%}"
                if got
                else f"{'-':>5} {'-':>5}"
            )
        print(f"{calls:>8,} {share:>6.0%} | {cols[0]:>23} | {cols[1]:>22}")
    out = {}
    for strategy in runs:
        reached = [reach(r["points"], full_calls) for r in runs[strategy]]
        stops = [r["stop_at"] for r in runs[strategy]]
        within = sum(1 for r in reached if r is not None and r <= 0.25)
        at_quarter = [at(r["points"], int(round(0.25 * full_calls))) for r in runs[strategy]]
        held = sum(1 for g in at_quarter if g is not None and g[0] >= 0.95 and g[1])
        stable = [stable_reach(r["points"], full_calls) for r in runs[strategy]]
        out[strategy] = dict(median=_median_reach(reached), within=within, held=held, stable=_median_reach(stable))
        stopped = [s for s in stops if s is not None]
        print(
            f"{strategy:>8}: reach tau>=0.95 & same top-1: median {_fmt(out[strategy]['median'])} of full calls, "
            f"within 25% in {within}/{len(reached)} seeds; stop rule fired in {len(stopped)}/{len(stops)} seeds"
            f"{f' (median {int(np.median(stopped)):,} calls)' if stopped else ''}; {seconds[strategy]:.0f}s"
        )
    return out


def _median_reach(reached: list[float | None]) -> float | None:
    """Median share, a seed that never reached counting as infinitely late (None if most never reached)."""
    ordered = sorted(np.inf if r is None else r for r in reached)
    m = ordered[(len(ordered) - 1) // 2]
    return None if np.isinf(m) else float(m)


def _fmt(x: float | None) -> str:
    return "not within budget" if x is None else f"{x:.1%}"


def synthetic_recording(u: np.ndarray, samples: int, seed: int) -> np.ndarray:
    """(samples, P, M, M) verdicts +1 with probability (1 + u) / 2, else -1, in every ordered cell."""
    rng = np.random.default_rng([seed, 7])
    draws = np.where(rng.random((samples, *u.shape)) < (1 + u[None]) / 2, 1.0, -1.0)
    M = u.shape[1]
    return np.where(np.eye(M, dtype=bool)[None, None], np.nan, draws)


def right_within_indifference(estimate: np.ndarray, truth: np.ndarray, indifference: float) -> bool:
    """Every adjacent pair of ranking(estimate) whose true ratings differ by more than `indifference` is
    ordered as in the truth (pairs the truth puts within the zone may come in either order)."""
    order = ranking(estimate)
    return all(truth[hi] - truth[lo] >= -indifference for hi, lo in zip(order[:-1], order[1:]))


def live_stop_rule(
    seeds: int, replicates: int, payoffs: str, size: tuple[int, int], passes: float, indifference: float = 0.02
) -> None:
    P, M = size
    judgments = {"grid": 8, "smooth": None}[payoffs]
    print(
        f"\n## stop rule with a live noisy judge: synthetic_king_tensor({P}, {M}, seed, judgments={judgments}) "
        f"as expected payoffs, stop at 0.95 (indifference {indifference}), budget {passes:g} passes"
    )
    print(
        f"{'seed':>4} {'stopped by':>10} {'calls':>7} {'passes':>6} | {'tau vs expected NE':>18} {'top-1':>5} "
        f"{'right':>5} | P(settled) at the end"
    )
    fired = right = 0
    for seed in range(seeds):
        u = np.asarray(synthetic_king_tensor(P, M, seed=seed, judgments=judgments))
        truth = solve_king_ratings("ne", u)[0]
        rng = np.random.default_rng([seed, 5])

        def judge(requests, u=u, rng=rng):
            p, a, b = requests.T
            return np.where(rng.random(len(requests)) < (1 + u[p, a, b]) / 2, 1.0, -1.0)

        cells = P * M * (M - 1)
        result = adaptive_judging(
            judge,
            P,
            M,
            max_calls=int(passes * cells),
            batch_calls=max(2, cells // 8),
            replicates=replicates,
            indifference=indifference,
            seed=seed,
        )
        settled = np.maximum(result.probabilities[-1], result.tie_probabilities[-1])
        ok = right_within_indifference(result.ratings[-1], truth, indifference)
        if result.stopped_by == STOP_CONFIDENT:
            fired, right = fired + 1, right + ok
        print(
            f"{seed:>4} {result.stopped_by:>10} {result.calls[-1]:>7,} {result.calls[-1] / cells:>6.1f} | "
            f"{tau(result.ratings[-1], truth):>18.3f} {'yes' if same_top(result.ratings[-1], truth) else 'no':>5} "
            f"{'yes' if ok else 'no':>5} | {np.round(settled, 2).tolist()}",
            flush=True,
        )
    print(f"the stop rule fired in {fired} of {seeds} seeds and was right in {right} of {fired}")


def game_size(text: str) -> tuple[int, int]:
    """'20x4' -> (20, 4): prompts x models, each at least 2 (an argparse type)."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(x.isdigit() and int(x) >= 2 for x in parts):
        raise argparse.ArgumentTypeError(f"expected PROMPTSxMODELS such as 20x4, got {text!r}")
    return int(parts[0]), int(parts[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per case (designs, tie-breaks, replicates)")
    parser.add_argument("--synthetic-samples", type=int, default=2, help="recorded verdicts per ordered cell")
    parser.add_argument("--skip-prd", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--live-seeds", type=int, default=10, help="seeds of the live-judge stop-rule check (0: skip)")
    parser.add_argument("--live-size", type=game_size, default="20x4", help="the live-judge games' prompts x models")
    parser.add_argument("--live-passes", type=float, default=40, help="the live-judge budget, calls per ordered cell")
    parser.add_argument(
        "--live-payoffs",
        choices=("smooth", "grid"),
        default="smooth",
        help="the live judge's expected payoffs: Bradley-Terry probabilities (smooth), or means of "
        "8 verdicts (grid: exact ties, where NE ratings are degenerate)",
    )
    args = parser.parse_args()
    print("command: uv run python bench/adaptive.py " + " ".join(sys.argv[1:]))
    summary = []
    cases = []
    if not args.skip_prd:
        cases += [(name, scores, models) for name, (scores, models) in prd_recordings(args.seed).items()]
    if not args.skip_synthetic:
        u = np.asarray(synthetic_king_tensor(500, 17))
        scores = synthetic_recording(u, args.synthetic_samples, args.seed)
        truth = solve_king_ratings("ne", u)[0]
        recorded = reference_ratings(scores)
        print(
            f"\nsynthetic_king_tensor(500, 17), {args.synthetic_samples} recorded noisy verdicts per ordered cell: "
            f"NE ranking of the recording vs that of u itself: tau {tau(recorded, truth):.3f}, "
            f"same top-1 {'yes' if same_top(recorded, truth) else 'no'}"
        )
        cases.append((f"synthetic 500x17, {args.synthetic_samples}/order", scores, [f"m{k}" for k in range(17)]))
    for name, scores, models in cases:
        P, M = scores.shape[1], scores.shape[2]
        full = int((~np.isnan(scores)).sum())
        ref = reference_ratings(scores)
        order = " > ".join(models[k] for k in np.lexsort((np.arange(M), -ref)))
        print(f"\nfull-data NE ranking of {name}: {order} (ratings {np.round(np.sort(ref)[::-1], 3).tolist()})")
        settled = full_data_settled(scores, args.replicates)
        print(
            f"with every recorded call judged, P(adjacent pair ordered or tied within 0.02), best first: "
            f"{np.round(settled, 2).tolist()} (the stop rule asks >= 0.95 of each)"
        )
        big = P * M > 1000
        res = run_case(
            name,
            lambda seed, s=scores: recorded_judge(s),
            P,
            M,
            ref,
            full,
            budget=int((0.4 if big else 0.5) * full),
            batch=full // (80 if big else 32),
            max_samples=len(scores),
            args=args,
        )
        summary.append((name, full, res))
    if args.live_seeds:
        live_stop_rule(args.live_seeds, args.replicates, args.live_payoffs, args.live_size, args.live_passes)
    if summary:
        print_summary(summary, args.seeds)


def print_summary(summary: list[tuple[str, int, dict]], seeds: int) -> None:
    print("\n## summary: share of the full data's calls to reach tau >= 0.95 with the same top model (goal <= 25%)")
    print(
        "reach: the first round there (median, seeds <= 25%); at 25%: seeds whose ranking after 25% of the calls is "
        "there; stays: the median share from which every later round to the budget is there"
    )
    print(
        f"{'case':<28} {'full calls':>10} | {'adaptive: reach':>15} {'<=25%':>6} {'at 25%':>6} {'stays':>6} | "
        f"{'uniform: reach':>14} {'<=25%':>6} {'at 25%':>6} {'stays':>6}"
    )
    for name, full, r in summary:
        f = lambda x: "n/a" if x is None else f"{x:.1%}"  # noqa: E731
        cols = [
            f"{f(x['median']):>15} {x['within']:>3}/{seeds:<2} {x['held']:>3}/{seeds:<2} {f(x['stable']):>6}"
            for x in (r["adaptive"], r["uniform"])
        ]
        print(f"{name:<28} {full:>10,} | {cols[0]} | {cols[1]}")


if __name__ == "__main__":
    main()
