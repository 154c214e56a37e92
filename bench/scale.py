"""Benchmark: eqarena at the scale of real public leaderboards, end to end through the CLI.

    uv run python bench/scale.py [--cases all] [--timeout 600] [--checkout .] [--work DIR]

Synthetic data with the shapes of the real sets (Chatbot Arena battle logs, AlpacaEval- and
LiveBench-style per-prompt score tables), generated once into --work. Every case runs as its own
process (the `eqarena` command of --checkout, or a Python snippet in its environment), so its wall
time includes the interpreter's start and imports, and its peak RSS is that process's own. A case
slower than --timeout is stopped and shown as "> timeout". Pass --checkout to time another version
of eqarena (its .venv) with the same data: the "before" of a change, in the same run.

Cases and the goals they are held to (2 cores):
  battles-2M      import a 2,000,000-row battle log (200 models, 5,000 prompts)   <= 60 s, <= 2 GB
  battles-json-200k  import a FastChat clean_battle JSON array of 200,000 battles  <= 10 s
  scores-805x200  import an 805 x 200 per-prompt score table                      <= 15 s
  rate-18x65      rate --bootstrap 0 on an 18 x 65 score table (5% cells empty)   <= 10 s
  rate-805x200    rate --bootstrap 0 on the 805 x 200 table                       <= 60 s
  boot-500x17     200 NE + 200 CCE bootstrap replicates of a 500 x 17 game        <= 5 s
  rate-default    default rate (bootstrap on) on the 18 x 65 table                <= 60 s
  pref-805x8      default rate on an 805 x 8 baseline-only preference table       <= 60 s
  pref-805x52     default rate on an 805 x 52 baseline-only preference table      <= 180 s
  boot-805x200    default rate (bootstrap on) on the 805 x 200 table              <= 300 s
  rate-log-2M     default rate on the 2M-battle log (prompt groups), end to end   <= 120 s, <= 4 GB
                  (its "first line" column: when rate's first `eqarena:` line came, goal <= 10 s)
  run-bundled     `eqarena run` on the bundled data                               <= 15 s
  run-first       the same on a machine's first run (no compiled solvers kept yet) <= 15 s
  import-3        a 3-line `eqarena import pairwise`                              <= 3 s
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    name: str
    goal_s: float
    goal_rss_mb: float | None
    what: str


CASES = (
    Case("battles-2M", 60, 2048, "import 2,000,000-row battle log (200 models, 5,000 prompts)"),
    Case("battles-json-200k", 10, None, "import a 200,000-battle FastChat JSON array (clean_battle layout)"),
    Case("scores-805x200", 15, None, "import an 805 x 200 per-prompt score table"),
    Case("rate-18x65", 10, None, "rate --bootstrap 0, 18 prompts x 65 models (CLI)"),
    Case("rate-805x200", 60, None, "rate --bootstrap 0, 805 x 200"),
    Case("boot-500x17", 5, None, "200 NE + 200 CCE bootstrap replicates, 500 x 17"),
    Case("rate-default", 60, None, "default rate (bootstrap on), 18 x 65"),
    Case("pref-805x8", 60, None, "default rate, 805 x 8 baseline-only preference table"),
    Case("pref-805x52", 180, None, "default rate, 805 x 52 baseline-only preference table"),
    Case("boot-805x200", 300, None, "default rate (bootstrap on), 805 x 200"),
    Case("rate-log-2M", 120, 4096, "default rate on the 2M-battle log (prompt groups)"),
    Case("run-bundled", 15, None, "eqarena run on the bundled data"),
    Case("run-first", 15, None, "the same, first run: no compiled solvers kept yet"),
    Case("import-3", 3, None, "a 3-line eqarena import pairwise"),
)


@dataclass(frozen=True)
class Measured:
    seconds: float
    rss_mb: float
    ok: bool
    note: str = ""
    first_line_s: float | None = None  # when the first `eqarena:` line appeared


# ------------------------------------------------------------------------------------------ data


def battle_log(path: Path, rows: int = 2_000_000, models: int = 200, prompts: int = 5_000, seed: int = 0) -> Path:
    """A Chatbot-Arena-style log: model_a, model_b, winner (model_a / model_b / tie), question_id, tstamp."""
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 1.0, models)
    a = rng.integers(0, models, rows)
    b = (a + rng.integers(1, models, rows)) % models
    p_a = 1.0 / (1.0 + np.exp(strength[b] - strength[a]))
    draw = rng.random(rows)
    tie = rng.random(rows) < 0.2
    winner = np.where(tie, "tie", np.where(draw < p_a, "model_a", "model_b"))
    names = np.array([f"model-{k:03d}" for k in range(models)])
    pl.DataFrame(
        {
            "model_a": names[a],
            "model_b": names[b],
            "winner": winner,
            "question_id": np.char.add("q", rng.integers(0, prompts, rows).astype(str)),
            "tstamp": 1.7e9 + np.arange(rows, dtype=np.float64),
        }
    ).write_parquet(path)
    return path


def fastchat_json_array(path: Path, rows: int = 200_000, models: int = 100, seed: int = 3) -> Path:
    """A battle log as FastChat's clean_battle JSON array (one indented object per battle, as its
    `json.dump(..., indent=2)` writes): model_a, model_b, winner, question_id, anony, language, turn,
    tstamp and the nested category_tag."""
    if path.exists():
        return path
    import json

    rng = np.random.default_rng(seed)
    a = rng.integers(0, models, rows)
    b = (a + rng.integers(1, models, rows)) % models
    winners = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])[rng.integers(0, 4, rows)]
    battles = [
        {
            "model_a": f"model-{a[k]:03d}",
            "model_b": f"model-{b[k]:03d}",
            "winner": str(winners[k]),
            "judge": "arena_user_1",
            "turn": int(1 + k % 3),
            "anony": bool(k % 5),
            "language": "English",
            "tstamp": 1.7e9 + k,
            "question_id": f"{k:032x}",
            "category_tag": {
                "criteria_v0.1": {"specificity": bool(k % 2), "complexity": False},
                "if_v0.1": {"if": bool(k % 7 == 0), "score": 1},
                "math_v0.1": {"math": False},
            },
        }
        for k in range(rows)
    ]
    path.write_text(json.dumps(battles, indent=2))
    return path


def score_table(path: Path, prompts: int, models: int, empty: float = 0.0, seed: int = 0) -> Path:
    """A wide per-prompt score table (prompt_id + a column per model, scores in [0, 1]); `empty` of the
    cells left blank."""
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.0, 1.0, models)[None, :] + rng.normal(0.0, 1.0, (prompts, 1))
    scores = 1.0 / (1.0 + np.exp(-(skill + rng.normal(0.0, 1.0, (prompts, models)))))
    frame = pl.DataFrame({"prompt_id": [f"t{k}" for k in range(prompts)]})
    blank = rng.random((prompts, models)) < empty
    columns = [
        pl.Series(f"model-{m:03d}", np.where(blank[:, m], np.nan, np.round(scores[:, m], 4))).fill_nan(None)
        for m in range(models)
    ]
    frame.with_columns(columns).write_csv(path)
    return path


def preference_table(path: Path, prompts: int, models: int, seed: int = 0) -> Path:
    """An AlpacaEval-style preference table: an instruction_idx column and a column per model holding its
    preference over the baseline model-000 on each instruction (1 baseline, 2 model, 1.5 tie), drawn with
    the Bradley-Terry probability of a per-instruction skill gap."""
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    skill = rng.normal(0.0, 1.0, models)[None, 1:] + rng.normal(0.0, 1.0, (prompts, models - 1))
    win = rng.random((prompts, models - 1)) < 1.0 / (1.0 + np.exp(-(skill - rng.normal(0.0, 0.5, (prompts, 1)))))
    tie = rng.random((prompts, models - 1)) < 0.1
    preference = np.where(tie, 1.5, np.where(win, 2.0, 1.0))
    frame = pl.DataFrame({"instruction_idx": np.arange(prompts)})
    frame.with_columns([pl.Series(f"model-{m:03d}", preference[:, m - 1]) for m in range(1, models)]).write_csv(path)
    return path


def three_line_table(path: Path) -> Path:
    path.write_text("prompt_id,model_a,model_b,verdict\np1,x,y,A>B\np1,y,x,B>A\np2,x,y,A=B\n")
    return path


# ------------------------------------------------------------------------------------------ running


def run(command: list[str], timeout: float, cwd: Path, env: dict) -> Measured:
    """Wall seconds and peak RSS of one process (`_PeakRss`). Its output goes to a temporary file (a pipe
    nobody reads until the end would stop a command that prints a lot)."""
    with tempfile.TemporaryFile() as output:
        return _run(command, timeout, cwd, env, output)


def _run(command: list[str], timeout: float, cwd: Path, env: dict, output) -> Measured:
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
    )
    peak = _PeakRss(process.pid)
    deadline = start + timeout
    first_line = None
    while True:
        peak.sample()
        size = os.fstat(output.fileno()).st_size if first_line is None else 0
        if size and b"eqarena: " in os.pread(output.fileno(), size, 0):  # pread: the child's offset stays
            first_line = time.perf_counter() - start
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(process.pid, 9)
            _, status, usage = os.wait4(process.pid, 0)
            return Measured(time.perf_counter() - start, peak.mb(usage), False, "timeout")
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    ok = os.waitstatus_to_exitcode(status) == 0
    output.seek(0)
    lines = output.read().decode(errors="replace").strip().splitlines()
    return Measured(seconds, peak.mb(usage), ok, "" if ok else (lines[-1][:120] if lines else "no output"), first_line)


class _PeakRss:
    """A process's own peak RSS, from its VmHWM (Linux), sampled while it runs (the high-water mark holds
    every earlier peak, so a sample misses only growth in the last 50 ms before the exit). Not the
    ru_maxrss of os.wait4: Linux carries the parent's high-water mark into a child at fork and exec,
    which floors every case at this bench's own peak (some 700 MB once it has generated the data).
    Where there is no /proc, it falls back to ru_maxrss."""

    def __init__(self, pid: int):
        self.status, self.kib = Path(f"/proc/{pid}/status"), None

    def sample(self) -> None:
        try:
            text = self.status.read_text()
        except OSError:  # gone, or no /proc
            return
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                self.kib = max(self.kib or 0, int(line.split()[1]))

    def mb(self, usage) -> float:
        return usage.ru_maxrss / 1024 if self.kib is None else self.kib / 1024


# As `eqarena rate` runs it: two worker processes (a batched solve where the version has one and JAX
# runs on an accelerator), started first, so that they import while this process does (`rate` starts them
# before it assembles and solves the full data), with the persistent compilation cache the `eqarena`
# command sets up (so a version whose workers compile reads the compilations of an earlier run back, as
# `rate` would).
BOOTSTRAP_SNIPPET = """
if __name__ == "__main__":
    try:
        from eqarena.runtime.compile_cache import use_compile_cache
        use_compile_cache()
    except ImportError:  # a version from before the cache
        pass
    from eqarena.runtime.worker_pool import process_map
    try:
        from eqarena.runtime.worker_pool import prewarm_workers
        prewarm_workers(2)
    except ImportError:  # a version from before workers started ahead
        pass
    from eqarena.solvers import synthetic_king_tensor
    from eqarena.solvers.bootstrap.confidence import bootstrap_ratings
    u = synthetic_king_tensor(500, 17, seed=0)
    out = bootstrap_ratings(u, ["ne", "cce"], replicates=200, seed=0, schemes=("prompts",), map_units=process_map(2))
    print(max(r.diagnostics["max_exploitability"] for r in out))
