"""Adversarial clone robustness: ratings as redundant prompts are added (paper Section 4.2, App. F.5).

Prompts adversarial to a target model are sampled from softmax(-lambda * ubar), with ubar[p] the
target's mean king payoff on prompt p against every rebel model, and appended to the game as exact
copies (Section 4.2) or as copies with Uniform(-noise, noise) payoff noise (App. F.5). Equilibrium
ratings selected by the affinity entropy are invariant to exact clones; Bradley-Terry (Elo) ratings
are not, since every copy adds battles. The grid of clone counts uses prefixes of one draw, so the
experiment is monotone in n and reproducible from its seed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from eqarena.methods import get_method, label, method_names
from eqarena.solvers.games.equilibrium import king_ratings

VARIANTS = ("exact", "noisy")
DEFAULT_TIE_TOL = 1e-4


@dataclass(frozen=True, eq=False)
class CloneOutcome:
    """One method's king-model ratings (M,) and dense ranks (M,) on the game with `n_clones` clones.

    variant: "exact" or "noisy"; exploitability: the equilibrium's (None for BT or an injected solver).
    """

    variant: str
    n_clones: int
    method: str
    ratings: np.ndarray
    ranks: np.ndarray
    exploitability: float | None = None


def _check_tensor(u_king) -> np.ndarray:
    u = np.asarray(u_king, dtype=np.float64)
    if u.ndim != 3 or u.shape[1] != u.shape[2] or u.shape[0] < 1:
        raise ValueError(f"u_king must have shape (P, M, M) with P >= 1; got {u.shape}")
    return u


def adversarial_weights(u_king, target: int, lam: float = 10.0) -> np.ndarray:
    """Sampling weights of prompts adversarial to model `target` (paper Section 4.2); shape (P,).

    u_king: (P, M, M). ubar[p] = (1/M) sum_r u_king[p, target, r] over every rebel model r
    (r == target included, where u = 0); weights = softmax(-lam * ubar).
    """
    u = _check_tensor(u_king)
    if not 0 <= target < u.shape[1]:
        raise ValueError(f"target={target} is not a model index in [0, {u.shape[1]})")
    logits = -lam * u[:, target, :].mean(axis=1)
    w = np.exp(logits - logits.max())
    return w / w.sum()


def sample_clone_sources(u_king, target: int, n_max: int, lam: float = 10.0, rng_or_seed=0) -> np.ndarray:
    """Source prompt indices of `n_max` clones, i.i.d. from `adversarial_weights` (with replacement).

    u_king: (P, M, M); returns (n_max,) int. Use prefixes for smaller n, so the clones of a smaller
    experiment are among those of a larger one (paper Section 4.2, App. F.5).
    """
    if n_max < 0:
        raise ValueError(f"n_max must be >= 0; got {n_max}")
    w = adversarial_weights(u_king, target, lam)
    rng = np.random.default_rng(rng_or_seed)
    return rng.choice(len(w), size=n_max, replace=True, p=w).astype(np.int64)


def with_clones(u_king, sources, noise: float = 0.0, rng=None) -> np.ndarray:
    """u_king (P, M, M) with copies of the prompts `sources` (n,) appended: shape (P + n, M, M).

    noise == 0: exact copies (paper Section 4.2). noise > 0: each copy's upper triangle (i < j) gets
    independent Uniform(-noise, noise) noise, clipped to [-1, 1], and is mirrored, so every slice stays
    antisymmetric with a zero diagonal (App. F.5). `rng`: a Generator or seed for the noise.
    """
    u = _check_tensor(u_king)
    idx = np.asarray(sources, dtype=np.int64).reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= u.shape[0]):
        raise ValueError(f"sources must be prompt indices in [0, {u.shape[0]})")
    if noise < 0:
        raise ValueError(f"noise must be >= 0; got {noise}")
    copies = u[idx]
    if noise > 0 and idx.size:
        m = u.shape[1]
        upper = np.triu(np.ones((m, m), dtype=bool), k=1)
        eps = np.random.default_rng(rng).uniform(-noise, noise, size=copies.shape)
        tri = np.where(upper, np.clip(copies + eps, -1.0, 1.0), 0.0)
        copies = tri - np.swapaxes(tri, 1, 2)
    return np.concatenate([u, copies], axis=0)


def clone_prompt_ids(prompt_ids: Sequence[str], sources) -> list[str]:
    """Ids of the clones of `sources` (n,): "clone:<source prompt id>:<k>", k = 1, 2, ... per source.

    prompt_ids: (P,) ids of the original prompts. Ids of a prefix of `sources` are a prefix of these.
    """
    ids = [str(p) for p in prompt_ids]
    seen: Counter = Counter()
    out = []
    for s in np.asarray(sources, dtype=np.int64).reshape(-1):
        source = ids[int(s)]
        seen[source] += 1
        out.append(f"clone:{source}:{seen[source]}")
    clash = set(out) & set(ids)
    if clash:
        raise ValueError(f"clone ids collide with prompt ids: {sorted(clash)[:3]}")
    return out


def dense_ranks(ratings, tie_tol: float = DEFAULT_TIE_TOL) -> np.ndarray:
    """Dense ranks (M,) of ratings (M,): 1 = best; ties chain (App. F.5 groups |difference| <= 1e-4).

    Sorted descending, a rating within `tie_tol` of the previous one shares its rank, so 1, 1, 2, ...
    """
    r = np.asarray(ratings, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(r)):
        raise ValueError("ratings must be finite")
    order = np.argsort(-r, kind="stable")
    slack = 1e-12 * max(1.0, float(np.max(np.abs(r)))) if r.size else 0.0  # rounding of the gaps
    ranks = np.empty(r.size, dtype=np.int64)
    rank = 0
    for k, i in enumerate(order):
        if k == 0 or r[order[k - 1]] - r[i] > tie_tol + slack:
            rank += 1
        ranks[i] = rank
    return ranks


def solve_method(method: str, u_king) -> tuple[np.ndarray, float | None]:
    """King-model ratings (M,) of u_king (P, M, M) by the registered `method`, and the exploitability
    (None for a model-rating method). Model-rating methods such as Bradley-Terry see the tensor's
    battles (`solvers.pairwise.bradley_terry.tensor_battles`), so every cloned prompt adds battles
    (paper Section 4.2)."""
    return king_ratings(get_method(method), _check_tensor(u_king))


def _grid(ns: Iterable[int]) -> list[int]:
    grid = sorted({int(n) for n in ns})
    if grid and grid[0] < 0:
        raise ValueError("clone counts must be >= 0")
    return grid


def clone_tensors(
    u_king,
    target: int,
    *,
    ns_exact=(0, 250, 500),
    ns_noisy=(0, 250, 500, 750, 1000),
    lam: float = 10.0,
    noise: float = 0.01,
    seed: int = 0,
) -> list[tuple[str, int, np.ndarray]]:
    """The games of the clone experiment: (variant, n, u_king (P + n, M, M)) per variant and n, n ascending.

    Sources = sample_clone_sources(u_king, target, max n, lam, seed); each game holds a prefix of
    them (noisy: a prefix of one noisy draw, noise seeded by (seed, 1)). Paper Section 4.2, App. F.5.
    """
    u = _check_tensor(u_king)
    grids = {"exact": _grid(ns_exact), "noisy": _grid(ns_noisy)}
    n_max = max([0, *grids["exact"], *grids["noisy"]])
    sources = sample_clone_sources(u, target, n_max, lam, seed)
    full = {
        "exact": with_clones(u, sources[: max([0, *grids["exact"]])]),
        "noisy": with_clones(u, sources[: max([0, *grids["noisy"]])], noise, np.random.default_rng((seed, 1))),
    }
    p = u.shape[0]
    return [(v, n, full[v][: p + n]) for v in VARIANTS for n in grids[v]]


def clone_experiment(
    u_king,
    target: int,
    *,
    ns_exact=(0, 250, 500),
    ns_noisy=(0, 250, 500, 750, 1000),
    lam: float = 10.0,
    noise: float = 0.01,
    seed: int = 0,
    methods: Sequence[str] | None = None,
    solve: Callable[[str, np.ndarray], np.ndarray] | None = None,
    tie_tol: float = DEFAULT_TIE_TOL,
) -> list[CloneOutcome]:
    """Every method's king ratings as clones adversarial to `target` are added (Section 4.2, App. F.5).

    u_king: (P, M, M). Returns one CloneOutcome per (variant, n, method), variants "exact" then
    "noisy", n ascending, methods in order (None: the registry's default methods); ratings and ranks
    (`dense_ranks`, `tie_tol`) are (M,).
    The games are `clone_tensors(...)`; n == 0 (the original game) is solved once and reported under
    both variants. solve(method, u_king) -> ratings (M,) replaces `solve_method` (exploitability None).
    """
    methods = method_names(default_only=True) if methods is None else tuple(methods)
    for method in methods:
        get_method(method)  # ValueError naming the registered methods
    games = clone_tensors(u_king, target, ns_exact=ns_exact, ns_noisy=ns_noisy, lam=lam, noise=noise, seed=seed)
    original: dict[str, tuple[np.ndarray, float | None]] = {}
    outcomes = []
    for variant, n, u in games:
        for method in methods:
            if n == 0 and method in original:
                ratings, expl = original[method]
            else:
                if solve is None:
                    ratings, expl = solve_method(method, u)
                else:
                    ratings, expl = np.asarray(solve(method, u), dtype=np.float64).reshape(-1), None
                if n == 0:
                    original[method] = (ratings, expl)
            outcomes.append(CloneOutcome(variant, n, method, ratings, dense_ranks(ratings, tie_tol), expl))
    return outcomes


def _variant_verdict(rows: list[CloneOutcome], target_index: int, name: str) -> str:
    rows = sorted(rows, key=lambda o: o.n_clones)
    base, n_top = rows[0], rows[-1].n_clones
    changed = [o.n_clones for o in rows[1:] if not np.array_equal(o.ranks, base.ranks)]
    if not changed:
        return f"ranks unchanged up to {n_top} clones"
    start = int(base.ranks[target_index])
    ranks = [int(o.ranks[target_index]) for o in rows]
    worst, best = max(ranks), min(ranks)
    if worst > start:
        move = f"{name} fell from {start} to {worst} (at {rows[ranks.index(worst)].n_clones} clones)"
    elif best < start:
        move = f"{name} rose from {start} to {best} (at {rows[ranks.index(best)].n_clones} clones)"
    else:
        move = f"{name} kept rank {start}"
    return f"{move}; ranks first changed at {changed[0]} clones"


def clone_verdicts(outcomes: Sequence[CloneOutcome], target_index: int, model_names: Sequence[str]) -> dict[str, str]:
    """One line per method summarising `clone_experiment` outcomes for the target model (Section 4.2).

    For each variant: "ranks unchanged up to N clones" when every model's rank equals its rank at the
    smallest n (n = 0), else the target's worst (or best) rank, where it was reached, and the first n
    at which any rank changed. E.g. "BT: exact: A fell from 1 to 4 (at 250 clones); ranks first
    changed at 250 clones | noisy: ...".
    """
    name = str(model_names[target_index])
    by_method: dict[str, dict[str, list[CloneOutcome]]] = {}
    for o in outcomes:
        by_method.setdefault(o.method, {}).setdefault(o.variant, []).append(o)
    verdicts = {}
    for method, variants in by_method.items():
        parts = [f"{v}: {_variant_verdict(rows, target_index, name)}" for v, rows in variants.items()]
        verdicts[method] = f"{label(method)}: " + " | ".join(parts)
    return verdicts
