"""Benchmark: does `--missing impute` keep the NE ranking of a sparse tensor? Synthetic games, many seeds.

    uv run python bench/impute.py [--seeds 50] [--sizes 100x8,500x17] [--sparsity 0.3] [--no-noise-sweep]
        [--no-noiseless] [--sweep]

Per seed and size P x M: u = synthetic_king_tensor(P, M, seed); a uniformly random `--sparsity` share of
the unordered (prompt, model pair) cells is hidden (mirrored, so the mask stays symmetric) and filled
by each variant: prompt-wise Bradley-Terry with its default shrinkage="auto" (chosen per game by
cross-validation over solvers.sparse.imputation.AUTO_GRID; the mean chosen value is printed under each table)
and with the former fixed default 0.125 for comparison, global Bradley-Terry (shrinkage inf: delta = 0)
and, as a naive reference, 0; three reference rows use the
generating model: its expected payoff tanh(gap / 2), fresh 8-verdict judgments of the hidden cells, and
fresh judgments of every cell (the complete game's own reproducibility). The king's NE ratings
(affinity-selected LLE, `solvers.nash.limiting_logit`, as the rate flow computes them) of the filled game are
compared with those of the complete game: top-3 = the models of dense rank <= 3 (ties within 1e-4
share a rank, `solvers.analyses.clones.dense_ranks`), top-1 likewise, Kendall's tau-b of the ratings
(scipy.stats.kendalltau), and the RMSE of the filled cells against the hidden true values.

Two more tables follow. Noise sweep (on by default, `--no-noise-sweep` skips it): at P = 100, M = 8 and
the same hiding, the verdicts per cell (`synthetic_king_tensor(judgments=)`, prompt_noise 1) take the
values 8, 32 and 128; prompt-wise BT (auto shrinkage, and the fixed 0.125 tuned at 8 verdicts) against the two
ceilings "oracle: true E[u]" and "re-judge every cell" (fresh draws with as many verdicts), showing how
recovery grows as the complete game's NE stops being decided by judging noise. Real data: the PRD
Vicuna-80 judgments bundled in eqarena/datasets/seeds/vicuna80 (80 prompts x 5 models, complete), read with
tasks.bundled.read_bundle into a temporary DuckDB and assembled by warehouse.tensor.assemble_tensor as
the rate flow does, for judge prd:gpt4 and for the five prd:* judges pooled; the same hiding per seed,
and the same comparison of the filled game's NE king ratings with the complete game's (no oracle rows:
the generating model is unknown; RMSE is against the hidden judged values).
A table without judging noise (on by default, `--no-noiseless` skips it) runs the imputations on the
expected game u = tanh(gap / 2) at each size: there the complete game's NE ranking is not decided by
judging noise, so it shows what the filling itself keeps of it.
`--sweep` instead prints the held-out RMSE of prompt-wise BT over a grid of shrinkage values (how the
former fixed default 0.125 was chosen).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

# Reference rows that use the generating model (not available on real data): they bound what any
# imputation can reach, and the last one shows how reproducible the complete data's NE ranks are at all.
REFERENCES = ("oracle: true E[u] = tanh(gap/2)", "oracle: re-judge hidden cells", "re-judge every cell (no hiding)")
SWEEP_GRID = (0.03, 0.05, 0.08, 0.1, 0.125, 0.15, 0.2, 0.3, 0.5, 1.0, 3.0)
# Noise sweep: verdicts per cell at one size; its rows (name prefixes of run_size's variants).
NOISE_LEVELS = (8, 32, 128)
NOISE_SIZE = (100, 8)
NOISE_ROWS = ("prompt-wise BT", "oracle: true E[u]", "re-judge every cell")
REAL_DATASET = "vicuna80"
# Prompt-wise BT rows: the default (shrinkage="auto", cross-validated per game) and the former fixed default.
AUTO_ROW = "prompt-wise BT (auto shrinkage)"
FIXED_SHRINKAGE = 0.125
FIXED_ROW = f"prompt-wise BT (shrinkage {FIXED_SHRINKAGE:g})"


def hide_cells(num_prompts: int, num_models: int, sparsity: float, seed: int) -> np.ndarray:
    """(P, M, M) bool, symmetric: round(sparsity * P * M (M - 1) / 2) unordered cells, uniformly at random."""
    iu, ju = np.triu_indices(num_models, k=1)
    cells = num_prompts * len(iu)
    rng = np.random.default_rng([seed, 1])
    pick = rng.choice(cells, size=round(sparsity * cells), replace=False)
    hidden = np.zeros((num_prompts, num_models, num_models), dtype=bool)
    p, k = np.divmod(pick, len(iu))
    hidden[p, iu[k], ju[k]] = True
    return hidden | np.swapaxes(hidden, 1, 2)


def shrinkage_note(chosen: list[float]) -> str:
    """The shrinkage auto chose: mean, geometric mean and range over the seeds."""
    if not chosen:
        return "auto shrinkage: no successful fit"
    values = np.asarray(chosen, dtype=np.float64)
    return (
        f"auto shrinkage chosen: mean {values.mean():.3g}, geometric mean {np.exp(np.mean(np.log(values))):.3g}, "
        f"min {values.min():g}, max {values.max():g} over {values.size} seeds"
    )


def fill_zero(u_sparse: np.ndarray, covered: np.ndarray) -> np.ndarray:
    return np.where(covered, u_sparse, 0.0)


def synthetic_truth(num_prompts: int, num_models: int, seed: int, judgments: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """synthetic_king_tensor(P, M, seed, judgments) (prompt_noise 1) and its skill gaps (P, M, M).

    Replays the generator's draws to recover the gaps; checked against the real tensor, so a change
    to eqarena/solvers/toys/games.py fails here instead of giving a silently wrong oracle.
    """
    from eqarena.solvers.toys.games import synthetic_king_tensor

    u = synthetic_king_tensor(num_prompts, num_models, seed=seed, judgments=judgments)
    rng = np.random.default_rng(seed)
    skill = rng.normal(size=num_models)[None, :] + rng.normal(size=(num_prompts, num_models))
    gap = skill[:, :, None] - skill[:, None, :]
    if not np.array_equal(judge(gap, rng, judgments), u):
        raise RuntimeError("synthetic_truth no longer replays synthetic_king_tensor; update it")
    return u, gap


def judge(gap: np.ndarray, rng: np.random.Generator, verdicts: int = 8) -> np.ndarray:
    """A fresh antisymmetric tensor of `verdicts`-verdict means, +1/-1 with the BT probability of `gap`."""
    win = rng.binomial(verdicts, 1.0 / (1.0 + np.exp(-gap))) / verdicts
    upper = np.triu(2.0 * win - 1.0, k=1)
    return upper - np.swapaxes(upper, 1, 2)


def king_ratings(u_king: np.ndarray) -> tuple[np.ndarray, float]:
    from eqarena.solvers import koth_game, nash
    from eqarena.solvers.games.normal_form import KING

    start = time.perf_counter()
    eq = nash(koth_game(u_king))
    return np.asarray(eq.ratings[KING], dtype=np.float64), time.perf_counter() - start


def score_filled(
    stats: dict, filled: np.ndarray, u: np.ndarray, upper: np.ndarray, ref: np.ndarray, ref_ranks: np.ndarray
) -> float:
    """Append the filled game's RMSE on the hidden cells and its NE ranking's agreement with the complete
    game's (top-3 set, top-1 set, Kendall tau) to `stats`; returns the NE solve's seconds."""
    from scipy.stats import kendalltau

    from eqarena.solvers.analyses.clones import dense_ranks

    stats["rmse"].append(float(np.sqrt(np.mean((filled[upper] - u[upper]) ** 2))))
    ratings, ne_seconds = king_ratings(filled)
    ranks = dense_ranks(ratings)
    stats["top3"].append(np.array_equal(ranks <= 3, ref_ranks <= 3))
    stats["top1"].append(np.array_equal(ranks == 1, ref_ranks == 1))
    stats["tau"].append(float(kendalltau(ref, ratings).statistic))
    return ne_seconds


def run_size(
    num_prompts: int,
    num_models: int,
    seeds: int,
    sparsity: float,
    judgments: int = 8,
    only: tuple[str, ...] | None = None,
    noiseless: bool = False,
) -> tuple[list[tuple], dict]:
    """One table block: per variant (name, top-3 share, top-1 share, tau, impute s, RMSE, NE s, failures).

    judgments: verdicts per cell of the game and of the re-judge rows; only: run just the variants whose
    names start with one of these (each keeps its own random stream, so shared rows agree across calls);
    noiseless: the game is the expected payoffs tanh(gap / 2) themselves (no judging noise).
    """

    from eqarena.solvers.analyses.clones import dense_ranks
    from eqarena.solvers.sparse.imputation import ImputationError, ImputedTensor, impute_payoffs

    # fill(u_sparse, covered, gap, rng) -> complete tensor (or an ImputedTensor, whose shrinkage is recorded);
    # the last three rows know the generating model.
    variants = {
        AUTO_ROW: lambda u, c, g, r: impute_payoffs(u, c),
        FIXED_ROW: lambda u, c, g, r: impute_payoffs(u, c, shrinkage=FIXED_SHRINKAGE).u_king,
        "global BT (shrinkage inf)": lambda u, c, g, r: impute_payoffs(u, c, shrinkage=math.inf).u_king,
        "fill 0 (naive reference)": lambda u, c, g, r: fill_zero(u, c),
        "oracle: true E[u] = tanh(gap/2)": lambda u, c, g, r: np.where(c, u, np.tanh(g / 2.0)),
        "oracle: re-judge hidden cells": lambda u, c, g, r: np.where(c, u, judge(g, r, judgments)),
        "re-judge every cell (no hiding)": lambda u, c, g, r: judge(g, r, judgments),
    }
    keep = {name for name in variants if only is None or name.startswith(only)}
    stats = {
        name: {"top3": [], "top1": [], "tau": [], "impute": [], "rmse": [], "ne": [], "fail": 0} for name in variants
    }
    info = {"top3_size": [], "pure_king": [], "ne": [], "shrinkage": []}
    for seed in range(seeds):
        u, gap = synthetic_truth(num_prompts, num_models, seed, judgments)
        if noiseless:
            u = np.tanh(gap / 2.0)
        hidden = hide_cells(num_prompts, num_models, sparsity, seed)
        covered = ~hidden
        u_sparse = np.where(covered, u, np.nan)
        ref, ne_seconds = king_ratings(u)
        ref_ranks = dense_ranks(ref)
        info["top3_size"].append(int(np.sum(ref_ranks <= 3)))
        info["pure_king"].append(int(np.sum(ref_ranks == 1)) == 1)
        info["ne"].append(ne_seconds)
        upper = np.triu(hidden, k=1)
        for k, (name, fill) in enumerate(variants.items()):
            if name not in keep:
                continue
            s = stats[name]
            rng = np.random.default_rng([seed, 2, k])
            start = time.perf_counter()
            try:
                filled = fill(u_sparse, covered, gap, rng)
            except ImputationError:
                s["fail"] += 1
                continue
            s["impute"].append(time.perf_counter() - start)
            if isinstance(filled, ImputedTensor):
                info["shrinkage"].append(filled.shrinkage)
                filled = filled.u_king
            s["ne"].append(score_filled(s, filled, u, upper, ref, ref_ranks))
    rows = []
    for name, s in stats.items():
        if name not in keep:
            continue
        n = max(len(s["top3"]), 1)
        rows.append(
            (
                name,
                sum(s["top3"]) / n,
                sum(s["top1"]) / n,
                float(np.nanmean(s["tau"] or [np.nan])),
                float(np.mean(s["impute"] or [np.nan])),
                float(np.mean(s["rmse"] or [np.nan])),
                float(np.mean(s["ne"] or [np.nan])),
                s["fail"],
            )
        )
    return rows, info


def noiseless_table(sizes, seeds: int, sparsity: float) -> None:
    """Table: the imputations on the expected game u = tanh(gap / 2) (no judging noise), per size: how much
    of the complete game's NE ranking the filling itself keeps when the complete ranking is not noise."""
    start = time.perf_counter()
    only = (AUTO_ROW, FIXED_ROW, "global BT", "fill 0")
    blocks = [(p, m, *run_size(p, m, seeds, sparsity, only=only, noiseless=True)) for p, m in sizes]
    seconds = time.perf_counter() - start
    print(
        f"\nwithout judging noise: the game is the expected payoffs tanh(gap / 2) of the same generator "
        f"(infinitely many verdicts), seeds 0..{seeds - 1}, {sparsity:.0%} hidden ({seconds:.0f} s)"
    )
    header = f"{'P x M':>8}  {'variant':<32}  {'top-3 =':>7}  {'top-1 =':>7}  {'tau':>6}  {'RMSE':>6}  {'errors':>6}"
    print(header)
    print("-" * len(header))
    for num_prompts, num_models, rows, info in blocks:
        for k, (name, top3, top1, tau, _imp, rmse, _ne, fail) in enumerate(rows):
            size = f"{num_prompts}x{num_models}" if k == 0 else ""
            print(f"{size:>8}  {name:<32}  {top3:7.0%}  {top1:7.0%}  {tau:6.3f}  {rmse:6.3f}  {fail:>6}")
        print(f"{'':>8}  {shrinkage_note(info['shrinkage'])}")


