"""What commands print: the model-ratings table, an ingest's or import's changes, a judge plan."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from eqarena import warehouse
from eqarena.judge.plan import PlanSummary
from eqarena.warehouse.ratings import RatingRow, read_ratings


def warehouse_file(db: Path | None) -> Path:
    return warehouse.resolve_db_path(db).resolve()


def print_model_ratings(db: Path | None, run_id: str, rows: list[RatingRow] | None = None) -> None:
    """A table of the run's model ranks and ratings per method (`rows`: the run's king ratings as read
    already, else read from the warehouse)."""
    from eqarena.methods import label, ordered

    if rows is None:
        with closing(warehouse.connect(db, read_only=True)) as con:
            rows = [r for r in read_ratings(con, run_id) if r.player == "king"]
    methods = ordered({r.method for r in rows})
    by = {(r.method, r.action): r for r in rows}
    models = sorted({r.action for r in rows}, key=lambda m: [by[(k, m)].rank if (k, m) in by else 99 for k in methods])
    table = Table(title=f"model ratings, run {run_id}", caption="rank (rating) per method")
    table.add_column("model")
    for m in methods:
        table.add_column(label(m), justify="right")
    for model in models:
        table.add_row(model, *[_rank_cell(by[(m, model)]) if (m, model) in by else "–" for m in methods])
    Console().print(table)


def _rank_cell(row: RatingRow) -> str:
    from eqarena.methods import format_rating

    return f"{row.rank} ({format_rating(row.method, row.rating)})"


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
