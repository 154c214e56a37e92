"""Bootstrap replicates of an equilibrium method solved as batches: CCE methods by `solvers.cce.batched`,
NE methods by `solvers.nash.batched`; all replicates at once (`bootstrap_ratings(batched=True)`) or a
worker's unit of them (`ReplicateSolver.batch_units`).

NE: each replicate is its distinct-prompt game (`replicates.replicate_game`) padded to the full
prompt count, with the target `nash` gives it; a replicate `nash` would retrace is retraced on the
lanes too (`batched_nash`), so none needs a one-by-one solve.

CCE:

"prompts": every replicate keeps the full tensor u_king and gives its absent prompts target mass 0
(log-target -inf), which is the game of its distinct prompts (`replicates.replicate_game`): the
affinity target is that of the distinct-prompt game, the uniform target weights prompts by copies.
"judgments": one tensor per replicate. All replicates start from the full data's multipliers
(exact: the CCE is unique). A replicate the batch does not solve to `cce`'s tolerance, or whose
exploitability exceeds `GUARANTEE`, is re-solved by `replicates.solve_king_ratings`.
"""

from __future__ import annotations

import numpy as np

from eqarena.methods import NASH, get_method
from eqarena.solvers._rows import identical_rows
from eqarena.solvers.bootstrap.replicates import prompt_replicate, replicate_game, solve_king_ratings
from eqarena.solvers.cce.batched import batched_cce
from eqarena.solvers.cce.dual import bucket
from eqarena.solvers.games.entropy import affinity_targets
from eqarena.solvers.games.normal_form import KING, koth_game
from eqarena.solvers.nash.batched import KEPT_ROWS_FROM, LANES, batched_nash
from eqarena.solvers.nash.limiting_logit import selection_targets

GUARANTEE = 1e-6
GROUP = 32  # replicates per batch
_UNIT_MAX_MODELS = 200  # `batches_pay`
_UNIT_MAX_CELLS = 2_000_000  # ... and its memory bound: a unit of 24 such replicates holds 384 MB of tensors
# A single lane on a game of `KEPT_ROWS_FROM` cells or more pads its games to a multiple of this many prompts
# (`_cce_dual.bucket`): an attempt on all rows costs about as much as its rows, and each size compiles once.
# 500-prompt replicates (~316 distinct prompts, at most ~335 in a unit of 24) pad to 352. On smaller games an
# attempt costs about the same on any rows, so every replicate pads to the full data's prompts: both schemes
# then run one lane program, which one worker compiles and the other reads back (`batched_nash`). Bundled
# data (80 x 5), prompt replicates, per replicate: 9.5-10.6 ms CPU padded to 80 prompts, 9.8-11.1 to 64.
_LANE_PROMPTS_QUANTUM = 32


def batched_replicates(solver, method: str, scheme: str, replicates: int | range) -> tuple[np.ndarray, np.ndarray, int]:
    """King ratings (n, M) and exploitability (n,) of the replicates of `scheme` (0..B-1 for an int B,
    else those of the range: a worker's unit) under the CCE or NE `method` ("affinity" or "uniform"
    target), and how many needed the one-by-one fallback."""
    indices = range(replicates) if isinstance(replicates, int) else replicates
    u = solver.u_king
    if get_method(method).concept == NASH:
        # A worker's unit on one lane, not vmapped: its attempts branch (`_batched_trace._attempt`) and
        # no lane idles until the longest trace ends.
        lanes = LANES if isinstance(replicates, int) else 1
        return batched_nash_ratings(method, [solver.game(scheme, b) for b in indices], len(u), lanes)
    p, m, _ = u.shape
    target = get_method(method).target
    warm = _reference_multipliers(u, target)
    ratings, expl = np.zeros((len(indices), m)), np.zeros(len(indices))
    fallback = 0
    slices = scheme == "prompts" and getattr(solver, "source", None) is None  # replicates draw u's prompt slices
    if slices:
        first, content = identical_rows(u.reshape(p, -1))
    for start in range(0, len(indices), GROUP):
        block = indices[start : start + GROUP]
        if slices:
            tensors = u
            logs = [_prompt_log_targets(u, first, content, prompt_replicate(p, solver.seed, b), target) for b in block]
        else:
            games = [replicate_game(method, solver.game(scheme, b)) for b in block]
            tensors = np.zeros((len(games), p, m, m))
            logs = []
            for k, (ub, tb) in enumerate(games):
                tensors[k, : len(ub)] = ub
                logs.append(_log_targets(ub, tb, p))
        log_targets = [np.stack([lt[i] for lt in logs]) for i in range(3)]
        out = batched_cce(tensors, log_targets, warm=warm)
        for k, b in enumerate(block):
            if out.ok[k] and out.exploitability[k] <= GUARANTEE:
                ratings[start + k], expl[start + k] = out.ratings[k], out.exploitability[k]
            else:
                fallback += 1
                ratings[start + k], expl[start + k] = solve_king_ratings(
                    method, solver.game(scheme, b), solver.start(method, scheme, b)
                )
    return ratings, expl, fallback


