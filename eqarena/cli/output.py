"""What commands print: the model-ratings table, an ingest's or import's changes, a judge plan.

Names and texts come from users' files: every line and table cell goes out through `say` / `cells`,
which write control characters as escapes (`messages.terminal_safe`) and take cells as plain text
(a model named `[bold]x` is not rich markup)."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from eqarena import warehouse
from eqarena.judge.plan import PlanSummary
from eqarena.messages import shortened, terminal_safe


def say(message: object = "", *, err: bool = False) -> None:
    """`typer.echo` of `message` with its control characters written as escapes (`terminal_safe`)."""
    typer.echo(terminal_safe(str(message)), err=err)


@contextmanager
def said_if_interrupted(message: str) -> Iterator[None]:
    """Say `message` (what the interrupted command kept) on standard error when the block is stopped by
    SIGINT or SIGTERM (a KeyboardInterrupt), then let the interrupt go on."""
    try:
        yield
    except KeyboardInterrupt:
        say(message, err=True)
        raise


def cells(*values: str) -> list[Text]:
    """Table cells of `values`: plain text (no rich markup), control characters as escapes."""
    return [Text(terminal_safe(v)) for v in values]


def warehouse_file(db: Path | None) -> Path:
    return warehouse.resolve_db_path(db).resolve()


def print_model_ratings(db: Path | None, run_id: str) -> None:
    """The answer first (eqarena/report/verdict.py), then a table of the run's models ordered by the
    method the answer leads with (`verdict.lead_method`): its rating, 95% interval and P(top 1), and every
    method's rank; then the headline method's diagnosis (eqarena/report/diagnosis.py) and, where the answer
    leads with another method, that method's."""
    from eqarena.methods import format_interval, format_rating, interval_note, label, ordered
    from eqarena.report.evidence import read_diagnoses
    from eqarena.report.verdict import verdict
    from eqarena.warehouse.ratings import read_rating_table, read_run

    with closing(warehouse.connect(db, read_only=True)) as con:
        rows = read_rating_table(con, run_id)
        found, lead_found = read_diagnoses(con, run_id, read_run(con, run_id).parameters.get("dataset", ""))
    answer = verdict(rows, found)
    methods = ordered(rows["method"].unique().to_list())
    by = {(r["method"], r["action"]): r for r in rows.iter_rows(named=True)}
    headline = [
        r["action"] for r in rows.filter(rows["method"] == answer.method).sort("rank", "action").iter_rows(named=True)
    ]
    others = [m for m in methods if m != answer.method]
    caption = f"ordered by {label(answer.method)}; interval and P(top 1) over resampled prompts"
    shown = [
        format_interval(answer.method, by[(answer.method, m)]["ci_lo"], by[(answer.method, m)]["ci_hi"])
        for m in headline
    ]
    if others:
        caption += f"; ranks by {' / '.join(label(m) for m in others)}"
    if note := interval_note(shown):
        caption += f"; {note}"
    table = Table(title=f"model ratings, run {run_id}", box=box.SIMPLE_HEAD, pad_edge=False, caption=caption)
    table.add_column("model", no_wrap=True)
    table.add_column("rank", justify="right")
    table.add_column(label(answer.method), justify="right", no_wrap=True)
    table.add_column("95% interval", justify="right", no_wrap=True)
    table.add_column("P(top 1)", justify="right", no_wrap=True)
    if others:
        table.add_column("ranks", justify="center", no_wrap=True)
    for model in headline:
        head = by[(answer.method, model)]
        interval = format_interval(answer.method, head["ci_lo"], head["ci_hi"])
        top1 = f"{head['p_top1']:.0%}" if head["p_top1"] is not None else "–"
        ranks = " / ".join(str(by[(m, model)]["rank"]) if (m, model) in by else "–" for m in others)
        table.add_row(
            *cells(
                model,
                str(head["rank"]),
                format_rating(answer.method, head["rating"]),
                interval,
                top1,
                *([ranks] if others else []),
            )
        )
    for line in answer.lines:
        say(line)
    Console().print(table)
    print_diagnosis(found)
    if lead_found is not None:
        print_diagnosis(lead_found)


