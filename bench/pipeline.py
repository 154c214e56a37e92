"""Benchmark of the rating pipeline at the paper's arena-hard scale: a synthetic judgments table of
500 prompts x 17 models x 8 samples per unordered pair (4 per order) = 544,000 rows.

Times tensor assembly (DuckDB, vectorised) against a plain-Python reference on the same rows, then
the missing-data check, the battles read, Bradley-Terry, NE and CCE (affinity targets) and the write
of the run. Prints a table.

    uv run python bench/pipeline.py [--prompts 500] [--models 17] [--samples-per-order 4]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from eqarena import warehouse  # noqa: E402
from eqarena.warehouse.judgments import JudgmentRow, insert_judgments, read_ok_scores  # noqa: E402
from eqarena.warehouse.status import table_row_count  # noqa: E402
from eqarena.warehouse.tensor import apply_missing_policy, assemble_tensor, read_battles  # noqa: E402

DATASET, JUDGE = "bench", "bench:judge"


def synthetic_rows(prompts: int, models: int, per_order: int, seed: int = 0) -> list[JudgmentRow]:
    """Judgments from latent skills plus prompt-specific noise, five-level verdicts, both orders."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(0, 1, models)
    affinity = rng.normal(0, 0.7, (prompts, models))
    names = [f"model-{k:02d}" for k in range(models)]
    rows = []
    for p in range(prompts):
        strength = skill + affinity[p]
        for a in range(models):
            for b in range(models):
                if a == b:
                    continue
                diff = strength[a] - strength[b] + 0.15 + rng.normal(0, 0.6, per_order)  # 0.15: position bias
                scores = np.clip(np.round(diff), -2, 2) / 2
                for k, s in enumerate(scores):
                    rows.append(
                        JudgmentRow(
                            JUDGE, "t", DATASET, f"p{p:04d}", names[a], names[b], k, "ok", verdict="x", score=float(s)
                        )
                    )
    return rows


def reference_assembly(con, prompts: list[str], models: list[str]) -> np.ndarray:
    """The same position-balanced u_king by fetching every row and looping in Python."""
    rows = read_ok_scores(con, JUDGE, DATASET)
    sums, counts = defaultdict(float), defaultdict(int)
    for p, a, b, s in rows:
        sums[(p, a, b)] += s
        counts[(p, a, b)] += 1
    pi, mi = {p: k for k, p in enumerate(prompts)}, {m: k for k, m in enumerate(models)}
    mean = np.full((len(prompts), len(models), len(models)), np.nan)
    for (p, a, b), total in sums.items():
        mean[pi[p], mi[a], mi[b]] = total / counts[(p, a, b)]
    u = 0.5 * (mean - mean.swapaxes(1, 2))
    u[:, np.arange(len(models)), np.arange(len(models))] = 0.0
    return u


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--models", type=int, default=17)
    parser.add_argument("--samples-per-order", type=int, default=4)
    parser.add_argument("--bootstrap", type=int, default=100)
    args = parser.parse_args()

    import jax

    from eqarena.tasks.rate import rate_method
    from eqarena.warehouse.ratings import write_rate_run
    from eqarena.warehouse.runs import RunRecord

    results: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        con = warehouse.connect(Path(tmp) / "bench.duckdb")
        rows, seconds = timed(synthetic_rows, args.prompts, args.models, args.samples_per_order)
        results.append(("generate rows (Python, setup)", seconds, f"{len(rows):,} rows"))
        inserted, seconds = timed(insert_judgments, con, rows)
        results.append(("insert_judgments (setup)", seconds, f"{inserted:,} new"))
        del rows

        tensor, t_assemble = timed(assemble_tensor, con, DATASET, [JUDGE])
        results.append(
            (
                "assemble u_king (DuckDB, vectorised)",
                t_assemble,
                f"{tensor.shape[0]}x{tensor.shape[1]}x{tensor.shape[2]}, complete={tensor.complete}",
            )
        )
        reference, t_reference = timed(reference_assembly, con, list(tensor.prompts), list(tensor.models))
        same = np.allclose(reference, tensor.u_king, atol=1e-12, equal_nan=True)
        results.append(
            (
                "assemble u_king (Python-loop reference)",
                t_reference,
                f"equal={same}; vectorised is {t_reference / t_assemble:.1f}x faster",
            )
        )
        (complete, dropped), seconds = timed(apply_missing_policy, tensor, "refuse")
        results.append(("coverage check", seconds, dropped.summary()))
        battles, seconds = timed(read_battles, con, complete)
        results.append(("read battles", seconds, f"{len(battles['score']):,} battles"))
        con.close()

        solved = []
        bt, seconds = timed(rate_method.fn, complete, battles, "bt", args.bootstrap, 0)
        solved.append(bt)
        results.append((f"Bradley-Terry + {args.bootstrap} bootstrap", seconds, ""))
        for method in ("ne", "cce"):
            out, seconds = timed(rate_method.fn, complete, battles, method, 0, 0)
            solved.append(out)
            eq = out.equilibrium
            results.append(
                (
                    f"{method} (affinity target) + contributions",
                    seconds,
                    f"exploitability {eq.exploitability:.1e}, steps {eq.steps}",
                )
            )

        con = warehouse.connect(Path(tmp) / "bench.duckdb")
        run = RunRecord(
            run_id="bench-run",
            kind="rate",
            started_at=datetime.now(timezone.utc),
            finished_at=datetime.now(timezone.utc),
            data_fingerprint=complete.fingerprint,
        )
        _, seconds = timed(
            write_rate_run,
            con,
            run,
            complete,
            tensor,
            dropped,
            [r for s in solved for r in s.ratings],
            [s.equilibrium for s in solved if s.equilibrium],
        )
        payoff_rows = table_row_count(con, "payoffs")
        joint_rows = table_row_count(con, "equilibrium_joint")
        con.close()
        results.append(
            ("write run (one transaction)", seconds, f"{payoff_rows:,} payoff cells, {joint_rows:,} CCE joint cells")
        )

    width = max(len(name) for name, _, _ in results)
    print(
        f"\neqarena pipeline benchmark: {args.prompts} prompts x {args.models} models x "
        f"{2 * args.samples_per_order} samples per pair (jax {jax.__version__})"
    )
    print(f"{'step'.ljust(width)}  {'seconds':>8}  notes")
    print(f"{'-' * width}  {'-' * 8}  {'-' * 40}")
    for name, seconds, note in results:
        print(f"{name.ljust(width)}  {seconds:8.2f}  {note}")
    core = sum(s for n, s, _ in results if "setup" not in n and "reference" not in n)
    print(f"{'total (assembly -> write, excluding setup and reference)'.ljust(width)}  {core:8.2f}")


if __name__ == "__main__":
    main()