def batched_nash_ratings(method: str, tensors, prompts: int, lanes: int = LANES) -> tuple[np.ndarray, np.ndarray, int]:
    """King ratings (n, M) and exploitability (n,) of the NE `method` on each tensor (P_b <= `prompts`,
    M, M), solved as one batch on their distinct prompts (`replicates.replicate_game`), and how many
    needed the one-by-one fallback (none: the lanes retrace as `nash` does)."""
    m = tensors[0].shape[1]
    ratings, expl = np.zeros((len(tensors), m)), np.zeros(len(tensors))
    games, targets = [], []
    for tensor in tensors:
        ub, target = replicate_game(method, tensor)
        games.append(koth_game(ub))
        targets.append(selection_targets(games[-1], target))
    for b, end in enumerate(batched_nash(games, targets, prompts=lane_prompts(games, prompts, lanes), lanes=lanes)):
        ratings[b], expl[b] = end.ratings[KING], end.exploitability
    return ratings, expl, 0


def lane_prompts(games, prompts: int, lanes: int) -> int:
    """The prompts every game's tensor is padded to on the lanes: a single lane on a big game pads to a
    bucket of its games' distinct prompts (`_LANE_PROMPTS_QUANTUM`), else to the full data's `prompts`."""
    m = games[0].num_actions[1]
    if lanes == 1 and prompts * m * m >= KEPT_ROWS_FROM:
        return min(prompts, bucket(max(g.num_actions[0] for g in games), _LANE_PROMPTS_QUANTUM))
    return prompts


def batches_pay(shape) -> bool:
    """Whether a worker's unit of NE replicates of a (P, M, M) game is solved faster as one batch (on
    one lane: `batched_nash`, not vmapped) than one by one on this machine's CPU: up to 200 models, the
    largest measured. Measured per replicate, compiled, one process with a worker's heap settings (up to
    24 prompt replicates), lane against one by one: 80 x 5 8 against 19 ms, 40 x 20 23 against 55,
    300 x 8 18 against 47, 500 x 17 47 against 87, 805 x 12 30 against 47, 100 x 40 74 against 107,
    50 x 64 80 against 123, 18 x 65 48 against 94, 50 x 80 136 against 198, 50 x 100 317 against 420,
    50 x 140 406 against 665, 40 x 200 1529 against 2549 (the lane's late attempts run on 16 rows).
    CCE units stay one by one (their batches compile for every batch size and lose). A unit's lane holds
    its replicates' tensors at once, so games over `_UNIT_MAX_CELLS` cells (P x M x M) are solved one by
    one: 24 replicates of an 805 x 200 game are 6 GB per worker."""
    p, m = shape[0], shape[1]
    return m <= _UNIT_MAX_MODELS and p * m * m <= _UNIT_MAX_CELLS


def _reference_multipliers(u, target):
    """The full data's dual multipliers (prompt (P,), king (M,), rebel (M,)), the replicates' start."""
    p = len(u)
    logs = _log_targets(u, target, p)
    ref = batched_cce(u, [v[None] for v in logs])
    return ref.alpha_prompt[0], ref.alpha_king[0], ref.alpha_rebel[0]


def _log_targets(u, target, p):
    """Log-targets of the game u (n <= p prompts), the prompt one padded to p with -inf."""
    if isinstance(target, str):
        if target == "affinity":
            targets = affinity_targets(koth_game(u))
        else:
            targets = [np.full(n, 1.0 / n) for n in u.shape]
    else:
        targets = [np.asarray(t, dtype=np.float64) / np.sum(t) for t in target]
    with np.errstate(divide="ignore"):
        logs = [np.log(t) for t in targets]
    logs[0] = np.concatenate([logs[0], np.full(p - len(logs[0]), -np.inf)])
    return logs


def _prompt_log_targets(u, first, content, idx, target):
    """Log-targets of a prompt replicate on the full tensor: its distinct prompts (one per content)
    carry the distinct-prompt game's target, every other prompt -inf."""
    p = len(u)
    counts = np.bincount(content[idx], minlength=len(first))
    present = np.flatnonzero(counts)
    reps = first[present]
    order = np.argsort(reps)
    reps, present = reps[order], present[order]
    if target == "affinity":
        logs = _log_targets(u[reps], "affinity", len(reps))
    else:
        m = u.shape[1]
        logs = _log_targets(u[reps], [counts[present], np.ones(m), np.ones(m)], len(reps))
    log_tp = np.full(p, -np.inf)
    log_tp[reps] = logs[0]
    return [log_tp, logs[1], logs[2]]