def noise_sweep(seeds: int, sparsity: float) -> None:
    """Table: prompt-wise BT and the two ceilings at NOISE_SIZE for each verdict count in NOISE_LEVELS."""
    num_prompts, num_models = NOISE_SIZE
    start = time.perf_counter()
    blocks = []
    for level in NOISE_LEVELS:
        rows, info = run_size(num_prompts, num_models, seeds, sparsity, judgments=level, only=NOISE_ROWS)
        blocks.append((level, rows, info))
    print(
        f"\nnoise sweep: synthetic_king_tensor(P = {num_prompts}, M = {num_models}, seed, judgments = verdicts per "
        f"cell, prompt_noise 1), seeds 0..{seeds - 1}, {sparsity:.0%} hidden; prompt-wise BT with auto and "
        f"fixed shrinkage; re-judge rows draw as many verdicts as the game ({time.perf_counter() - start:.0f} s)"
    )
    header = (
        f"{'verdicts':>8}  {'top-3 size':>10}  {'1 king':>6}  {'variant':<32}  {'top-3 =':>7}  {'top-1 =':>7}  "
        f"{'tau':>6}  {'errors':>6}"
    )
    print(header)
    print("-" * len(header))
    for level, rows, info in blocks:
        for k, (name, top3, top1, tau, _imp, _rmse, _ne, fail) in enumerate(rows):
            lead = (
                f"{level:>8}  {np.mean(info['top3_size']):10.2f}  {np.mean(info['pure_king']):6.0%}"
                if k == 0
                else " " * 28
            )
            print(f"{lead}  {name:<32}  {top3:7.0%}  {top1:7.0%}  {tau:6.3f}  {fail:>6}")
    for level, _rows, info in blocks:
        print(f"{level} verdicts: {shrinkage_note(info['shrinkage'])}")
    print(
        "top-3 size: mean number of models of dense rank <= 3 in the complete game; 1 king: share of seeds "
        "with a single rank-1 model"
    )


