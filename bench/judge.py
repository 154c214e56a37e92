"""Benchmark of the judge's throughput and of its DuckDB writes.

1. Rate limit: the local fake judge server (tests/fake_llm_server.py) answers after `--latency` seconds
   (default 0.2) and enforces an RPM limit with HTTP 429 + Retry-After, as providers do. The judge
   runner, given `--rpm` equal to that limit, runs single-sample requests through the real openai SDK.
   Reported: achieved successful calls per minute as a fraction of the limit (target >= 0.9) over the
   whole run and without its first fifth (steady state), 429s received, and for reference the rate the
   same concurrency reaches against the same server without any limit (its ceiling on this machine).
2. Writes: rows per second of the judge's write buffer (batched commits, as in a run) against one
   commit per row, measured on a warehouse already holding `--existing` judgments.

    uv run python bench/judge.py [--rpm 600 3000] [--seconds 40] [--latency 0.2] [--concurrency 32]

3. `--runner dask` (instead of 1 and 2): the judge flow runs a `--calls` (default 200) single-sample plan
   on a 2-worker Dask LocalCluster (`--dask-workers`) against the fake server limited to `--dask-rpm`
   (default 720) with the same `--rpm`, and, as the reference in the same run, the same plan on the
   default asyncio runner. Reported per runner: calls planned, rows written, lost and duplicate
   judgments (each planned (prompt, pair, order, sample) must be stored exactly once and paid once),
   achieved successful calls per minute from the server's log vs the limit, 429s, the most requests the
   server received in any 10 s against what the limit allows (+ its 1 s burst), and the wall time of
   the flow (for dask including the cluster's start and stop).

    uv run python bench/judge.py --runner dask [--calls 200] [--dask-rpm 720] [--dask-workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")  # read when Prefect is first imported
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

from fake_llm_server import FakeLLMServer, plant_dataset  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from eqarena import warehouse  # noqa: E402
from eqarena.judge.inputs import read_inputs  # noqa: E402
from eqarena.judge.plan import plan_missing  # noqa: E402
from eqarena.judge.runner import JudgeRunner  # noqa: E402
from eqarena.judge.templates import load_template  # noqa: E402
from eqarena.llm.providers import make_provider  # noqa: E402
from eqarena.options import (  # noqa: E402
    JudgeOptions,
    RetryPolicy,  # noqa: E402
    RunLimits,
    RunnerOptions,
)
from eqarena.warehouse.judgments import JudgmentRow, JudgmentWriter, insert_judgments, judgment_counts  # noqa: E402

MODELS = ["m1", "m2", "m3", "m4"]
JUDGE = "openai-compatible:bench"
TEMPLATE = load_template("pairwise5")


def planted_warehouse(directory: Path, calls: int) -> Path:
    """A warehouse with enough prompts for `calls` single-sample judge calls (48 per prompt)."""
    db = directory / f"judge-{len(list(directory.glob('judge-*.duckdb')))}.duckdb"  # a fresh one each time
    con = warehouse.connect(db)
    plant_dataset(con, "bench", [str(p) for p in range(1, calls // 48 + 2)], MODELS)
    con.close()
    return db


async def judge_for(db: Path, server: FakeLLMServer, *, rpm: float | None, calls: int, concurrency: int) -> dict:
    """Run the first `calls` planned requests through the runner; returns counts and timings."""
    con = warehouse.connect(db)
    inputs = read_inputs(con, "bench", None, None)
    plan = plan_missing(
        con,
        JUDGE,
        TEMPLATE,
        inputs,
        samples_per_order=4,
        max_unparsed=None,
        multi_sample=False,
        batch=False,
        price=None,
    )
    requests = plan.requests[: -(-calls // 4)]
    provider = make_provider(f"{JUDGE}@{server.openai_base_url}", timeout_s=30)
    writer = JudgmentWriter(con)
    retry = RetryPolicy(attempts=20, initial_wait_s=0.05, max_wait_s=1.0, timeout_s=30)
    before = server.snapshot()
    try:
        async with JudgeRunner(
            provider=provider,
            template=TEMPLATE,
            dataset="bench",
            prompts=inputs.prompts,
            responses=inputs.responses,
            writer=writer,
            retry=retry,
            limits=RunLimits(concurrency=concurrency, rpm=rpm),
            multi_sample=False,
        ) as runner:
            await runner.judge(requests)
    finally:
        await provider.aclose()
    after = server.snapshot()
    stored = judgment_counts(con, JUDGE).get("ok", 0)
    con.close()
    times = after.success_times[len(before.success_times) :]
    span = times[-1] - times[0]
    steady = times[len(times) // 5 :]  # without the ramp-up (connections opening, the first burst)
    return {
        "steady_per_minute": 60.0 * (len(steady) - 1) / (steady[-1] - steady[0]),
        "ok": runner.stats.ok,
        "stored": stored,
        "requests": after.requests - before.requests,
        "rate_limited": after.rate_limited - before.rate_limited,
        "seconds": runner.stats.seconds,
        "per_minute": 60.0 * (len(times) - 1) / span if span > 0 else float("nan"),
        "rows_per_s": stored / runner.stats.seconds,
        "commits": writer.commits,
        "write_s": writer.seconds_writing,
    }


def bench_rate_limits(rpms: list[float], seconds: float, latency: float, concurrency: int, directory: Path) -> Table:
    table = Table(
        title=f"judge throughput: fake server with {latency * 1000:.0f} ms latency, "
        f"runner --rpm = server limit, concurrency {concurrency}"
    )
    for column in (
        "server limit /min",
        "calls",
        "achieved /min",
        "fraction of limit",
        "steady fraction",
        "429s",
        "no-limit ref /min",
        "rows committed /s",
        "commits",
        "DuckDB busy",
    ):
        table.add_column(column, justify="right")
    for rpm in rpms:
        calls = int(rpm * seconds / 60)
        with FakeLLMServer({m: 0.0 for m in MODELS}, latency_s=latency, rpm_limit=rpm, record_times=True) as server:
            limited = asyncio.run(
                judge_for(planted_warehouse(directory, calls), server, rpm=rpm, calls=calls, concurrency=concurrency)
            )
        # Reference in the same run: the same concurrency against the same latency, no limit anywhere.
        with FakeLLMServer({m: 0.0 for m in MODELS}, latency_s=latency, record_times=True) as server:
            free = asyncio.run(
                judge_for(
                    planted_warehouse(directory, calls),
                    server,
                    rpm=None,
                    calls=min(calls, 40 * concurrency),
                    concurrency=concurrency,
                )
            )
        table.add_row(
            f"{rpm:,.0f}",
            f"{limited['ok']:,}",
            f"{limited['per_minute']:,.0f}",
            f"{limited['per_minute'] / rpm:.1%}",
            f"{limited['steady_per_minute'] / rpm:.1%}",
            f"{limited['rate_limited']}",
            f"{free['steady_per_minute']:,.0f}",
            f"{limited['rows_per_s']:,.1f}",
            f"{limited['commits']:,}",
            f"{limited['write_s'] / limited['seconds']:.2%}",
        )
    return table


def bench_writes(existing: int, rows: int, directory: Path) -> Table:
    """Rows/s of the write buffer (batches of 64) vs one commit per row, on a warehouse of `existing` rows."""
    db = directory / "writes.duckdb"
    con = warehouse.connect(db)
    base = [
        JudgmentRow(
            "bench:old", "t", "bench", str(i // 96), f"m{i % 12}", f"n{i % 8}", i, "ok", "A>B", 0.5, "text " * 50
        )
        for i in range(existing)
    ]
    insert_judgments(con, base)

    def rows_for(tag: str) -> list[JudgmentRow]:
        return [
            JudgmentRow(
                f"bench:{tag}",
                "t",
                "bench",
                str(i // 24),
                "a",
                "b",
                i,
                "ok",
                "A>B",
                0.5,
                "verdict text " * 40,
                None,
                400,
                30,
                0.2,
                "run",
            )
            for i in range(rows)
        ]

    table = Table(title=f"DuckDB judgment writes ({existing:,} rows already stored, {rows:,} new rows)")
    for column in ("write mode", "rows/s", "commits", "ratio vs one commit per row"):
        table.add_column(column, justify="right")
    results = {}
    for mode, max_rows in (("one commit per row", 1), ("write buffer, batches of 64", 64)):
        writer = JudgmentWriter(con, max_rows=max_rows)
        started = time.perf_counter()
        for row in rows_for(mode.split()[0]):
            writer.add([row])
        writer.flush()
        elapsed = time.perf_counter() - started
        results[mode] = (rows / elapsed, writer.commits)
    reference = results["one commit per row"][0]
    for mode, (rate, commits) in results.items():
        table.add_row(mode, f"{rate:,.0f}", f"{commits:,}", f"{rate / reference:.1f}x")
    con.close()
    return table


def judge_flow_run(
    runner: str, calls: int, rpm: float, latency: float, concurrency: int, workers: int, directory: Path
) -> dict:
    """One judge flow run of a `calls`-call plan (5 models, 2 samples per order: 40 calls per prompt)."""
    from itertools import permutations

    from eqarena.flows import judge_flow

    models = ["m1", "m2", "m3", "m4", "m5"]
    prompts = [str(p) for p in range(1, calls // 40 + 1)]
    db = directory / f"flow-{runner}.duckdb"
    con = warehouse.connect(db)
    plant_dataset(con, "bench", prompts, models)
    con.close()
    planned = {(p, a, b, k) for p in prompts for a, b in permutations(models, 2) for k in range(2)}
    with FakeLLMServer({m: 0.0 for m in models}, latency_s=latency, rpm_limit=rpm, record_times=True) as server:
        started = time.perf_counter()
        options = JudgeOptions(
            judge=f"{JUDGE}@{server.openai_base_url}",
            dataset="bench",
            samples_per_order=2,
            multi_sample=False,
            limits=RunLimits(rpm=rpm, concurrency=concurrency),
            retry=RetryPolicy(attempts=20, initial_wait_s=0.05, max_wait_s=60.0, timeout_s=30.0),
            runner=RunnerOptions(runner=runner, dask_workers=workers),
        )
        out = judge_flow(options, str(db), progress=False)
        wall = time.perf_counter() - started
        seen = server.snapshot()
    con = warehouse.connect(db, read_only=True)
    keys = con.execute(
        "SELECT prompt_id, model_a, model_b, sample_index FROM judgments WHERE judge = ? AND status = 'ok'", [JUDGE]
    ).fetchall()
    con.close()
    ok = sorted(seen.success_times)
    requests = sorted(seen.request_times)
    most_10s = max(bisect.bisect_right(requests, t + 10.0) - i for i, t in enumerate(requests))
    return {
        "planned": out.plan.calls,
        "rows": len(keys),
        "lost": len(planned - set(keys)),
        "duplicates": len(keys) - len(set(keys)) + sum(n - 2 for n in seen.paid_samples.values() if n > 2),
        "per_minute": 60.0 * (len(ok) - 1) / (ok[-1] - ok[0]),
        "rate_limited": seen.rate_limited,
        "most_10s": most_10s,
        "wall": wall,
        "judging": out.stats.seconds,
    }


def bench_dask(calls: int, rpm: float, latency: float, concurrency: int, workers: int, directory: Path) -> Table:
    from prefect.testing.utilities import prefect_test_harness

    table = Table(
        title=f"judge flow, {calls}-call plan, fake server limited to {rpm:,.0f} calls/min "
        f"(--rpm {rpm:,.0f}), {latency * 1000:.0f} ms latency, concurrency {concurrency}"
    )
    for column in (
        "runner",
        "calls planned",
        "rows written",
        "lost",
        "duplicates",
        "achieved /min",
        "limit /min",
        "ratio",
        "429s",
        "most requests in 10 s (allowed)",
        "judging s",
        "wall s",
    ):
        table.add_column(column, justify="right")
    allowed = rpm / 60.0 * 10.0 + max(1.0, rpm / 60.0)
    with prefect_test_harness(server_startup_timeout=180):
        for runner, label in (("dask", f"dask, {workers} workers"), ("asyncio", "asyncio (default, reference)")):
            r = judge_flow_run(runner, calls, rpm, latency, concurrency, workers, directory)
            table.add_row(
                label,
                f"{r['planned']}",
                f"{r['rows']}",
                f"{r['lost']}",
                f"{r['duplicates']}",
                f"{r['per_minute']:,.0f}",
                f"{rpm:,.0f}",
                f"{r['per_minute'] / rpm:.3f}",
                f"{r['rate_limited']}",
                f"{r['most_10s']} ({allowed:.0f})",
                f"{r['judging']:.1f}",
                f"{r['wall']:.1f}",
            )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rpm", type=float, nargs="+", default=[600.0, 3000.0])
    parser.add_argument("--seconds", type=float, default=40.0, help="length of each rate-limited run")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--existing", type=int, default=200_000)
    parser.add_argument("--rows", type=int, default=2_000)
    parser.add_argument(
        "--runner",
        choices=("asyncio", "dask"),
        default="asyncio",
        help="dask: the Dask runner vs the default runner on one plan (section 3 above)",
    )
    parser.add_argument("--calls", type=int, default=200, help="--runner dask: calls in the plan (multiple of 40)")
    parser.add_argument("--dask-rpm", type=float, default=720.0, help="--runner dask: server limit = --rpm")
    parser.add_argument("--dask-workers", type=int, default=2)
    args = parser.parse_args()
    console = Console(width=150)
    if args.runner == "dask":
        with tempfile.TemporaryDirectory() as tmp:
            console.print(
                bench_dask(args.calls, args.dask_rpm, args.latency, args.concurrency, args.dask_workers, Path(tmp))
            )
        return
    with tempfile.TemporaryDirectory() as tmp:
        console.print(bench_rate_limits(args.rpm, args.seconds, args.latency, args.concurrency, Path(tmp)))
        console.print(bench_writes(args.existing, args.rows, Path(tmp)))


if __name__ == "__main__":
    main()
