"""One bootstrap replicate: the game it resamples and the exact solve of it (the schemes and the
clone identities behind `replicate_game` are described in eqarena/solvers/bootstrap/confidence.py).

- "prompts": `prompt_replicate` draws the P prompt slices with replacement;
- "judgments": `judgment_replicate` moves every order of every cell by a draw from the Dirichlet
  posterior of its scores (`Groups`).
Replicate b of a scheme depends only on (seed, scheme, b).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from eqarena.methods import get_method
from eqarena.solvers._rows import identical_rows
from eqarena.solvers.games.equilibrium import solve_equilibrium
from eqarena.solvers.games.normal_form import KING, koth_game

SCHEMES = ("prompts", "judgments")


def prompt_replicate(num_prompts: int, seed: int, replicate: int) -> np.ndarray:
    """Prompt indices (P,) of replicate `replicate`, drawn with replacement (seeded per replicate)."""
    rng = np.random.default_rng([seed, SCHEMES.index("prompts"), replicate])
    return rng.integers(0, num_prompts, size=num_prompts)


PRIOR_WEIGHT = 0.5  # the prior: half a judgment scoring +1 and half a judgment scoring -1 in every order


class Groups:
    """Judgments grouped by order cell (prompt, model A, model B) and the Dirichlet posterior of each
    order's score distribution that replicates draw from (module docstring)."""

    def __init__(self, u_king: np.ndarray, battles: Mapping[str, np.ndarray], imputed: np.ndarray | None):
        P, M, _ = u_king.shape
        key = (np.asarray(battles["prompt"]) * M + np.asarray(battles["model_a"])) * M + np.asarray(battles["model_b"])
        self.cells, self.group, count = np.unique(key, return_inverse=True, return_counts=True)
        self.score = np.asarray(battles["score"], dtype=np.float64)
        # the posterior mean: k judgments of weight 1 and the two prior atoms (+1, -1) of weight 1/2
        self.posterior_mean = np.bincount(self.group, weights=self.score, minlength=len(self.cells)) / (count + 1.0)
        self.shape, self.u = (P, M, M), np.asarray(u_king, dtype=np.float64)
        n = np.zeros(P * M * M, dtype=np.int64)
        n[self.cells] = count
        n = n.reshape(P, M, M)
        self.both = (n > 0) & (np.swapaxes(n, 1, 2) > 0)
        self.one = (n > 0) & ~self.both
        diagonal = np.eye(M, dtype=bool)[None]
        self.frozen = diagonal if imputed is None else (np.asarray(imputed, bool) | diagonal)

    def order_changes(self, rng: np.random.Generator) -> np.ndarray:
        """(P, M, M) each judged order's posterior draw of its mean score minus the posterior mean; 0 if
        unjudged. Dirichlet weights are normalised Gamma draws: Gamma(1) per judgment, Gamma(1/2) per prior atom."""
        per_judgment = rng.exponential(size=len(self.score))
        win, loss = rng.gamma(PRIOR_WEIGHT, size=(2, len(self.cells)))
        total = np.bincount(self.group, weights=per_judgment, minlength=len(self.cells)) + win + loss
        weighted = np.bincount(self.group, weights=per_judgment * self.score, minlength=len(self.cells)) + win - loss
        out = np.zeros(int(np.prod(self.shape)))
        out[self.cells] = weighted / total - self.posterior_mean
        return out.reshape(self.shape)

    def replicate(self, rng: np.random.Generator) -> np.ndarray:
        d = self.order_changes(rng)
        dt = np.swapaxes(d, 1, 2)
        delta = np.where(self.both, 0.5 * (d - dt), np.where(self.one, d, -dt))
        return np.where(self.frozen, self.u, np.clip(self.u + delta, -1.0, 1.0))


