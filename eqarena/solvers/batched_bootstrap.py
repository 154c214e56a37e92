"""Bootstrap replicates of a CCE method solved as batches (`solvers.batched`).

"prompts": every replicate keeps the full tensor u_king and gives its absent prompts target mass 0
(log-target -inf), which is the game of its distinct prompts (`replicates.replicate_game`): the
affinity target is that of the distinct-prompt game, the uniform target weights prompts by copies.
"judgments": one tensor per replicate. All replicates start from the full data's multipliers
(exact: the CCE is unique). A replicate the batch does not solve to `cce`'s tolerance, or whose
exploitability exceeds `GUARANTEE`, is re-solved by `replicates.solve_king_ratings`.
"""

from __future__ import annotations

import numpy as np

from eqarena.methods import get_method
from eqarena.solvers.batched import batched_cce
from eqarena.solvers.entropy import affinity_targets
from eqarena.solvers.games import koth_game
from eqarena.solvers.replicates import prompt_replicate, replicate_game, solve_king_ratings

GUARANTEE = 1e-6
GROUP = 32  # replicates per batch


def batched_replicates(solver, method: str, scheme: str, replicates: int) -> tuple[np.ndarray, np.ndarray, int]:
    """King ratings (B, M) and exploitability (B,) of replicates 0..B-1 of `scheme` under the CCE
    `method` ("affinity" or "uniform" target), and how many needed the one-by-one fallback."""
    u = solver.u_king
    p, m, _ = u.shape
    target = get_method(method).target
    warm = _reference_multipliers(u, target)
    ratings, expl = np.zeros((replicates, m)), np.zeros(replicates)
    fallback = 0
    if scheme == "prompts":
        _, first, content = np.unique(u.reshape(p, -1), axis=0, return_index=True, return_inverse=True)
        content = content.reshape(-1)
    for start in range(0, replicates, GROUP):
        block = range(start, min(start + GROUP, replicates))
        if scheme == "prompts":
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
                ratings[b], expl[b] = out.ratings[k], out.exploitability[k]
            else:
                fallback += 1
                ratings[b], expl[b] = solve_king_ratings(method, solver.game(scheme, b))
    return ratings, expl, fallback


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