def load_prd_tensors() -> list[tuple[str, tuple[str, ...], np.ndarray]]:
    """(label, models, u_king) of the bundled PRD Vicuna-80 judgments: judge prd:gpt4 and all prd:* pooled.

    The bundle is read and written to a temporary DuckDB (tasks.ingest.write_dataset run as a plain
    function, without Prefect) and assembled with warehouse.tensor.assemble_tensor, as the rate flow does.
    """
    from eqarena import warehouse
    from eqarena.datasets.bundled import read_bundle, seed_dir
    from eqarena.tasks.ingest import write_dataset
    from eqarena.warehouse.tensor import assemble_tensor, available_judges

    directory = seed_dir(REAL_DATASET)
    if directory is None:
        raise RuntimeError(f"bundled dataset {REAL_DATASET!r} not found in eqarena/datasets/seeds/")
    data = read_bundle(directory)
    out = []
    with tempfile.TemporaryDirectory(prefix="eqarena-bench-") as tmp:
        db = str(Path(tmp) / "bench.duckdb")
        write_dataset.fn(db, data, False, "bench-impute")
        con = warehouse.connect(db, read_only=True)
        try:
            prd = [j for j in available_judges(con, REAL_DATASET) if j.startswith("prd:")]
            for label, judges in (("prd:gpt4", ["prd:gpt4"]), (f"{len(prd)} prd:* judges pooled", prd)):
                tensor = assemble_tensor(con, REAL_DATASET, judges)
                if not tensor.complete:
                    raise RuntimeError(f"{REAL_DATASET} / {label}: the tensor is not complete")
                out.append((label, tensor.models, tensor.u_king))
        finally:
            con.close()
    return out


