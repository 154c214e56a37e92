"""Benchmark: deviation ratings (eqarena/solvers/cce/deviation.py) on synthetic king-of-the-hill games.

    uv run python bench/deviation.py [--sizes 80x5,500x17,1000x32] [--cap-seconds 300] [--seed 0]

Each size runs in its own subprocess under a hard time cap; the worker reports every LP of the sequence as
it finishes, so a capped size still shows how far it got: LPs solved (of at most P + 2M), the first LP's
time (the cold solve) and the mean of the warm-started ones. Games are `synthetic_king_tensor(P, M, seed)`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def worker(p: int, m: int, seed: int) -> None:
    import eqarena.solvers.cce.deviation as dev
    from eqarena.solvers import koth_game, synthetic_king_tensor

    game = koth_game(synthetic_king_tensor(p, m, seed=seed))
    start = time.perf_counter()
    lp = dev.koth_lp(game.u_king)
    print(
        json.dumps(
            {"built": time.perf_counter() - start, "variables": lp.gains.shape[1], "nnz": int(lp.gains.nnz + lp.eq.nnz)}
        ),
        flush=True,
    )
    solve = dev._solve_relaxing

    def timed(lp_solve):
        t0 = time.perf_counter()
        out = solve(lp_solve)
        print(json.dumps({"lp": time.perf_counter() - t0, "level": out[0]}), flush=True)
        return out

    dev._solve_relaxing = timed
    eq = dev.deviation(game)
    print(
        json.dumps(
            {"done": time.perf_counter() - start, "lps": eq.diagnostics["lps"], "levels": eq.diagnostics["levels"]}
        ),
        flush=True,
    )


def run(p: int, m: int, seed: int, cap: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", f"{p}x{m}", "--seed", str(seed)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        out, _ = proc.communicate(timeout=cap)
        capped = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        capped = True
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    lps = [r["lp"] for r in rows if "lp" in r]
    built = next((r for r in rows if "built" in r), {})
    done = next((r for r in rows if "done" in r), None)
    return {
        "size": f"{p}x{m}",
        "variables": built.get("variables"),
        "nnz": built.get("nnz"),
        "lps": len(lps),
        "max_lps": p + 2 * m,
        "first_lp": lps[0] if lps else None,
        "warm_lp": sum(lps[1:]) / len(lps[1:]) if len(lps) > 1 else None,
        "seconds": done["done"] if done else None,
        "wall": time.perf_counter() - start,
        "capped": capped,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="80x5,500x17,1000x32")
    parser.add_argument("--cap-seconds", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        p, m = (int(v) for v in args.worker.split("x"))
        worker(p, m, args.seed)
        return
    print(
        f"{'P x M':>8} {'variables':>10} {'nnz':>10} {'LPs done':>10} {'first LP s':>11} {'warm LP s':>10} "
        f"{'total s':>10}"
    )
    for size in args.sizes.split(","):
        p, m = (int(v) for v in size.split("x"))
        r = run(p, m, args.seed, args.cap_seconds)
        fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        total = fmt(r["seconds"], ".1f") if not r["capped"] else f">{args.cap_seconds:.0f} (cap)"
        print(
            f"{r['size']:>8} {fmt(r['variables'], ','):>10} {fmt(r['nnz'], ','):>10} "
            f"{r['lps']:>4}/{r['max_lps']:<5} {fmt(r['first_lp'], '.2f'):>11} {fmt(r['warm_lp'], '.2f'):>10} "
            f"{total:>10}",
            flush=True,
        )


if __name__ == "__main__":
    main()