"""


def case_commands(case: str, checkout: Path, work: Path) -> tuple[list[list[str]], list[str]]:
    """(set-up commands, the timed command) of a case."""
    eqarena = [str(checkout / ".venv" / "bin" / "eqarena")]
    python = str(checkout / ".venv" / "bin" / "python")
    db = work / f"{case}.duckdb"
    for stale in (db, Path(f"{db}.wal")):
        stale.unlink(missing_ok=True)
    small = score_table(work / "livebench-18x65.csv", 18, 65, empty=0.05, seed=1)
    big = score_table(work / "alpaca-805x200.csv", 805, 200, seed=2)
    with_db = ["--db", str(db)]
    if case == "battles-2M":
        return [], eqarena + ["import", "battles", str(battle_log(work / "battles-2M.parquet")), *with_db]
    if case == "battles-json-200k":
        return [], eqarena + ["import", "battles", str(fastchat_json_array(work / "clean_battle.json")), *with_db]
    if case == "scores-805x200":
        return [], eqarena + ["import", "scores", str(big), *with_db]
    if case == "rate-18x65":
        return [eqarena + ["import", "scores", str(small), *with_db]], eqarena + [
            "rate",
            "--missing",
            "impute",
            "--bootstrap",
            "0",
            *with_db,
        ]
    if case == "rate-default":
        return [eqarena + ["import", "scores", str(small), *with_db]], eqarena + [
            "rate",
            "--missing",
            "impute",
            *with_db,
        ]
    if case == "rate-805x200":
        return [eqarena + ["import", "scores", str(big), *with_db]], eqarena + ["rate", "--bootstrap", "0", *with_db]
    if case in ("pref-805x8", "pref-805x52"):
        models = 8 if case == "pref-805x8" else 52
        table = preference_table(work / f"preferences-805x{models}.csv", 805, models, seed=models)
        return [
            eqarena + ["import", "pairwise", "--layout", "preferences", "--baseline", "model-000", str(table), *with_db]
        ], eqarena + ["rate", "--missing", "impute", *with_db]
    if case == "boot-805x200":
        return [eqarena + ["import", "scores", str(big), *with_db]], eqarena + ["rate", *with_db]
    if case == "rate-log-2M":
        return [eqarena + ["import", "battles", str(battle_log(work / "battles-2M.parquet")), *with_db]], eqarena + [
            "rate",
            *with_db,
        ]
    if case == "boot-500x17":
        return [], [python, "-c", BOOTSTRAP_SNIPPET]
    if case in ("run-bundled", "run-first"):
        return [], eqarena + ["run", *with_db, "--out", str(work / "report")]
    if case == "import-3":
        return [], eqarena + ["import", "pairwise", str(three_line_table(work / "three.csv")), *with_db]
    raise ValueError(f"unknown case {case!r}")


def case_environment(case: str, work: Path, env: dict) -> dict:
    """The environment a case runs in: `run-first` starts from an empty compilation cache, as the first
    `eqarena run` after an install does (every other case keeps the compilations of earlier runs)."""
    if case != "run-first":
        return env
    cache = work / "jax-cache-first-run"
    shutil.rmtree(cache, ignore_errors=True)
    return {**env, "EQARENA_JAX_CACHE": str(cache)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="all", help="comma-separated case names, or all")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a case is stopped")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the eqarena checkout to time (its .venv)")
    parser.add_argument("--work", type=Path, default=None, help="where the data is generated (kept between runs)")
    args = parser.parse_args()
    names = [c.name for c in CASES] if args.cases == "all" else [c.strip() for c in args.cases.split(",")]
    unknown = [n for n in names if n not in {c.name for c in CASES}]
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    work = args.work or Path(tempfile.gettempdir()) / "eqarena-bench-scale"
    work.mkdir(parents=True, exist_ok=True)
    checkout = args.checkout.resolve()
    env = {**os.environ, "PREFECT_HOME": str(work / "prefect-home"), "EQARENA_DB": str(work / "default.duckdb")}
    env.pop("PREFECT_API_URL", None)

    print(f"eqarena at {checkout} ({_revision(checkout)}), {os.cpu_count()} CPUs, data in {work}")
    print()
    print(f"{'case':<15} {'what':<62} {'goal s':>7} {'wall s':>8} {'peak MB':>8} {'1st line':>8}  result")
    for case in (c for c in CASES if c.name in names):
        setup, command = case_commands(case.name, checkout, work)
        failed = next((m for m in (run(s, args.timeout, checkout, env) for s in setup) if not m.ok), None)
        if failed is not None:
            print(
                f"{case.name:<15} {case.what:<62} {case.goal_s:>7g} {'-':>8} {'-':>8} {'-':>8}  "
                f"set-up failed: {failed.note}"
            )
            continue
        measured = run(command, args.timeout, checkout, case_environment(case.name, work, env))
        wall = f"> {args.timeout:g}" if measured.note == "timeout" else f"{measured.seconds:.1f}"
        met = (
            measured.ok
            and measured.seconds <= case.goal_s
            and (case.goal_rss_mb is None or measured.rss_mb <= case.goal_rss_mb)
        )
        result = "meets goal" if met else ("slower than goal" if measured.ok else f"failed: {measured.note}")
        goal = f"{case.goal_s:g}" + (f"/{case.goal_rss_mb / 1024:g}G" if case.goal_rss_mb else "")
        first = "-" if measured.first_line_s is None else f"{measured.first_line_s:.1f}"
        print(
            f"{case.name:<15} {case.what:<62} {goal:>7} {wall:>8} {measured.rss_mb:>8.0f} {first:>8}  {result}",
            flush=True,
        )
    shutil.rmtree(work / "report", ignore_errors=True)


def _revision(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown revision"


if __name__ == "__main__":
    sys.exit(main())
