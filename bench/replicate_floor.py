"""Benchmark: where a bootstrap replicate's time goes, and the least time the exact solvers, as they are,
can take for 200 NE + 200 CCE replicates of a P x M game on this machine's workers.

    uv run python bench/replicate_floor.py [--prompts 500] [--models 17] [--replicates 48] [--workers 2]
    JAX_PLATFORMS=cuda uv run python bench/replicate_floor.py       # the same table on a GPU

The game is `synthetic_king_tensor(P, M, seed)`, the scheme "prompts", all in this process, compiled first,
with a bootstrap worker's heap settings (`runtime.worker_pool`) and one BLAS thread, as in a worker.
- NE, solved as a bootstrap worker solves its unit of replicates (`solvers.nash.batched` on one lane,
  padded as `batched_bootstrap.lane_prompts` pads them), per replicate: the distinct-prompt game and its
  affinity target; the compiled trace; the monitor's replay of the trace's points (support polishes, limit
  extrapolation); finishing the end (`batched_nash(timings=...)`). Then what the trace counts per replicate
  (attempts, one factorisation each, on all padded prompt rows and on kept rows; chord evaluations),
  the cost of one factorisation and one chord evaluation of the reduced logit system, compiled, on all
  padded rows and on the smallest kept-row tier (16 rows), each timed inside one compiled loop, and the
  trace's arithmetic lower bound: all-row attempts x factorisation (all rows) + kept-row attempts x
  factorisation (16 rows) + chord evaluations x chord evaluation (16 rows) (every chord evaluation reads
  at least 16 rows).
- CCE, solved one by one from the full data's multipliers as a worker solves them
  (`bootstrap_ratings(batched=False)`): wall per replicate; the Newton steps each takes (every step forms
  one Hessian and evaluates the joint and the gaps at least once); the cost of one of each on a
  replicate's distinct-prompt game with a working set of 64 prompt deviations (`cce`'s first; all of
  them on a game of fewer prompts), NumPy; and the Newton steps' lower bound, steps x (Hessian + joint +
  gaps).
The last lines give the solving time of 200 + 200 replicates on the workers (replicates x per replicate /
workers): as measured; with the NE reduced to its compiled trace and the CCE to its Newton kernels (no
targets, monitor, line searches or other bookkeeping); and with both at their arithmetic lower bounds.
Several workers on one machine share its memory bandwidth, so these are optimistic; set-up (interpreter,
imports, worker start) comes on top.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

BOOTSTRAP_REPLICATES = 200  # the bootstrap bench/scale.py times (boot-500x17)
TIER_ROWS = 16  # the smallest kept-row tier (`batched_nash.KEPT_ROWS`)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--models", type=int, default=17)
    parser.add_argument("--replicates", type=int, default=48, help="replicates measured (default 48)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import jax
    import threadpoolctl

    from eqarena.runtime.worker_pool import _keep_freed_memory
    from eqarena.solvers import synthetic_king_tensor
    from eqarena.solvers.bootstrap.confidence import bootstrap_ratings

    _keep_freed_memory()
    threadpoolctl.threadpool_limits(1)
    u = synthetic_king_tensor(args.prompts, args.models, seed=args.seed)
    n = args.replicates
    ne, counts, rows = ne_replicates(u, n, args.seed)
    ne_total = sum(ne.values())
    factor_all, chord_all = call_costs(u, rows)
    factor_tier, chord_tier = call_costs(u, TIER_ROWS)
    ne_bound = (
        counts["all_rows"] * factor_all + counts["kept_rows"] * factor_tier + counts["chord_evaluations"] * chord_tier
    )

    common = {"replicates": n, "seed": args.seed, "schemes": ("prompts",), "batched": False}
    bootstrap_ratings(u, ["cce"], **{**common, "replicates": 2, "seed": args.seed + 1})  # first-call costs
    start = time.perf_counter()
    bootstrap_ratings(u, ["cce"], **common)
    cce_seconds = (time.perf_counter() - start) / n
    cce_steps, kernels = cce_replicates(u, n, args.seed)
    cce_bound = cce_steps * sum(kernels.values())

    print(
        f"bootstrap replicates of u_king {args.prompts} x {args.models} x {args.models} (prompts), {n} measured, "
        f"one process; JAX platform {jax.default_backend()}, {os.cpu_count()} CPUs"
    )
    print()
    header = f"{'per replicate':<64} {'ms':>9} {'count':>8}"
    print(header)
    print("-" * len(header))
    table = [
        ("NE, one lane (as a worker solves its unit)", ne_total, None),
        ("  distinct-prompt game and affinity target", ne["targets"], None),
        ("  compiled trace", ne["trace"], None),
        ("  monitor's replay (polishes, limit extrapolation)", ne["monitor"], None),
        ("  finishing the end", ne["finish"], None),
        (f"  trace: attempts on all {rows} padded rows", None, counts["all_rows"]),
        ("  trace: attempts on kept rows", None, counts["kept_rows"]),
        ("  trace: chord evaluations", None, counts["chord_evaluations"]),
        (f"  one factorisation, {rows} rows", factor_all, None),
        (f"  one factorisation, {TIER_ROWS} rows", factor_tier, None),
        (f"  one chord evaluation, {rows} rows", chord_all, None),
        (f"  one chord evaluation, {TIER_ROWS} rows", chord_tier, None),
        ("  trace's arithmetic lower bound (counts x costs above)", ne_bound, None),
        ("CCE, one by one from the full data's multipliers", cce_seconds, None),
        ("  Newton steps", None, cce_steps),
        *((f"  one {name}", seconds, None) for name, seconds in kernels.items()),
        ("  Newton steps' arithmetic lower bound (steps x costs above)", cce_bound, None),
    ]
    for label, seconds, count in table:
        ms = "" if seconds is None else f"{seconds * 1e3:.3f}"
        print(f"{label:<64} {ms:>9} {'' if count is None else f'{count:.1f}':>8}")
    print()
    per_worker = BOOTSTRAP_REPLICATES / args.workers
    print(f"{BOOTSTRAP_REPLICATES} NE + {BOOTSTRAP_REPLICATES} CCE replicates on {args.workers} workers, solving only:")
    for label, seconds in (
        ("as measured", ne_total + cce_seconds),
        ("NE's compiled trace + CCE's Newton kernels, nothing else", ne["trace"] + cce_bound),
        ("both at their arithmetic lower bounds", ne_bound + cce_bound),
    ):
        print(f"  {label:<58} {seconds * per_worker:6.2f} s")


def ne_replicates(u, n: int, seed: int):
    """({part: seconds per replicate}, mean counters per replicate, padded rows) of n prompt replicates'
    NE on one lane, compiled first; parts: targets, trace, monitor, finish."""
    from eqarena.solvers.bootstrap.batched import lane_prompts
    from eqarena.solvers.bootstrap.replicates import prompt_replicate, replicate_game
    from eqarena.solvers.games.normal_form import koth_game
    from eqarena.solvers.nash.batched import batched_nash
    from eqarena.solvers.nash.limiting_logit import selection_targets

    start = time.perf_counter()
    games, targets = [], []
    for b in range(n):
        ub, target = replicate_game("ne", u[prompt_replicate(len(u), seed, b)])
        games.append(koth_game(ub))
        targets.append(selection_targets(games[-1], target))
    timings = {"targets": time.perf_counter() - start}
    rows = lane_prompts(games, len(u), 1)
    batched_nash(games[:1], targets[:1], prompts=rows, lanes=1)  # compiles
    ends = batched_nash(games, targets, prompts=rows, lanes=1, timings=timings)
    solved = [e.diagnostics for e in ends if e is not None]
    if not solved:
        raise SystemExit("no replicate was solved on the lane")
    factorisations = np.mean([d["factorisations"] for d in solved])
    kept = np.mean([d["kept_row_attempts"] for d in solved])
    counts = {
        "all_rows": factorisations - kept,
        "kept_rows": kept,
        "chord_evaluations": np.mean([d["chord_evaluations"] for d in solved]),
    }
    return {part: seconds / n for part, seconds in timings.items()}, counts, rows


def cce_replicates(u, n: int, seed: int) -> tuple[float, dict[str, float]]:
    """(Newton steps per replicate of n prompt replicates' CCE from the full data's multipliers, seconds of
    one Hessian, one joint and one gaps evaluation on the first replicate's game)."""
    from eqarena.methods import get_method
    from eqarena.solvers.bootstrap.replicates import _distinct_game, prompt_replicate
    from eqarena.solvers.cce import dual
    from eqarena.solvers.cce.max_entropy import _WORKING_SET
    from eqarena.solvers.games.equilibrium import solve_equilibrium
    from eqarena.solvers.games.normal_form import koth_game

    method = get_method("cce")
    full = solve_equilibrium(method, koth_game(u)).multipliers
    steps = []
    for b in range(n):
        idx = prompt_replicate(len(u), seed, b)
        ub, target, rows = _distinct_game("cce", u[idx])
        start = [full[0][idx][rows], full[1], full[2]]
        steps.append(solve_equilibrium(method, koth_game(ub), target, start).steps)

    ub, _, _ = _distinct_game("cce", u[prompt_replicate(len(u), seed, 0)])
    p, m, _ = ub.shape
    logs = [np.full(p, -np.log(p)), np.full(m, -np.log(m)), np.full(m, -np.log(m))]
    oracle = dual.KothDual(dual.koth_arrays(ub), logs, "numpy")
    working = min(_WORKING_SET, p)
    oracle.set_working_set(np.abs(ub[:working]))
    z = np.full(working + 2 * m, 0.01)
    _, x = oracle.value_joint(z)
    gaps = oracle.gaps(x)
    kernels = {
        "Hessian": lambda: oracle.hessian(x, gaps),
        "joint (value and softmax)": lambda: oracle.value_joint(z),
        "gaps evaluation": lambda: oracle.gaps(x),
    }
    return float(np.mean(steps)), {name: _best_of(kernel) for name, kernel in kernels.items()}


def _best_of(kernel, repeats: int = 50, rounds: int = 5) -> float:
    """Seconds of one call of `kernel`: the best of `rounds` means over `repeats` calls."""
    kernel()
    best = np.inf
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            kernel()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def call_costs(u, rows: int, repeats: int = 400) -> tuple[float, float]:
    """Seconds of one compiled factorisation and one chord evaluation of the reduced logit system on the
    first `rows` prompts of u (a point at lambda = 20 with uniform strategies), each timed as `repeats`
    calls inside one compiled loop, every call fed by the previous one so none is hoisted."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from eqarena.solvers._precision import float64
    from eqarena.solvers.nash.logit import _koth_chord_impl, _koth_factor_impl

    m = u.shape[1]
    tensor = np.asarray(u[:rows], dtype=np.float64)
    log_t = np.log(np.concatenate([np.full(rows, 1.0 / rows), np.full(2 * m, 1.0 / m)]))
    z = np.concatenate([np.full(2 * m, np.log(1.0 / m)), [0.0, 0.0, 20.0]])
    row = np.zeros(2 * m + 3)
    row[-1] = 1.0

    @float64
    def timed():
        args = [jnp.asarray(v) for v in (tensor, np.abs(tensor), log_t)]

        def factor_loop(z0):
            def body(_, z):
                _, correction, _, _, _, _ = _koth_factor_impl(z, jnp.asarray(row), *args, True, jnp)
                return z + 1e-300 * correction

            return lax.fori_loop(0, repeats, body, z0)

        _, _, _, _, _, jac = _koth_factor_impl(jnp.asarray(z), jnp.asarray(row), *args, True, jnp)

        def chord_loop(z0):
            def body(_, z):
                _, correction, _, _ = _koth_chord_impl(z, jac, *args, jnp)
                return z + 1e-300 * correction

            return lax.fori_loop(0, repeats, body, z0)

        out = []
        for loop in (factor_loop, chord_loop):
            compiled = jax.jit(loop).lower(jnp.asarray(z)).compile()
            compiled(jnp.asarray(z)).block_until_ready()
            best = np.inf
            for _ in range(5):
                start = time.perf_counter()
                compiled(jnp.asarray(z)).block_until_ready()
                best = min(best, (time.perf_counter() - start) / repeats)
            out.append(best)
        return tuple(out)

    return timed()


if __name__ == "__main__":
    main()
