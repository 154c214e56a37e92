"""What commands print: the model-ratings table, an ingest's or import's changes, a judge plan."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from eqarena import warehouse
from eqarena.judge.plan import PlanSummary


def warehouse_file(db: Path | None) -> Path:
    return warehouse.resolve_db_path(db).resolve()


def print_model_ratings(db: Path | None, run_id: str) -> None:
    """The answer first (eqarena/report/verdict.py), then a table of the run's models ordered by the
    headline method: its rating, 95% interval and P(top 1), and every method's rank (rating)."""
    from eqarena.methods import format_rating, label, ordered
    from eqarena.report.verdict import verdict
    from eqarena.warehouse.ratings import read_rating_table

    with closing(warehouse.connect(db, read_only=True)) as con:
        rows = read_rating_table(con, run_id)
    answer = verdict(rows)
    methods = ordered(rows["method"].unique().to_list())
    by = {(r["method"], r["action"]): r for r in rows.iter_rows(named=True)}
    headline = [r["action"] for r in rows.filter(rows["method"] == answer.method).sort("rank", "action")
                .iter_rows(named=True)]
    others = [m for m in methods if m != answer.method]
    caption = f"ordered by {label(answer.method)}; interval and P(top 1) over resampled prompts"
    if others:
        caption += f"; ranks by {' / '.join(label(m) for m in others)}"
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
        interval = (f"[{format_rating(answer.method, head['ci_lo'])}, {format_rating(answer.method, head['ci_hi'])}]"
                    if head["ci_lo"] is not None and head["ci_hi"] is not None else "–")
        top1 = f"{head['p_top1']:.0%}" if head["p_top1"] is not None else "–"
        ranks = " / ".join(str(by[(m, model)]["rank"]) if (m, model) in by else "–" for m in others)
        table.add_row(model, str(head["rank"]), format_rating(answer.method, head["rating"]), interval, top1,
                      *([ranks] if others else []))
    for line in answer.lines:
        typer.echo(line)
    Console().print(table)


def print_changes(kind: str, summary) -> None:
    """The per-table new / unchanged / changed counts of an ingest or import, and what changed."""
    table = Table(title=f"{kind} {summary.dataset}", caption=f"from {summary.source}")
    for column in ("table", "new", "unchanged", "changed", "replaced"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for t in summary.tables:
        table.add_row(t.table, f"{t.new:,}", f"{t.unchanged:,}", f"{t.changed:,}", f"{t.replaced:,}")
    Console().print(table)
    for t in summary.tables:
        if t.changed:
            action = "replaced" if summary.replace else "kept the stored version (use --replace to overwrite)"
            keys = "; ".join("/".join(map(str, k)) for k in t.changed_keys)
            more = f" and {t.changed - len(t.changed_keys)} more" if t.changed > len(t.changed_keys) else ""
            typer.secho(f"{t.table}: {t.changed:,} changed, {action}: {keys}{more}", fg="yellow")
    typer.echo(f"{summary.dataset}: {summary.new:,} new, {summary.unchanged:,} unchanged, "
               f"{summary.changed:,} changed (run {summary.run_id})")


def print_plan(plan: PlanSummary) -> None:
    """Two lines: what the judge run covers, and what its missing calls cost."""
    cost = "unknown (no price; see --prices)" if plan.cost_usd is None else f"${plan.cost_usd:,.4f}"
    typer.echo(f"{plan.judge} on {plan.dataset}: {plan.prompts} prompts x {len(plan.models)} models, template "
               f"{plan.template} ({plan.template_hash}); {plan.done_samples:,} of {plan.wanted_samples:,} "
               f"samples held, {plan.pending_samples:,} pending in batches")
    typer.echo(f"plan: {plan.calls:,} calls in {plan.requests:,} requests, ~{plan.tokens_in:,} input + "
               f"~{plan.tokens_out:,} output tokens, {cost}" + (" (batch price)" if plan.batch else ""))


def print_methods() -> None:
    """The method registry, one method per line: name, what it is, and (*) whether rated by default."""
    from eqarena.methods import registered

    width = max(len(m.name) for m in registered())
    for m in registered():
        kind = f"{m.concept}, {m.target} target" if m.is_equilibrium else m.concept
        typer.echo(f"{m.name:<{width}}  {'*' if m.default else ' '} {m.label}: {m.description} ({kind})")
    typer.echo("* rated when --methods is not given")
