"""Groups of a dataset's prompts: its categories or clusters (columns of table `prompts`), for rating
one group (`rate --category`) or each group on its own (`rate --by`)."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from eqarena.exceptions import NotFoundError

GROUPINGS = ("category", "cluster")  # the columns of `prompts` that group prompts
PLURAL = {"category": "categories", "cluster": "clusters"}


@dataclass(frozen=True)
class PromptGroup:
    """The prompts of a dataset whose `grouping` column (category or cluster) equals `name`."""

    grouping: str
    name: str

    def __post_init__(self):
        if self.grouping not in GROUPINGS:
            raise ValueError(f"prompt grouping must be one of {', '.join(GROUPINGS)}; got {self.grouping!r}")

    def sql(self) -> str:
        """A condition on `prompt_id` (parameters $dataset, $group_name): the prompt is in the group."""
        return (
            f"prompt_id IN (SELECT prompt_id FROM prompts WHERE dataset = $dataset AND {self.grouping} = $group_name)"
        )


def group_sizes(con: duckdb.DuckDBPyConnection, dataset: str, grouping: str) -> dict[str, int]:
    """Prompts per group of `dataset` (groups sorted by name); prompts without a group are left out."""
    PromptGroup(grouping, "")  # checks the column name
    rows = con.execute(
        f"SELECT {grouping}, count(*) FROM prompts WHERE dataset = ? AND {grouping} IS NOT NULL "
        f"AND trim({grouping}) <> '' GROUP BY ALL ORDER BY 1",
        [dataset],
    ).fetchall()
    return dict(rows)


def ungrouped_prompts(con: duckdb.DuckDBPyConnection, dataset: str, grouping: str) -> int:
    """How many prompts of `dataset` have no `grouping` value."""
    PromptGroup(grouping, "")
    return con.execute(
        f"SELECT count(*) FROM prompts WHERE dataset = ? AND ({grouping} IS NULL OR trim({grouping}) = '')", [dataset]
    ).fetchone()[0]


def dataset_groups(con: duckdb.DuckDBPyConnection, dataset: str, grouping: str, option: str) -> dict[str, int]:
    """`group_sizes`, or LookupError naming `option` when the dataset's prompts have no `grouping` at all."""
    sizes = group_sizes(con, dataset, grouping)
    if not sizes:
        prompts = con.execute("SELECT count(*) FROM prompts WHERE dataset = ?", [dataset]).fetchone()[0]
        raise NotFoundError(
            f"{option}: dataset {dataset!r} has no prompt {PLURAL[grouping]} (none of its {prompts} "
            f"prompts has one in table prompts); rate without {option}"
        )
    return sizes


def check_group(con: duckdb.DuckDBPyConnection, dataset: str, group: PromptGroup) -> int:
    """The number of prompts in `group`; LookupError listing the dataset's groups when it has none."""
    option = f"--{group.grouping}"
    sizes = dataset_groups(con, dataset, group.grouping, option)
    if group.name not in sizes:
        raise NotFoundError(
            f"{option} {group.name!r}: dataset {dataset!r} has no such {group.grouping} "
            f"(its {PLURAL[group.grouping]}: {', '.join(sizes)})"
        )
    return sizes[group.name]