def run_real(u: np.ndarray, seeds: int, sparsity: float) -> tuple[list[tuple], np.ndarray, list[float]]:
    """Per variant (name, top-3 share, top-1 share, tau, impute s, RMSE, failures); the complete game's ratings;
    the shrinkage auto chose per seed."""

    from eqarena.solvers.analyses.clones import dense_ranks
    from eqarena.solvers.sparse.imputation import ImputationError, ImputedTensor, impute_payoffs

    variants = {
        AUTO_ROW: lambda u, c: impute_payoffs(u, c),
        FIXED_ROW: lambda u, c: impute_payoffs(u, c, shrinkage=FIXED_SHRINKAGE).u_king,
        "global BT (shrinkage inf)": lambda u, c: impute_payoffs(u, c, shrinkage=math.inf).u_king,
        "fill 0 (naive reference)": fill_zero,
    }
    num_prompts, num_models, _ = u.shape
    ref, _ = king_ratings(u)
    ref_ranks = dense_ranks(ref)
    stats = {name: {"top3": [], "top1": [], "tau": [], "impute": [], "rmse": [], "fail": 0} for name in variants}
    chosen = []
    for seed in range(seeds):
        hidden = hide_cells(num_prompts, num_models, sparsity, seed)
        covered = ~hidden
        u_sparse = np.where(covered, u, np.nan)
        upper = np.triu(hidden, k=1)
        for name, fill in variants.items():
            s = stats[name]
            start = time.perf_counter()
            try:
                filled = fill(u_sparse, covered)
            except ImputationError:
                s["fail"] += 1
                continue
            s["impute"].append(time.perf_counter() - start)
            if isinstance(filled, ImputedTensor):
                chosen.append(filled.shrinkage)
                filled = filled.u_king
            score_filled(s, filled, u, upper, ref, ref_ranks)
    rows = []
    for name, s in stats.items():
        n = max(len(s["top3"]), 1)
        rows.append(
            (
                name,
                sum(s["top3"]) / n,
                sum(s["top1"]) / n,
                float(np.nanmean(s["tau"] or [np.nan])),
                float(np.mean(s["impute"] or [np.nan])),
                float(np.mean(s["rmse"] or [np.nan])),
                s["fail"],
            )
        )
    return rows, ref, chosen