def print_group_ratings(db: Path | None, run_id: str) -> None:
    """The per-category leaderboard of a run with --by: each category's prompts, top model and ranking by
    the headline method (report/category_table.py), skipped categories with the reason."""
    from eqarena.methods import label
    from eqarena.report.category_table import category_table
    from eqarena.warehouse.category_ratings import read_group_ratings, read_groups

    with closing(warehouse.connect(db, read_only=True)) as con:
        found = category_table(read_groups(con, run_id), read_group_ratings(con, run_id))
    if found is None:
        return
    name = label(found.method) if found.method else "–"
    table = Table(
        title=f"by {found.grouping}: {name} ranking of each {found.grouping} alone",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        padding=0,
        caption="point ratings (no bootstrap); = ties, > ranks below; table category_ratings",
    )
    table.add_column(found.grouping, no_wrap=True)
    table.add_column("prompts", justify="right")
    table.add_column("top", no_wrap=True)
    table.add_column(f"{name} ranking")
    for g in found.groups:
        if g.skipped:
            table.add_row(*cells(g.category, str(g.prompts), "–", f"skipped: {shortened(g.skipped, 160)}"))
        else:
            table.add_row(*cells(g.category, str(g.prompts), ", ".join(g.top), g.ranking()))
    Console(width=min(shutil.get_terminal_size().columns, 100)).print(table)


def print_diagnosis(found) -> None:
    """The headline method's warning signs (report/diagnosis.py), the method to read instead, and the
    prompts deciding its equilibrium; nothing when there is no sign."""
    from eqarena.methods import label

    if not found.findings:
        return
    width = max(40, min(shutil.get_terminal_size().columns, 110))
    count = len(found.findings)
    say(f"Read the {label(found.method)} with care ({count} sign{'s' if count > 1 else ''}):")
    for finding in found.findings:
        say(textwrap.fill(finding, width, initial_indent="  - ", subsequent_indent="    "))
    if found.advice:
        say(textwrap.fill(found.advice, width, initial_indent="  ", subsequent_indent="  "))
    if found.deciding:
        say(
            f"  prompts deciding the {label(found.method)} (king's payoff against the rebel, -1 loss to "
            "+1 win; * imputed):"
        )
        for prompt in found.deciding:
            cells = ", ".join(f"{k} vs {r} {u:+.2f}{'*' if imputed else ''}" for k, r, u, imputed in prompt.payoffs)
            text = f' "{shortened(prompt.text, 50)}"' if prompt.text else ""
            say(
                textwrap.fill(
                    f"{prompt.prompt_id} (mass {prompt.mass:.0%}){text}: {cells}",
                    width,
                    initial_indent="    ",
                    subsequent_indent="      ",
                )
            )


def print_changes(kind: str, summary) -> None:
    """The per-table new / unchanged / changed counts of an ingest or import, and what changed."""
    table = Table(
        title=Text(terminal_safe(f"{kind} {summary.dataset}")), caption=Text(terminal_safe(f"from {summary.source}"))
    )
    for column in ("table", "new", "unchanged", "changed", "replaced"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for t in summary.tables:
        table.add_row(*cells(t.table, f"{t.new:,}", f"{t.unchanged:,}", f"{t.changed:,}", f"{t.replaced:,}"))
    Console().print(table)
    for t in summary.tables:
        if t.changed:
            action = "replaced" if summary.replace else "kept the stored version (use --replace to overwrite)"
            keys = "; ".join("/".join(map(str, k)) for k in t.changed_keys)
            more = f" and {t.changed - len(t.changed_keys)} more" if t.changed > len(t.changed_keys) else ""
            typer.secho(terminal_safe(f"{t.table}: {t.changed:,} changed, {action}: {keys}{more}"), fg="yellow")
    say(
        f"{summary.dataset}: {summary.new:,} new, {summary.unchanged:,} unchanged, "
        f"{summary.changed:,} changed (run {summary.run_id})"
    )


def print_plan(plan: PlanSummary) -> None:
    """Two lines: what the judge run covers, and what its missing calls cost."""
    cost = "unknown (no price; see --prices)" if plan.cost_usd is None else f"${plan.cost_usd:,.4f}"
    say(
        f"{plan.judge} on {plan.dataset}: {plan.prompts} prompts x {len(plan.models)} models, template "
        f"{plan.template} ({plan.template_hash}); {plan.done_samples:,} of {plan.wanted_samples:,} "
        f"samples held, {plan.pending_samples:,} pending in batches"
    )
    say(
        f"plan: {plan.calls:,} calls in {plan.requests:,} requests, ~{plan.tokens_in:,} input + "
        f"~{plan.tokens_out:,} output tokens, {cost}" + (" (batch price)" if plan.batch else "")
    )


def print_methods() -> None:
    """The method registry, one method per line: name, what it is, and (*) whether rated by default."""
    from eqarena.methods import registered

    width = max(len(m.name) for m in registered())
    for m in registered():
        kind = f"{m.concept}, {m.target} target" if m.is_equilibrium else m.concept
        say(f"{m.name:<{width}}  {'*' if m.default else ' '} {m.label}: {m.description} ({kind})")
    say("* rated when --methods is not given")
