"""Benchmark: bootstrap replicates solved one by one (NumPy, JAX), on worker processes, and as batches.

    uv run python bench/batched.py [--prompts 500] [--models 17] [--replicates 200] [--workers 2] [--seed 0]
    uv run python bench/batched.py --prompts 80 --models 5     # a small game
    JAX_PLATFORMS=cuda uv run python bench/batched.py          # the same table on a GPU

The game is `synthetic_king_tensor(P, M, seed)`, the scheme "prompts". Rows, all measured in this run:
one NE + one CCE solve of the full game with the NumPy and with the JAX backend (the reference is the
faster); NE and CCE replicates one by one on `--workers` processes (`bootstrap_ratings(batched=False)`);
the NE replicates as `eqarena rate` solves them by default (`batched=None`: on a CPU, each worker's
unit of NE replicates as one batch where `batches_pay`, else one by one); and the NE and CCE
replicates as batches in this process (`solvers.nash.batched`, `solvers.cce.batched`, `batched=True`).
Rows marked "first call" include compiling, unless the compilation cache the eqarena command uses
already holds it. "x reference" divides by the reference row; "per solve" by the solves of the row;
"max expl." is the largest exploitability (NE) or CCE gap of the row.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--models", type=int, default=17)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from eqarena.runtime.compile_cache import use_compile_cache

    print(f"JAX compilation cache (as the eqarena command uses it): {use_compile_cache()}")
    import jax

    from eqarena.runtime.worker_pool import process_map
    from eqarena.solvers import cce, koth_game, nash, synthetic_king_tensor
    from eqarena.solvers.bootstrap.batched import batches_pay
    from eqarena.solvers.bootstrap.confidence import bootstrap_ratings

    u = synthetic_king_tensor(args.prompts, args.models, seed=args.seed)
    game = koth_game(u)
    n = args.replicates
    rows = []

    def timed(label, solves, run):
        start = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - start
        expl = max(out) if isinstance(out, list) else out
        rows.append((label, solves, seconds, expl))
        return seconds

    nash(game), cce(game), nash(game, backend="jax"), cce(game, backend="jax")  # first-call costs
    numpy_one = timed(
        "single solve NumPy: 1 NE + 1 CCE",
        2,
        lambda: [nash(game).exploitability, cce(game, backend="numpy").exploitability],
    )
    jax_one = timed(
        "single solve JAX: 1 NE + 1 CCE",
        2,
        lambda: [nash(game, backend="jax").exploitability, cce(game, backend="jax").exploitability],
    )
    reference = min(numpy_one, jax_one)
    common = {"replicates": n, "seed": args.seed, "schemes": ("prompts",)}

    def expl_of(results):
        return [r.diagnostics["max_exploitability"] for r in results]

    pool = process_map(args.workers)
    timed(
        f"process pool ({args.workers}): {n} NE one by one",
        n,
        lambda: expl_of(bootstrap_ratings(u, ["ne"], batched=False, map_units=pool, **common)),
    )
    timed(
        f"process pool ({args.workers}): {n} CCE one by one",
        n,
        lambda: expl_of(bootstrap_ratings(u, ["cce"], batched=False, map_units=pool, **common)),
    )
    default = "units as batches" if batches_pay(u.shape) else "one by one"
    for when in (" (first call, compiling)", ""):
        timed(
            f"process pool ({args.workers}): {n} NE default{when}",
            n,
            lambda: expl_of(bootstrap_ratings(u, ["ne"], map_units=pool, **common)),
        )
    fallback = {}

    def batched(method):
        def run():
            out = bootstrap_ratings(u, [method], batched=True, **common)
            fallback[method] = out[0].diagnostics["fallback"]
            return expl_of(out)

        return run

    for method in ("ne", "cce"):
        timed(f"batched: {n} {method.upper()} (first call, compiling)", n, batched(method))
        timed(f"batched: {n} {method.upper()}", n, batched(method))

    print(
        f"bootstrap of u_king {args.prompts} x {args.models} x {args.models}, {n} replicates (prompts), "
        f"JAX platform {jax.default_backend()} ({jax.devices()[0].device_kind}), {os.cpu_count()} CPUs"
    )
    print()
    header = f"{'step':<58} {'wall s':>8} {'per solve s':>12} {'x reference':>12} {'max expl.':>10}"
    print(header)
    print("-" * len(header))
    for label, solves, seconds, expl in rows:
        print(f"{label:<58} {seconds:>8.2f} {seconds / solves:>12.4f} {seconds / reference:>12.1f} {expl:>10.1e}")
    print()
    print(f"batched replicates re-solved one by one (fallback): {fallback}")
    print(f"NE units batched by default on this machine: {default} (solvers/bootstrap/batched.py)")


if __name__ == "__main__":
    main()