def real_data(seeds: int, sparsity: float) -> None:
    from eqarena.solvers.analyses.clones import dense_ranks

    start = time.perf_counter()
    games = load_prd_tensors()
    blocks = [(label, models, u, *run_real(u, seeds, sparsity)) for label, models, u in games]
    num_prompts, num_models, _ = games[0][2].shape
    print(
        f"\nreal data: PRD {REAL_DATASET} judgments bundled in eqarena/datasets/seeds/{REAL_DATASET} (complete, "
        f"{num_prompts} prompts x M = {num_models} models), seeds 0..{seeds - 1}, {sparsity:.0%} of the unordered "
        f"(prompt, pair) cells hidden; NE king ratings of the filled game vs the complete game "
        f"({time.perf_counter() - start:.0f} s)"
    )
    header = (
        f"{'variant':<32}  {'top-3 =':>7}  {'top-1 =':>7}  {'tau':>6}  {'impute ms':>9}  {'RMSE':>6}  {'errors':>6}"
    )
    for label, models, _u, rows, ref, chosen in blocks:
        ranks = dense_ranks(ref)
        listing = ", ".join(f"{models[i]} {ref[i]:.3f} ({ranks[i]})" for i in np.argsort(-ref, kind="stable"))
        print(f"\n{label}, M = {num_models} models: complete-data NE king ratings (dense rank): {listing}")
        print(header)
        print("-" * len(header))
        for name, top3, top1, tau, imp, rmse, fail in rows:
            print(f"{name:<32}  {top3:7.0%}  {top1:7.0%}  {tau:6.3f}  {1e3 * imp:9.1f}  {rmse:6.3f}  {fail:>6}")
        print(shrinkage_note(chosen))
    print(
        f"\nwith M = {num_models}, top-3 = also means the bottom {num_models - 3} are right (if no ties); tau over "
        f"{num_models} ratings; RMSE: filled cells vs the hidden judged values"
    )


