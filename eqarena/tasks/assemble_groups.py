"""Task: the prompt-group game of a rate run (`rate --prompt-groups`, docs/game.md#prompt-groups): which
grouping the prompt player's actions follow, decided from the judgments' coverage in SQL before any
tensor is built, and the group game assembled from the battles."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from eqarena.exceptions import NotFoundError
from eqarena.options import PromptActions, RateOptions
from eqarena.orchestration.progress import say
from eqarena.solvers.sparse.group_game import GroupBattles, GroupCells, GroupReplicates
from eqarena.warehouse.group_battles import (
    AUTO_ORDER,
    CellCoverage,
    grouping_sizes,
    judged_coverage,
    pairwise_only,
    read_group_battles,
)
from eqarena.warehouse.tensor import Dropped, IncompleteTensorError, PayoffTensor

# `auto` rates by groups when fewer than this share of the (prompt, pair) cells is judged and a dense
# per-prompt tensor would hold more than DENSE_CELLS (P x M x M) cells: 20M cells are 160 MB per float
# array, and such a game would be almost all predictions of one Bradley-Terry model.
SPARSE_SHARE = 0.10
DENSE_CELLS = 20_000_000


@dataclass(frozen=True)
class GroupChoice:
    """The grouping of a group game and why it was chosen (None: the per-prompt game)."""

    grouping: str
    reason: str


def choose_grouping(con, options: RateOptions, judges: list[str]) -> GroupChoice | None:
    """The prompt player's actions for `options.prompt_groups` (`PromptActions`); `auto` looks at the
    coverage of the judged cells (`judged_coverage`, in SQL) and says what it decided."""
    wanted = options.prompt_groups
    if wanted is PromptActions.PROMPTS or options.category is not None or options.by is not None:
        return None
    if not pairwise_only(con, options.dataset, judges):
        if wanted is PromptActions.AUTO:
            return None
        raise IncompleteTensorError(
            f"--prompt-groups {wanted.value}: dataset {options.dataset!r} holds per-prompt "
            "scores, which are dense per prompt; rate it without --prompt-groups"
        )
    sizes = grouping_sizes(con, options.dataset)
    if wanted is not PromptActions.AUTO:
        if wanted.value != "all" and wanted.value not in sizes:
            have = ", ".join(f"{g} ({n})" for g, n in sizes.items()) or "none"
            raise NotFoundError(
                f"--prompt-groups {wanted.value}: dataset {options.dataset!r} has no prompt "
                f"{wanted.value} labels (groupings it has: {have}; `all` is one group of every battle)"
            )
        return GroupChoice(wanted.value, f"--prompt-groups {wanted.value}")
    coverage = judged_coverage(con, options.dataset, judges)
    sparse = coverage.share < SPARSE_SHARE
    if sparse and coverage.prompts * coverage.models**2 > DENSE_CELLS:
        grouping = next((g for g in AUTO_ORDER if g in sizes), "all")
        choice = GroupChoice(
            grouping,
            f"{_coverage_line(coverage)}: too sparse for per-prompt payoffs, so the "
            f"prompt player's actions are groups by {grouping} (--prompt-groups auto; "
            f"{_alternatives(sizes, grouping)})",
        )
        say(choice.reason)
        return choice
    if sparse and coverage.spanned_prompts * 2 < coverage.prompts:
        say(
            f"{_coverage_line(coverage)}: most prompts have fewer judged pairs than models, so per-prompt payoffs "
            f"rest on predictions; to rate by groups of prompts: eqarena rate --prompt-groups "
            f"{'|'.join([*sizes, 'all'])}"
        )
    return None


def _coverage_line(c: CellCoverage) -> str:
    return (
        f"{c.battles:,} battles judge {c.judged_cells:,} of {c.cells:,} (prompt, model pair) cells "
        f"({c.share:.2%}) of {c.prompts:,} prompts x {c.models} models"
    )


def _alternatives(sizes: dict[str, int], chosen: str) -> str:
    others = [g for g in (*sizes, "all") if g != chosen]
    return "choose with --prompt-groups " + "|".join([*others, "prompts"])


@dataclass(frozen=True, eq=False)
class AssembledGroups:
    """A group game as `tasks.assemble.Assembled` needs it: the tensor, the battles (each battle on
    its first group) and the bootstrap's replicates."""

    tensor: PayoffTensor
    battles: dict[str, np.ndarray]
    replicates: GroupReplicates
    dropped: Dropped

    @property
    def judged(self) -> PayoffTensor:
        """The tensor with only the cells some battle of the group compared marked covered (the run's
        `coverage` table counts those)."""
        return replace(self.tensor, covered=~self.tensor.imputed)


def assemble_group_game(con, options: RateOptions, judges: list[str], choice: GroupChoice) -> AssembledGroups:
    """The group game of `judges` on `options.dataset` under `choice` (solvers.sparse.group_game)."""
    read = read_group_battles(con, options.dataset, judges, choice.grouping)
    if len(read.models) < 2:
        raise IncompleteTensorError(
            f"dataset {options.dataset!r} has {len(read.models)} judged model(s) for judge(s) "
            f"{', '.join(judges)}: a game needs at least 2"
        )
    battles = GroupBattles(
        **read.arrays, num_prompts=read.num_prompts, num_groups=len(read.groups), num_models=len(read.models)
    )
    game = GroupCells(battles).fit()
    observed = game.observed | np.eye(len(read.models), dtype=bool)[None]
    first_group = np.zeros(len(battles.score), dtype=np.int64)
    first_group[battles.member_battle[::-1]] = battles.member_group[::-1]  # each battle's first membership wins
    tensor = PayoffTensor(
        dataset=options.dataset,
        judges=tuple(judges),
        prompts=read.groups,
        models=read.models,
        u_king=game.u_king,
        covered=np.ones(game.u_king.shape, dtype=bool),
        samples=observed.astype(np.int64),
        fingerprint=read.fingerprint,
        inputs=read.inputs,
        imputed=~observed,
    )
    battle_arrays = {
        "prompt": first_group,
        "model_a": battles.model_a,
        "model_b": battles.model_b,
        "score": battles.score,
    }
    cells = int(np.triu(~observed, k=1).sum())
    m = len(read.models)
    dropped = Dropped("groups", imputed_cells=cells, total_cells=len(read.groups) * m * (m - 1) // 2)
    return AssembledGroups(tensor, battle_arrays, GroupReplicates(battles, game.strengths), dropped)
