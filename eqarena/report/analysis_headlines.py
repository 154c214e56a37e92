"""One plain sentence per robustness analysis, saying whether it puts the ranking in doubt: the clone
analysis (do copies of prompts move the headline method's ranks?) and the risk analysis (do the other
Nash equilibria of the game put another model first?)."""

from __future__ import annotations

import polars as pl

from eqarena.messages import ordinal
from eqarena.methods import REFERENCE, label

TOP_TOLERANCE = 1e-4  # king ratings this close to an equilibrium's best are first too (ranks' rounding)
SETTLED_SHARE = 0.9  # the top is "not in doubt" when this share of the equilibria agrees


def clone_headline(robustness: pl.DataFrame, method: str, target: str) -> str:
    """From clone_robustness rows (variant, n_clones, method, model_id, rank): do the ranks of
    `method` hold as prompts adversarial to `target` are copied, and does Bradley-Terry's?"""
    held = {
        variant: _largest_unchanged(robustness, method, variant)
        for variant in robustness["variant"].unique(maintain_order=True).to_list()
    }
    holds = [f"{top:,} {variant}" for variant, (_, top, first) in held.items() if first is None]
    changes = [
        f"changes at {first:,} {variant} copies ({_move(robustness, method, variant, target, first)})"
        for variant, (_, _, first) in held.items()
        if first is not None
    ]
    said = ([f"holds with up to {' and '.join(holds)} copies"] if holds else []) + changes
    sentence = f"Robustness: the {label(method)} ranking {', but '.join(said)} of the prompts {target} is weakest on"
    if method != REFERENCE and REFERENCE in robustness["method"].unique().to_list():
        bt = _largest_unchanged(robustness, REFERENCE, "exact")
        if bt[2] is not None:
            moved = _move(robustness, REFERENCE, "exact", target, bt[2])
            sentence += f"; {label(REFERENCE)}'s changes at {bt[2]:,} exact copies ({moved})"
        else:
            sentence += f"; so does {label(REFERENCE)}'s"
    exact = held.get("exact")
    verdict = (
        "redundant prompts do not decide this ranking"
        if exact is not None and exact[2] is None
        else "redundant prompts can change this ranking: read it with the clone table of the report"
    )
    return f"{sentence}: {verdict}."


def _largest_unchanged(rows: pl.DataFrame, method: str, variant: str) -> tuple[int, int, int | None]:
    """(largest n with the n = 0 ranks, largest n tried, first n that changed them or None)."""
    runs = rows.filter((pl.col("method") == method) & (pl.col("variant") == variant)).sort("n_clones", "model_id")
    counts = runs["n_clones"].unique().sort().to_list()
    if not counts:
        return 0, 0, None
    base = runs.filter(pl.col("n_clones") == counts[0])["rank"].to_list()
    changed = [n for n in counts[1:] if runs.filter(pl.col("n_clones") == n)["rank"].to_list() != base]
    first = changed[0] if changed else None
    unchanged = max([n for n in counts if first is None or n < first])
    return unchanged, counts[-1], first


def _move(rows: pl.DataFrame, method: str, variant: str, target: str, n: int) -> str:
    runs = rows.filter((pl.col("method") == method) & (pl.col("variant") == variant))
    before = runs.filter((pl.col("n_clones") == runs["n_clones"].min()) & (pl.col("model_id") == target))["rank"]
    after = runs.filter((pl.col("n_clones") == n) & (pl.col("model_id") == target))["rank"]
    if before.is_empty() or after.is_empty() or before[0] == after[0]:
        return "other models move"
    return f"{target} {'falls' if after[0] > before[0] else 'rises'} from {ordinal(before[0])} to {ordinal(after[0])}"


def risk_headline(dominance: pl.DataFrame, king_ratings: pl.DataFrame, pure_kings: list[str]) -> str:
    """From risk_dominance rows, the king rows of risk_equilibrium_ratings (equilibrium, action, rating)
    and the king of every pure NE: is the selected NE's top model first in the other equilibria too?"""
    tops = {}
    for (eq,), rows in king_ratings.group_by(["equilibrium"]):
        best = rows["rating"].max()
        tops[int(eq)] = set(rows.filter(pl.col("rating") >= best - TOP_TOLERANCE)["action"].to_list())
    selected = int(dominance.filter(pl.col("is_selected"))["equilibrium"][0])
    ours = tops[selected]
    k = len(tops)
    agree = sum(1 for top in tops.values() if top & ours)
    orders = {
        eq: tuple(rows.sort("rating", "action", descending=[True, False])["action"].to_list())
        for (eq,), rows in king_ratings.group_by(["equilibrium"])
    }
    same_order = sum(1 for order in orders.values() if order == orders[selected])
    names = " / ".join(sorted(ours))
    pure = ""
    if pure_kings:
        with_top = sum(1 for m in pure_kings if m in ours)
        pure = (
            f" (as do all {len(pure_kings):,} pure ones)"
            if with_top == len(pure_kings)
            else f" ({with_top:,} of the {len(pure_kings):,} pure ones)"
        )
    place = int(dominance.filter(pl.col("is_selected"))["rank_updated"][0])
    sentence = (
        f"Risk: of the {k} Nash equilibria found, {agree} put {names} first{pure} and {same_order} give the "
        f"selected NE's full order; the selected NE is the {ordinal(place)} least risky of {k}"
    )
    if agree >= SETTLED_SHARE * k and same_order == k:
        return f"{sentence}: the ranking is not in doubt."
    if agree >= SETTLED_SHARE * k:
        return f"{sentence}: the top is not in doubt, the order below it depends on the equilibrium played."
    return (
        f"{sentence}: the top depends on which equilibrium is played ({_other_tops(tops, ours)}); the NE "
        "shown is the one the limiting logit selection picks."
    )


def _other_tops(tops: dict[int, set[str]], ours: set[str]) -> str:
    counts: dict[str, int] = {}
    for top in tops.values():
        for model in top - ours:
            counts[model] = counts.get(model, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return ", ".join(f"{m} first in {n} of {len(tops)}" for m, n in ranked) or "no other model first"


def risk_sentence(rows: pl.DataFrame) -> str:
    """Where the selected NE (equilibrium 0) stands among all, by the sum of expected payoffs."""
    selected = rows.filter(pl.col("is_selected")).row(0, named=True)
    k = rows.height
    place = (
        "the least risky" if selected["rank_updated"] == 1 else f"the {ordinal(selected['rank_updated'])} least risky"
    )
    return (
        f"The selected NE (equilibrium {selected['equilibrium']}, the limiting logit equilibrium) is {place} "
        f"of {k} Nash equilibria under the iterated priors ({ordinal(selected['rank_uniform'])} under "
        f"uniform priors)."
    )


def report_headlines(clones, risk, method: str) -> list[str]:
    """The sentences of a rate run's newest analyses (report.analyses.CloneReport / RiskReport, or None)."""
    lines = []
    if clones is not None and not clones.rows.is_empty():
        rated = clones.rows["method"].unique().to_list()
        lines.append(clone_headline(clones.rows, method if method in rated else rated[0], clones.target))
    if risk is not None and not risk.rows.is_empty():
        equilibria = risk.rows["equilibrium"].to_list()
        kings = pl.DataFrame(
            {
                "equilibrium": [e for e in equilibria for _ in risk.models],
                "action": list(risk.models) * len(equilibria),
                "rating": risk.king_ratings.reshape(-1),
            }
        )
        lines.append(risk_headline(risk.rows, kings, risk.pure["king"].to_list()))
    return lines