def sweep(sizes, seeds: int, sparsity: float) -> None:
    from eqarena.solvers.sparse.imputation import impute_payoffs
    from eqarena.solvers.toys.games import synthetic_king_tensor

    print(f"held-out RMSE of prompt-wise BT by shrinkage ({seeds} seeds, {sparsity:.0%} hidden; min marked *)")
    print(f"{'P x M':>8}  " + "  ".join(f"{lam:>6g} " for lam in SWEEP_GRID))
    for num_prompts, num_models in sizes:
        sq = np.zeros(len(SWEEP_GRID))
        for seed in range(seeds):
            u = synthetic_king_tensor(num_prompts, num_models, seed=seed)
            hidden = hide_cells(num_prompts, num_models, sparsity, seed)
            upper = np.triu(hidden, k=1)
            u_sparse = np.where(hidden, np.nan, u)
            for k, lam in enumerate(SWEEP_GRID):
                filled = impute_payoffs(u_sparse, ~hidden, shrinkage=lam).u_king
                sq[k] += np.mean((filled[upper] - u[upper]) ** 2)
        rmse = np.sqrt(sq / seeds)
        best = int(np.argmin(rmse))
        cells = "  ".join(f"{r:6.4f}{'*' if k == best else ' '}" for k, r in enumerate(rmse))
        print(f"{f'{num_prompts} x {num_models}':>8}  {cells}")


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for item in text.split(","):
        p, _, m = item.strip().lower().partition("x")
        sizes.append((int(p), int(m)))
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--sizes", default="100x8,500x17", help="comma-separated PxM")
    parser.add_argument("--sparsity", type=float, default=0.3, help="share of unordered cells hidden")
    parser.add_argument(
        "--noise-sweep",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"the verdicts-per-cell table at {NOISE_SIZE[0]}x{NOISE_SIZE[1]} (default: on)",
    )
    parser.add_argument(
        "--noiseless",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the table on the expected game, without judging noise (default: on)",
    )
    parser.add_argument("--sweep", action="store_true", help="held-out RMSE over a shrinkage grid instead")
    args = parser.parse_args()
    sizes = parse_sizes(args.sizes)
    command = (
        f"uv run --frozen --no-sync python bench/impute.py --seeds {args.seeds} --sizes {args.sizes} "
        f"--sparsity {args.sparsity:g}"
        + (" --sweep" if args.sweep else " --noise-sweep" if args.noise_sweep else " --no-noise-sweep")
        + ("" if args.sweep else " --noiseless" if args.noiseless else " --no-noiseless")
    )
    start = time.perf_counter()
    if args.sweep:
        sweep(sizes, args.seeds, args.sparsity)
        print(f"\n{command}\n(total {time.perf_counter() - start:.0f} s)")
        return

    header = (
        f"{'variant':<32}  {'top-3 =':>7}  {'top-1 =':>7}  {'tau':>6}  {'impute ms':>9}  {'RMSE':>6}  "
        f"{'NE s':>5}  {'errors':>6}"
    )
    blocks = []
    for num_prompts, num_models in sizes:
        rows, info = run_size(num_prompts, num_models, args.seeds, args.sparsity)
        blocks.append((num_prompts, num_models, rows, info))
    print(
        f"\neqarena --missing impute benchmark: synthetic_king_tensor(P, M, seed), seeds 0..{args.seeds - 1}, "
        f"{args.sparsity:.0%} of the unordered (prompt, pair) cells hidden; NE (affinity LLE) king ratings "
        "of the filled game vs the complete game"
    )
    for num_prompts, num_models, rows, info in blocks:
        print(
            f"\nP = {num_prompts}, M = {num_models}: complete-data top-3 set has {np.mean(info['top3_size']):.2f} "
            f"models on average; a single rank-1 model in {np.mean(info['pure_king']):.0%} of seeds; "
            f"complete-data NE {np.mean(info['ne']):.2f} s"
        )
        print(header)
        print("-" * len(header))
        for name, top3, top1, tau, imp, rmse, ne, fail in rows:
            ms = "-" if name in REFERENCES else f"{1e3 * imp:.1f}"
            print(f"{name:<32}  {top3:7.0%}  {top1:7.0%}  {tau:6.3f}  {ms:>9}  {rmse:6.3f}  {ne:5.2f}  {fail:>6}")
        print(shrinkage_note(info["shrinkage"]))
    if args.noiseless:
        noiseless_table(sizes, args.seeds, args.sparsity)
    print(
        "\ntop-3 = / top-1 =: share of seeds whose set of models with dense rank <= 3 (== 1) equals the "
        "complete data's;\ntau: mean Kendall tau-b of the king ratings vs the complete data's; RMSE: filled "
        "cells vs the hidden true values;\nNE s: mean NE solve time; oracle / re-judge rows use the generating "
        "BT model (fresh 8-verdict draws), unavailable on real data"
    )
    if args.noise_sweep:
        noise_sweep(args.seeds, args.sparsity)
    real_data(args.seeds, args.sparsity)
    print(f"\n{command}\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