def judgment_replicate(
    u_king, battles: Mapping[str, np.ndarray], seed: int, replicate: int, imputed: np.ndarray | None = None
) -> np.ndarray:
    """u_king (P, M, M) with every judged order of every cell moved by a draw from the posterior of its
    mean score (module docstring). battles: {'prompt', 'model_a', 'model_b': int (n,), 'score': (n,)}."""
    return Groups(np.asarray(u_king), battles, imputed).replicate(judgment_rng(seed, replicate))


def judgment_rng(seed: int, replicate: int) -> np.random.Generator:
    return np.random.default_rng([seed, SCHEMES.index("judgments"), replicate])


def replicate_game(method: str, u_king: np.ndarray) -> tuple[np.ndarray, object]:
    """(distinct-prompt tensor, target) whose equilibrium under `method` equals that of u_king, whose
    prompts may repeat (module docstring): affinity keeps "affinity"; uniform weights prompts by copies.
    Other targets: u_king itself and the method's target."""
    u, target, _ = _distinct_game(method, u_king)
    return u, target


def _distinct_game(method: str, u_king: np.ndarray) -> tuple[np.ndarray, object, np.ndarray]:
    """`replicate_game` and the index in u_king of each of its prompts."""
    target = get_method(method).target
    if target not in ("affinity", "uniform"):
        return u_king, target, np.arange(len(u_king))
    rows, counts = _distinct_prompts(u_king)
    if target == "affinity":
        return u_king[rows], "affinity", rows
    m = u_king.shape[1]
    return u_king[rows], [counts / counts.sum(), np.full(m, 1.0 / m), np.full(m, 1.0 / m)], rows


def _distinct_prompts(u_king: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first index of each distinct prompt slice of u_king, in order, and its number of copies."""
    first, labels = identical_rows(u_king.reshape(len(u_king), -1))
    return first, np.bincount(labels, minlength=len(first))


def twin_groups(methods: Sequence[str]) -> list[tuple[str, ...]]:
    """`methods` in their order, each grouped with its twin if it is there: the equilibrium method with
    the same solver and the other of the "affinity" and "uniform" targets (ne and ne-shannon, cce and
    cce-shannon), the affinity one first. On a replicate where `twins_agree`, one solve serves both."""
    groups: list[tuple[str, ...]] = []
    placed: set[str] = set()
    for name in methods:
        if name in placed:
            continue
        twin = next((o for o in methods if o not in placed and o != name and _twins(name, o)), None)
        group = (
            (name,) if twin is None else tuple(sorted((name, twin), key=lambda n: get_method(n).target != "affinity"))
        )
        placed.update(group)
        groups.append(group)
    return groups


def _twins(a: str, b: str) -> bool:
    first, second = get_method(a), get_method(b)
    return (
        first.is_equilibrium
        and first.solve == second.solve
        and {first.target, second.target} == {"affinity", "uniform"}
    )


def twins_agree(u_king: np.ndarray) -> bool:
    """Whether a solver selects the same equilibrium of the replicate u_king (P, M, M) from the
    "affinity" target as from the "uniform" one: its prompts are distinct (else the uniform target
    weights copies, `replicate_game`) and no two actions of a player are (near-)clones
    (`entropy.affinity_is_uniform`). The rate flow restates the full data's twin on the same test."""
    from eqarena.solvers.games.entropy import affinity_is_uniform

    return len(_distinct_prompts(u_king)[0]) == len(u_king) and affinity_is_uniform(koth_game(u_king))


def solve_king_ratings(method: str, u_king: np.ndarray, start=None) -> tuple[np.ndarray, float]:
    """King ratings (M,) and exploitability of the registered equilibrium `method` on u_king (P, M, M),
    solved on its distinct prompts (`replicate_game`). start: for a method that `warm_starts`, the dual
    multipliers (prompts (P,) of u_king, kings (M,), rebels (M,)) of a nearby game to start from."""
    u, target, rows = _distinct_game(method, u_king)
    if start is not None:
        start = [np.asarray(start[0])[rows], start[1], start[2]]
    eq = solve_equilibrium(get_method(method), koth_game(u), target, start)
    return np.asarray(eq.ratings[KING], dtype=np.float64), float(eq.exploitability)
