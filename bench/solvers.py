"""Benchmark: eqarena's NE and CCE solvers against Gambit, cvxpy and scipy on king-of-the-hill games.

    uv run python bench/solvers.py [--sizes 100x10x10,500x17x17,5000x32x32,20000x32x32]
                                   [--cap-seconds 120] [--mem-cap-gb 12] [--no-references]
                                   [--methods cce-uniform,scipy-lbfgsb,...] [--seed 0]

Every measurement runs in its own subprocess: a fresh JIT cache (the "wall" column includes JAX
compilation), its own peak RSS, and a hard time cap (a reference that does not finish within
--cap-seconds is reported as such; references also get an address-space cap, --mem-cap-gb, so
that one needing more memory fails alone). "warm" repeats the solve in the same process.
Games are `synthetic_king_tensor(P, M, seed)` (values on the grid of 8 judgments).

References, same run:
  gambit-logit   pygambit.nash.logit_solve on StrategicGame.from_arrays(u0, u1, u2) (build + trace)
  cvxpy-cce      maximum Shannon entropy CCE with Clarabel (sparse formulation through the
                 marginals y(k,r), x(p,r), x(p,k); a dense one is far larger)
  scipy-lbfgsb   scipy L-BFGS-B on the same dual as `cce(target="uniform")` (App. A, alpha >= 0 as
                 bounds), value and gradient from a jitted JAX function compiled before timing;
                 stopped at the first evaluated point whose CCE gap is <= 1e-6
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

SIZES = "100x10x10,500x17x17,5000x32x32,20000x32x32"
OURS = ["ne-affinity", "ne-uniform", "cce-affinity", "cce-uniform"]
REFERENCES = ["scipy-lbfgsb", "cvxpy-cce", "gambit-logit"]
GAP = 1e-6


# ----------------------------------------------------------------------------------------------
# Workers (one per subprocess). Each returns a dict printed as JSON.


def _game(p: int, m: int, seed: int):
    from eqarena.solvers import koth_game, synthetic_king_tensor

    return koth_game(synthetic_king_tensor(p, m, seed=seed))


def run_ours(method: str, p: int, m: int, seed: int, cap: float) -> dict:
    from eqarena.solvers import cce
    from eqarena.solvers.nash.limiting_logit import nash

    game = _game(p, m, seed)
    kind, target = method.split("-")
    solve = (lambda: nash(game, target=target)) if kind == "ne" else (lambda: cce(game, target=target))
    start = time.perf_counter()
    eq = solve()
    wall = time.perf_counter() - start
    out = {"wall": wall, "steps": eq.steps, "exploitability": eq.exploitability}
    if wall < cap / 3:
        start = time.perf_counter()
        eq = solve()
        out["warm"] = time.perf_counter() - start
    if kind == "cce":
        d = eq.diagnostics
        out["note"] = f"rounds {d['rounds']}, active {d['active_multipliers']}"
    return out


def run_scipy(p: int, m: int, seed: int, cap: float) -> dict:
    import jax
    import jax.numpy as jnp
    import scipy.optimize

    from eqarena.solvers.cce import dual

    game = _game(p, m, seed)
    g = dual.koth_arrays(jnp.asarray(game.u_king))
    dev = jnp.abs(g.u)
    zeros_p, zeros_m = jnp.zeros(p), jnp.zeros(m)

    @jax.jit
    def value_grad(g, dev, z):
        logits = dual.koth_logits(g, zeros_p, zeros_m, zeros_m, dev, z[:p], z[p : p + m], z[p + m :])
        value, x = dual._softmax_and_value(logits)
        gp, gk, gr = dual.koth_gaps(g, x)
        gaps = jnp.concatenate([gp, gk, gr])
        return value, -gaps, jnp.max(gaps)

    z0 = np.zeros(p + 2 * m)
    jax.block_until_ready(value_grad(g, dev, jnp.asarray(z0)))  # compile outside the clock

    class Reached(Exception):
        pass

    state = {"evals": 0, "gap": np.inf, "z": z0}

    def fun(z):
        value, grad, gap = value_grad(g, dev, jnp.asarray(z))
        state["evals"] += 1
        state["gap"] = float(gap)
        if state["gap"] <= GAP:
            state["z"] = z
            raise Reached
        return float(value), np.asarray(grad)

    start = time.perf_counter()
    try:
        res = scipy.optimize.minimize(
            fun,
            z0,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None)] * len(z0),
            options={"maxiter": 100_000, "maxfun": 100_000, "ftol": 0.0, "gtol": 1e-12},
        )
        note = f"stopped: {res.message}"
    except Reached:
        note = f"gap <= {GAP:g}"
    wall = time.perf_counter() - start
    return {
        "wall": wall,
        "steps": state["evals"],
        "exploitability": max(state["gap"], 0.0),
        "note": note + " (evals)",
    }


def run_cvxpy(p: int, m: int, seed: int, cap: float) -> dict:
    import cvxpy as cp
    import scipy.sparse as sp

    from eqarena.solvers import joint_exploitability

    game = _game(p, m, seed)
    u = game.u_king
    a = np.abs(u)
    ur = game.payoff(2)
    start = time.perf_counter()
    n = p * m * m
    x = cp.Variable(n, nonneg=True)
    y = cp.Variable(m * m)  # sum over prompts
    x_pr = cp.Variable(p * m)  # sum over kings
    x_pk = cp.Variable(p * m)  # sum over rebels
    value = cp.Variable(3)  # u_prompt(x), u_king(x), u_rebel(x): keeps each constraint row sparse
    ones_p, ones_m = sp.csr_matrix(np.ones((1, p))), sp.csr_matrix(np.ones((1, m)))
    eye_m, eye_p, eye_mm = sp.identity(m), sp.identity(p), sp.identity(m * m)
    sum_p = sp.kron(ones_p, eye_mm, format="csr")
    sum_k = sp.kron(eye_p, sp.kron(ones_m, eye_m), format="csr")
    sum_r = sp.kron(eye_p, sp.kron(eye_m, ones_m), format="csr")
    king_dev = np.transpose(u, (1, 0, 2)).reshape(m, p * m)  # [i, (p, r)] = u(p, i, r)
    rebel_dev = np.transpose(ur, (2, 0, 1)).reshape(m, p * m)  # [j, (p, k)] = u_r(p, k, j)
    constraints = [
        y == sum_p @ x,
        x_pr == sum_k @ x,
        x_pk == sum_r @ x,
        value[0] == a.reshape(-1) @ x,
        value[1] == u.reshape(-1) @ x,
        value[2] == ur.reshape(-1) @ x,
        a.reshape(p, m * m) @ y <= value[0],
        king_dev @ x_pr <= value[1],
        rebel_dev @ x_pk <= value[2],
        cp.sum(x) == 1,
    ]
    problem = cp.Problem(cp.Maximize(cp.sum(cp.entr(x))), constraints)
    problem.solve(solver=cp.CLARABEL)
    wall = time.perf_counter() - start
    joint = np.clip(x.value, 0.0, None).reshape(p, m, m)
    joint /= joint.sum()
    iterations = problem.solver_stats.num_iters if problem.solver_stats else 0
    return {
        "wall": wall,
        "steps": int(iterations or 0),
        "exploitability": joint_exploitability(game, joint),
        "note": f"status {problem.status}, entropy {problem.value:.9f}",
    }


def run_gambit(p: int, m: int, seed: int, cap: float) -> dict:
    import pygambit

    from eqarena.solvers import exploitability

    game = _game(p, m, seed)
    payoffs = [game.payoff(i) for i in range(3)]
    start = time.perf_counter()
    g = pygambit.StrategicGame.from_arrays(*payoffs)
    built = time.perf_counter() - start
    result = pygambit.nash.logit_solve(g)
    wall = time.perf_counter() - start
    eq = result.equilibrium
    if eq is None:
        return {
            "wall": wall,
            "steps": 0,
            "exploitability": float("nan"),
            "note": f"no equilibrium: {result.reason}",
        }
    marginals = [np.array([float(eq[pl][s]) for s in g.get_strategies(pl)]) for pl in g.players]
    return {
        "wall": wall,
        "steps": 0,
        "exploitability": exploitability(game, marginals),
        "note": f"build {built:.1f} s + trace {wall - built:.1f} s",
    }


def worker(method: str, p: int, m: int, seed: int, cap: float) -> None:
    if method in OURS:
        out = run_ours(method, p, m, seed, cap)
    elif method == "scipy-lbfgsb":
        out = run_scipy(p, m, seed, cap)
    elif method == "cvxpy-cce":
        out = run_cvxpy(p, m, seed, cap)
    elif method == "gambit-logit":
        out = run_gambit(p, m, seed, cap)
    else:
        raise SystemExit(f"unknown method {method}")
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


# ----------------------------------------------------------------------------------------------
# Driver.


def measure(method: str, p: int, m: int, seed: int, cap: float, mem_cap_gb: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", method, str(p), str(m), str(seed), str(cap)]

    def limit_memory():  # a reference that needs more fails alone instead of waking the OOM killer
        if method in REFERENCES:
            limit = int(mem_cap_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    start = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, check=False, capture_output=True, text=True, timeout=cap, cwd=REPO, preexec_fn=limit_memory
        )
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {cap:g} s"}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        if done.returncode < 0:
            tail = f"killed by signal {-done.returncode} after {time.perf_counter() - start:.0f} s"
        elif "MemoryError" in done.stderr or "bad_alloc" in done.stderr:
            tail = f"out of memory (address space capped at {mem_cap_gb:g} GB)"
        return {"error": f"failed: {tail[:90]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=SIZES, help="comma-separated PxMxM sizes")
    parser.add_argument("--cap-seconds", type=float, default=120.0, help="time cap per measurement")
    parser.add_argument("--no-references", action="store_true", help="skip Gambit, cvxpy and scipy")
    parser.add_argument("--methods", default=None, help="comma-separated subset of methods")
    parser.add_argument("--mem-cap-gb", type=float, default=12.0, help="address-space cap for references")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        method, p, m, seed, cap = args.worker
        worker(method, int(p), int(m), int(seed), float(cap))
        return

    methods = OURS + ([] if args.no_references else REFERENCES)
    if args.methods:
        methods = [x for x in methods if x in args.methods.split(",")]
    header = (
        f"{'size':>13} {'method':<13} {'wall s':>8} {'warm s':>8} {'steps':>6} {'exploitab.':>10} {'RSS MB':>7}  note"
    )
    print(header)
    print("-" * len(header))
    for size in args.sizes.split(","):
        p, m, m2 = (int(v) for v in size.lower().split("x"))
        if m != m2:
            raise SystemExit(f"size {size}: the two model counts must agree")
        rows = {}
        for method in methods:
            r = measure(method, p, m, args.seed, args.cap_seconds, args.mem_cap_gb)
            rows[method] = r
            if "error" in r:
                print(
                    f"{size:>13} {method:<13} {'':>8} {'':>8} {'':>6} {'':>10} {'':>7}  {r['error']}",
                    flush=True,
                )
                continue
            print(
                f"{size:>13} {method:<13} {fmt(r['wall'], '8.2f')} {fmt(r.get('warm'), '8.2f')} "
                f"{r['steps']:>6} {r['exploitability']:>10.1e} {r['rss_mb']:>7.0f}  {r.get('note', '')}",
                flush=True,
            )
        ours, ref = rows.get("cce-uniform", {}), rows.get("scipy-lbfgsb", {})
        if "wall" in ref and "error" not in ref and "wall" in ours:
            ours_time = ours.get("warm", ours["wall"])
            print(
                f"{'':>13} cce-uniform vs scipy L-BFGS-B on the same dual: "
                f"{ref['wall'] / ours_time:.1f}x faster (warm), "
                f"{ref['wall'] / ours['wall']:.1f}x including compilation",
                flush=True,
            )


if __name__ == "__main__":
    main()
