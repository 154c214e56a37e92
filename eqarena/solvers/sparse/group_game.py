"""The prompt-group game: groups of prompts as the prompt player's actions (docs/game.md#prompt-groups).

A battle log is far too sparse for per-prompt payoffs (most Chatbot Arena prompts meet one pair of
models once), but the king-of-the-hill game (paper Section 3.1) needs a payoff for every (prompt, king,
rebel). Here the prompt player's actions are groups of prompts (a category, a language, a tag of
Chatbot Arena's category_tag, or one group of everything), and the payoff of king i over rebel j on
group g is

    u_king(g, i, j) = tanh((theta[g, i] - theta[g, j]) / 2) = 2 sigmoid(theta_gi - theta_gj) - 1,

the expected score of i against j under a Bradley-Terry model per group, theta[g] = beta + delta[g],
fitted to every battle of the group and shrunk towards the global fit beta by (shrinkage / 2) |delta|^2
(`solvers.sparse.imputation.fit_shrunk_strengths`: the imputation model at group level, each (group, pair)
cell weighted by its battles, the shrinkage cross-validated). The game is dense by construction; a
cell no battle of its group compared rests on the smoothing alone (`observed` False), and
`smoothed_share` says how much of each group that is. A battle with several groups (tags) counts in
each; a battle whose prompt has none is in the group `OTHER`.

Bootstrap ("prompts" scheme): the log's prompts are drawn with replacement, every battle counted as
often as its prompt was drawn (for a log with one battle per prompt, FastChat's resampling of battles),
and the group game is refitted with the full data's shrinkage from the full data's strengths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eqarena.solvers.sparse.imputation import ShrunkStrengths, fit_shrunk_strengths

OTHER = "(other)"  # the group of battles whose prompt has no label in the grouping


@dataclass(frozen=True, eq=False)
class GroupBattles:
    """Battles k = 0..K-1 (model_a, model_b, score in [-1, 1] from model_a's side, prompt index) and
    their group memberships: row r puts battle `member_battle[r]` in group `member_group[r]`."""

    model_a: np.ndarray
    model_b: np.ndarray
    score: np.ndarray
    prompt: np.ndarray
    member_battle: np.ndarray
    member_group: np.ndarray
    num_prompts: int
    num_groups: int
    num_models: int

    def __post_init__(self):
        if self.num_models < 2 or self.num_groups < 1:
            raise ValueError(f"a group game needs 2 models and a group; got {self.num_models} and {self.num_groups}")


@dataclass(frozen=True, eq=False)
class GroupGame:
    """u_king (G, M, M) of the group game; observed (G, M, M): cells some battle of the group compared;
    battles (G,): battles per group; strengths: the Bradley-Terry fit behind u_king."""

    u_king: np.ndarray
    observed: np.ndarray
    battles: np.ndarray
    strengths: ShrunkStrengths

    @property
    def smoothed_share(self) -> np.ndarray:
        """(G,) share of each group's model pairs that no battle of the group compared."""
        m = self.u_king.shape[1]
        pairs = m * (m - 1)
        return 1.0 - self.observed.sum(axis=(1, 2)) / pairs


class GroupCells:
    """The battles aggregated once into (group, i < j) cells, so a replicate's weights re-aggregate by
    one bincount: the full game and each bootstrap replicate (`replicate`)."""

    def __init__(self, battles: GroupBattles):
        self.battles = battles
        a, b = battles.model_a[battles.member_battle], battles.model_b[battles.member_battle]
        low, high = np.minimum(a, b), np.maximum(a, b)
        score = battles.score[battles.member_battle]
        self.y_low = (1.0 + np.where(a == low, score, -score)) / 2.0  # P(low beats high), per membership
        m = battles.num_models
        key = (battles.member_group * m + low) * m + high
        self.keys, self.cell_of = np.unique(key, return_inverse=True)
        self.cell_of = self.cell_of.reshape(-1)
        self.g, rest = np.divmod(self.keys, m * m)
        self.i, self.j = np.divmod(rest, m)

    def fit(
        self,
        battle_weights: np.ndarray | None = None,
        *,
        shrinkage: float | str = "auto",
        start: ShrunkStrengths | None = None,
    ) -> GroupGame:
        """The group game of the battles, each counted `battle_weights[k]` times (default once)."""
        bt = self.battles
        w = (
            np.ones(len(bt.member_battle))
            if battle_weights is None
            else np.asarray(battle_weights, dtype=np.float64)[bt.member_battle]
        )
        n = np.bincount(self.cell_of, weights=w, minlength=len(self.keys))
        wins = np.bincount(self.cell_of, weights=w * self.y_low, minlength=len(self.keys))
        kept = n > 0
        g, i, j = self.g[kept], self.i[kept], self.j[kept]
        strengths = fit_shrunk_strengths(
            g, i, j, wins[kept] / n[kept], n[kept], bt.num_groups, bt.num_models, shrinkage=shrinkage, start=start
        )
        theta = strengths.prompt_strengths
        upper = np.triu(np.ones((bt.num_models,) * 2, dtype=bool), k=1)[None]
        u = np.where(upper, np.tanh((theta[:, :, None] - theta[:, None, :]) / 2.0), 0.0)
        u = u - np.swapaxes(u, 1, 2)
        observed = np.zeros(u.shape, dtype=bool)
        observed[g, i, j] = observed[g, j, i] = True
        per_group = np.bincount(bt.member_group, weights=w, minlength=bt.num_groups)
        return GroupGame(u, observed, per_group, strengths)


def group_game(battles: GroupBattles, shrinkage: float | str = "auto") -> GroupGame:
    """The group game of `battles` (module docstring)."""
    return GroupCells(battles).fit(shrinkage=shrinkage)


@dataclass(eq=False)
class GroupReplicates:
    """The group game's "prompts" bootstrap replicates (module docstring); picklable for worker
    processes, which aggregate the cells once each."""

    battles: GroupBattles
    full: ShrunkStrengths
    _cells: GroupCells | None = None

    def replicate(self, rng: np.random.Generator) -> np.ndarray:
        """u_king (G, M, M) of one replicate: prompts drawn with replacement, the game refitted."""
        if self._cells is None:
            self._cells = GroupCells(self.battles)
        p = self.battles.num_prompts
        drawn = np.bincount(rng.integers(0, p, size=p), minlength=p).astype(np.float64)
        return self._cells.fit(drawn[self.battles.prompt], shrinkage=self.full.shrinkage, start=self.full).u_king

    def __getstate__(self):
        return {"battles": self.battles, "full": self.full, "_cells": None}
