"""Task: rate each category (or cluster) of a dataset's prompts on its own (`rate --by`), by the run's
methods and missing-cell policy on the group's prompts alone, exactly as `rate --category X` would (the
same assembly and solvers), but as point ratings: no bootstrap, so no intervals per group.

A group is skipped, with the reason stored, when it has fewer than MIN_PROMPTS prompts (before or after
the missing-cell policy), when the policy refuses its tensor (e.g. a model never judged on it), or when
a method cannot rate it (a --baseline model absent from it, no answer texts for --style-control)."""

from __future__ import annotations

from contextlib import closing
from typing import Callable

from eqarena import warehouse
from eqarena.datasets.records import DatasetError
from eqarena.options import RateOptions
from eqarena.orchestration.steps import step
from eqarena.tasks.assemble import Assembled, assemble_group
from eqarena.tasks.rate import method_battles, rate_method
from eqarena.warehouse.category_ratings import GroupMethodRatings, GroupRecord
from eqarena.warehouse.prompt_groups import PromptGroup, dataset_groups
from eqarena.warehouse.tensor import IncompleteTensorError

MIN_PROMPTS = 2  # a group's ratings need at least this many prompts


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@step("rate_groups")
def rate_groups(
    db: str | None, options: RateOptions, methods: tuple[str, ...], progress: Callable[[int], None] | None = None
) -> list[GroupRecord]:
    """One GroupRecord per group of `options.by` (category or cluster) of the dataset's prompts, rated by
    `methods` or skipped with the reason (module docstring). LookupError when the dataset's prompts have
    no such groups. `progress(n)`: n groups done."""
    grouping = options.by.value
    assembled: dict[str, Assembled | GroupRecord] = {}
    with closing(warehouse.connect(db, read_only=True)) as con:
        sizes = dataset_groups(con, options.dataset, grouping, f"--by {grouping}")
        for name, size in sizes.items():
            if size < MIN_PROMPTS:
                assembled[name] = GroupRecord(
                    grouping,
                    name,
                    size,
                    skipped=True,
                    reason=(f"{_plural(size, 'prompt')}; a {grouping} is rated from {MIN_PROMPTS} prompts"),
                )
                continue
            try:
                assembled[name] = assemble_group(con, options, PromptGroup(grouping, name))
            except IncompleteTensorError as exc:
                assembled[name] = GroupRecord(grouping, name, size, skipped=True, reason=str(exc))
    records = []
    for done, (name, found) in enumerate(assembled.items(), start=1):
        records.append(
            found
            if isinstance(found, GroupRecord)
            else _rate_group(db, options, methods, grouping, name, sizes[name], found)
        )
        if progress is not None:
            progress(done)
    return records


def _rate_group(
    db: str | None,
    options: RateOptions,
    methods: tuple[str, ...],
    grouping: str,
    name: str,
    size: int,
    assembled: Assembled,
) -> GroupRecord:
    """The group's point ratings by every method, or a skipped record saying why."""
    tensor = assembled.tensor
    P, M, _ = tensor.shape
    if P < MIN_PROMPTS:
        return GroupRecord(
            grouping,
            name,
            size,
            P,
            M,
            skipped=True,
            reason=(
                f"{_plural(P, 'prompt')} left after {assembled.dropped.summary()}; a {grouping} is rated from "
                f"{MIN_PROMPTS} prompts"
            ),
        )
    try:
        battles = method_battles.fn(db, tensor, assembled.battles, options, methods)
    except (LookupError, DatasetError) as exc:
        return GroupRecord(grouping, name, size, P, M, skipped=True, reason=str(exc))
    rated = []
    for method in methods:
        solved = rate_method.fn(tensor, battles, method, 0, options.bootstrap.seed)
        king = next(r for r in solved.ratings if r.player == "king")
        exploitability = None if solved.equilibrium is None else float(solved.equilibrium.exploitability)
        rated.append(GroupMethodRatings(method, tuple(king.actions), king.rating, king.mass, exploitability))
    dropped = assembled.dropped
    note = None if not (dropped.prompts or dropped.models or dropped.imputed_cells) else dropped.summary()
    return GroupRecord(grouping, name, size, P, M, tuple(rated), reason=note)
