"""The "By category" section of a run rated with --by: each model's rank by the headline method in each
category (or cluster) rated alone, its rating on hover, each category's top model highlighted, and the
categories that were skipped with the reason."""

from __future__ import annotations

from eqarena import methods as methods_registry
from eqarena.report import html as page
from eqarena.report.category_table import GroupLine
from eqarena.report.data import ReportData
from eqarena.report.layout import section

WIDE_UP_TO = 12  # up to this many groups they are the table's columns (models x groups), else its rows


def categories_section(d: ReportData) -> str:
    """The section, or nothing for a run without per-category ratings."""
    table = d.categories
    if table is None:
        return ""
    method = table.method
    name = methods_registry.label(method) if method else "–"
    full = {r.action: r for r in d.ratings if r.player == "king" and r.method == method}
    models = sorted(table.models, key=lambda m: (full[m].rank if m in full else 10**9, m))
    rated = [g for g in table.groups if not g.skipped]
    plural = "categories" if table.grouping == "category" else "clusters"
    note = (
        f'<p class="note">Each {table.grouping} rated alone: the run\'s methods and missing-cell policy on its '
        f"prompts only, shown by {page.escape(name)}, the headline method: rank (1 is best; ties share a rank), "
        "the rating on hover, the top model of each highlighted. Point ratings: no bootstrap per "
        f"{table.grouping}, so no intervals (<code>eqarena rate --category NAME</code> gives one "
        f"{table.grouping}'s). {len(rated)} of {len(table.groups)} {plural} rated; every method's ratings are "
        "in table <code>category_ratings</code>.</p>"
    )
    grid = (
        _wide(models, rated, full, method) if len(rated) <= WIDE_UP_TO else _long(table.grouping, models, rated, method)
    )
    skipped = [g for g in table.groups if g.skipped]
    listed = ""
    if skipped:
        listed = (
            f'<p class="note">Skipped {plural}:</p><ul>'
            + "".join(
                f"<li><b>{page.escape(g.category)}</b> ({g.prompts} prompts): {page.escape(g.skipped)}</li>"
                for g in skipped
            )
            + "</ul>"
        )
    return section("categories", note + (grid if rated else "") + listed)


def _cell(method: str, group: GroupLine, model: str) -> str:
    """A model's rank in a group, its rating as the title; highlighted when it is the group's top."""
    found = next(((rank, rating) for m, rank, rating in group.ranked if m == model), None)
    if found is None:
        return "<td>–</td>"
    rank, rating = found
    top = ' class="top"' if rank == 1 else ""
    title = f"{model} in {group.category}: {methods_registry.format_rating(method, rating)}"
    return f'<td{top} title="{page.escape(title)}">{rank}</td>'


def _wide(models: list[str], groups: list[GroupLine], full: dict, method: str) -> str:
    """Models as rows, groups as columns (with their prompt counts), the full run's rank first."""
    head = '<th class="name">model</th><th>all prompts</th>' + "".join(
        f"<th>{page.escape(g.category)}<br><small>{g.prompts} prompts</small></th>" for g in groups
    )
    rows = []
    for model in models:
        overall = full.get(model)
        first = (
            "<td>–</td>"
            if overall is None
            else f'<td title="{page.escape(model)} on all prompts: '
            f'{page.escape(methods_registry.format_rating(method, overall.rating))}">{overall.rank}</td>'
        )
        rows.append(
            f'<tr><td class="name">{page.escape(model)}</td>{first}'
            + "".join(_cell(method, g, model) for g in groups)
            + "</tr>"
        )
    tops = (
        '<tr><td class="name">top</td><td></td>'
        + "".join(f'<td class="name">{page.escape(", ".join(g.top))}</td>' for g in groups)
        + "</tr>"
    )
    return f'<table class="categories"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}{tops}</tbody></table>'


def _long(grouping: str, models: list[str], groups: list[GroupLine], method: str) -> str:
    """Groups as rows (many of them), models as columns."""
    head = f'<th class="name">{grouping}</th><th>prompts</th><th class="name">top</th>' + "".join(
        f"<th>{page.escape(m)}</th>" for m in models
    )
    rows = [
        f'<tr><td class="name">{page.escape(g.category)}</td><td>{g.prompts}</td>'
        f'<td class="name">{page.escape(", ".join(g.top))}</td>'
        + "".join(_cell(method, g, m) for m in models)
        + "</tr>"
        for g in groups
    ]
    return f'<table class="categories"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
