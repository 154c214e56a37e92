"""The per-category leaderboard of a rate run with --by, as the console and the report show it: each
group's ranking by the headline method (NE if rated), its prompt count, or why it was skipped."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from eqarena.methods import ordered
from eqarena.report.verdict import headline_method
from eqarena.warehouse.category_ratings import GroupRating, GroupRow


@dataclass(frozen=True)
class GroupLine:
    """One group: its prompts, and its models' (model, rank, rating) by the headline method, best
    first; or `skipped` with the reason."""

    category: str
    prompts: int
    ranked: tuple[tuple[str, int, float], ...] = ()
    skipped: str | None = None

    @property
    def top(self) -> tuple[str, ...]:
        """The model(s) ranked first."""
        return tuple(m for m, rank, _ in self.ranked if rank == 1)

    def ranking(self) -> str:
        """The models best first, `>` between ranks and `=` within a tie, e.g. 'a = b > c'."""
        text = ""
        for k, (model, rank, _) in enumerate(self.ranked):
            if k:
                text += " = " if rank == self.ranked[k - 1][1] else " > "
            text += model
        return text


@dataclass(frozen=True)
class CategoryTable:
    grouping: str  # category or cluster
    method: str  # the headline method
    groups: tuple[GroupLine, ...]

    @property
    def models(self) -> tuple[str, ...]:
        """Every model rated in some group: most groups topped first, then best rank, then name."""
        firsts = Counter(m for g in self.groups for m in g.top)
        best: dict[str, int] = {}
        for g in self.groups:
            for model, rank, _ in g.ranked:
                best[model] = min(best.get(model, rank), rank)
        return tuple(sorted(best, key=lambda m: (-firsts[m], best[m], m)))


def category_table(groups: list[GroupRow], ratings: list[GroupRating]) -> CategoryTable | None:
    """The table of a run's groups (None for a run without --by), by the headline method of its ratings."""
    if not groups:
        return None
    method = headline_method(ordered({r.method for r in ratings})) if ratings else ""
    lines = []
    for g in groups:
        ranked = tuple(
            (r.model_id, r.rank, r.rating)
            for r in ratings
            if r.category == g.category and r.grouping == g.grouping and r.method == method
        )
        lines.append(
            GroupLine(
                g.category,
                g.prompts,
                tuple(sorted(ranked, key=lambda x: (x[1], x[0]))),
                g.reason if g.status == "skipped" else None,
            )
        )
    return CategoryTable(groups[0].grouping, method, tuple(lines))
