"""Why an equilibrium answer looks odd, in plain sentences.

An equilibrium of the king-of-the-hill game can be exact and still surprise a reader: models tied at
0 or at one low value, a winner that loses most of its battles, a ranking that rests on a handful of
prompts or on cells no judge saw. `diagnose` looks at the headline method's ratings (the method
`verdict.headline_method` picks) for these signs and explains each from the run's own numbers:

- ties: every model the equilibrium plays as king is a best response and rates 0 (paper eq. 1), and
  with one king every other model is rated by a single payoff, so models doing equally badly on the
  equilibrium's prompts tie;
- a prompt support under `SMALL_PROMPT_SUPPORT` of the prompts: the few prompts decide the ranking;
- ratings resting mostly on imputed cells (`imputed_share` > `IMPUTED_MAJORITY`);
- a model ranked far apart by the headline method and by BT or CCE, with the reason read from its
  king mass, imputed share and mean payoff;
- an NE whose trace stopped before the branch's limit (a continuum of equilibria), with the bound
  the solver reports on how far its estimate still moved (docs/game.md, "What is guaranteed");

and names the prompts that decide the equilibrium (its prompt support, by mass) with the king-vs-rebel
payoffs on them, and which method to read instead.

Three of these signs make the headline method unfit to *rank* the models, and the answer then leads with
another method (`Diagnosis.lead`, CCE where the run has it, else BT; `verdict.lead_method`): a prompt
support under `SMALL_PROMPT_SUPPORT`; fewer distinct ranks than half the models (`FEW_RANKS`); a trace
stopped on a continuum of equilibria whose limit estimate last moved by `UNCERTAIN_LIMIT` or more (or
gave no estimate), where which equilibrium the selection picks is not pinned down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from eqarena.messages import ordinal
from eqarena.methods import CCE, COMPARED, LEAD_INSTEAD, REFERENCE, format_rating, get_method, is_equilibrium, label

SMALL_PROMPT_SUPPORT = 0.02  # a prompt support under 2% of the prompts is "a handful"
IMPUTED_MAJORITY = 0.5  # a rating resting more than half on imputed cells
DECIDING_PROMPTS = 5  # deciding prompts shown
PAYOFF_MODELS = 3  # kings and rebels shown per deciding prompt
FEW_RANKS = 0.5  # fewer distinct ranks than this share of the models: the headline does not order them
UNCERTAIN_LIMIT = 1e-2  # a limit estimate that last moved this much (L1) leaves the selection open


@dataclass(frozen=True)
class Evidence:
    """What `diagnose` reads from one rate run: `table` has the king ratings of every method (columns of
    `warehouse.ratings.read_rating_table`: method, action, rank, rating, mass, imputed_share, ...);
    `support[method][player]` = (support size, number of actions); `prompt_mass` and `rebel_mass` are
    the headline method's marginals on their supports; `payoffs[(prompt, king, rebel)]` = u_king on the
    deciding prompts; `mean_payoffs` the mean u_king of each model over all prompts and opponents;
    `limits[method]` = (how the NE solver ended its trace, the last move of its limit estimate or None),
    from the stored diagnostics `limit` and `limit_change`; `answered`, the models whose answers the dataset
    holds (a judge can judge only their pairs: imported judgments and scores come without answers)."""

    method: str
    table: pl.DataFrame
    support: Mapping[str, Mapping[str, tuple[int, int]]]
    prompt_mass: Mapping[str, float]
    rebel_mass: Mapping[str, float]
    payoffs: Mapping[tuple[str, str, str], tuple[float, bool]]
    mean_payoffs: Mapping[str, float]
    prompt_texts: Mapping[str, str]
    limits: Mapping[str, tuple[str, float | None]] = field(default_factory=dict)
    answered: frozenset[str] | None = None  # models with answers in the dataset (None: not known)


# How the NE solver ends a trace that did not reach the branch's limit (solvers/nash/limiting_logit.py).
UNREACHED_LIMITS = ("trace_stopped", "max_lambda")


@dataclass(frozen=True)
class DecidingPrompt:
    prompt_id: str
    mass: float
    text: str | None
    payoffs: tuple[tuple[str, str, float, bool], ...]  # (king, rebel, u_king, imputed)


@dataclass(frozen=True)
class Diagnosis:
    """The headline method's findings (plain sentences), the method to read instead, and the prompts
    deciding its equilibrium (filled when a finding points at them)."""

    method: str
    findings: tuple[str, ...]
    advice: str | None
    deciding: tuple[DecidingPrompt, ...]
    lead: str | None = None  # the method the answer leads with instead of `method` (module docstring)
    unfit: tuple[str, ...] = ()  # why `method` cannot rank the models here, as clauses


def deciding_prompt_ids(prompt_mass: Mapping[str, float]) -> list[str]:
    """The equilibrium's most weighted prompts, heaviest first."""
    return [p for p, _ in sorted(prompt_mass.items(), key=lambda kv: (-kv[1], kv[0]))[:DECIDING_PROMPTS]]


def shown_models(table: pl.DataFrame, method: str, rebel_mass: Mapping[str, float]) -> tuple[list[str], list[str]]:
    """Kings and rebels whose payoffs are shown on the deciding prompts: the king support and the model
    ranked furthest from BT / CCE as kings, the rebel support as rebels (heaviest first)."""
    rows = _rows(table, method)
    kings = [r["action"] for r in sorted(rows, key=lambda r: -(r["mass"] or 0.0)) if (r["mass"] or 0.0) > 0]
    for found in _disagreements(table, method):
        if found[0] not in kings:
            kings.append(found[0])
    rebels = [m for m, _ in sorted(rebel_mass.items(), key=lambda kv: (-kv[1], kv[0]))]
    return kings[:PAYOFF_MODELS], rebels[:PAYOFF_MODELS]


def diagnose(e: Evidence) -> Diagnosis:
    """The findings of the module docstring for `e.method`; none for a model-rating headline method."""
    if not is_equilibrium(e.method):
        return Diagnosis(e.method, (), None, ())
    rows = _rows(e.table, e.method)
    name = label(e.method)
    kings = e.support.get(e.method, {}).get("king")
    prompts = e.support.get(e.method, {}).get("prompt")
    findings: list[str] = []
    advice: list[str] = []
    unfit: list[str] = []  # why the method cannot rank the models here

    top = [r for r in rows if r["rank"] == 1]
    if len(top) > 1:
        masses = ", ".join(
            f"{r['action']} {r['mass']:.0%}"
            for r in sorted(top, key=lambda r: -(r["mass"] or 0))
            if r["mass"] is not None
        )
        findings.append(
            f"{_names([r['action'] for r in top])} tie first: each is a best response as king to the "
            f"equilibrium's prompts and rebels, so each rates 0 (eq. 1)"
            + (f"; the equilibrium plays them with king mass {masses}" if masses else "")
            + ". A tie at 0 means no model gains by switching to another, not that they are equally strong."
        )

    ranks = len({r["rank"] for r in rows})
    if len(rows) >= 4 and ranks < FEW_RANKS * len(rows):
        unfit.append(f"it gives {len(rows)} models only {ranks} distinct ranks")
    for tied in _tie_groups(rows):
        rating = format_rating(e.method, tied[0]["rating"])
        names = _names([r["action"] for r in tied], limit=4)
        if kings is not None and kings[0] == 1 and prompts is not None:
            king = next(r["action"] for r in rows if (r["mass"] or 0.0) > 0)
            findings.append(
                f"{len(tied)} models tie at {rating} ({names}): the equilibrium plays one king, {king} (king "
                f"support 1 of {kings[1]}), so every other model is rated by one number, its payoff as king "
                f"against the equilibrium's rebels on its {_count(prompts[0], 'prompt')}; models that do "
                "equally well there tie, whatever they do on the other prompts."
            )
        else:
            findings.append(
                f"{len(tied)} models tie at {rating} ({names}): they do equally well as king against "
                f"the equilibrium's prompts and rebels."
            )
        if better := _orders(e.table, e.method, [r["action"] for r in tied]):
            advice.append(f"to order the tied models, read {label(better)}")

    if prompts is not None and prompts[0] < SMALL_PROMPT_SUPPORT * prompts[1]:
        findings.append(
            f"The {name} rests on {prompts[0]} of {prompts[1]:,} prompts ({prompts[0] / prompts[1]:.1%}): its "
            "ranking is decided on those prompts (listed with their payoffs), the others carry no weight."
        )
        unfit.append(f"it rests on {prompts[0]} of {prompts[1]:,} prompts")
        broader = [m for m in COMPARED if m != e.method and m in _methods(e.table)]
        if broader:
            advice.append(f"for a ranking over more of the prompts, read {' or '.join(label(m) for m in broader)}")

    imputed = sorted(
        (r for r in rows if (r["imputed_share"] or 0.0) > IMPUTED_MAJORITY), key=lambda r: -r["imputed_share"]
    )
    if imputed:
        shares = ", ".join(f"{r['action']} {r['imputed_share']:.0%}" for r in imputed[:4])
        more = f" and {len(imputed) - 4} more" if len(imputed) > 4 else ""
        first = " (the top model among them)" if any(r["rank"] == 1 for r in imputed) else ""
        findings.append(
            f"{len(imputed)} of {len(rows)} {name} ratings{first} rest mostly on imputed cells, payoffs predicted "
            f"for model pairs no judge compared on those prompts: {shares}{more}."
        )
        unanswered = sorted(r["action"] for r in imputed if e.answered is not None and r["action"] not in e.answered)
        if REFERENCE in _methods(e.table) and not unanswered:
            advice.append(
                "BT is fit on the judged battles alone; judge the missing pairs (eqarena judge) before "
                f"trusting the {name} order"
            )
        elif REFERENCE in _methods(e.table):
            advice.append(
                f"BT is fit on the judged battles alone; the dataset holds no answers of {_names(unanswered, limit=4)} "
                f"to judge the missing pairs with (imported data), so read BT, or import judgments of those pairs, "
                f"before trusting the {name} order"
            )

    for model, ours, theirs, other in _disagreements(e.table, e.method)[:2]:
        findings.append(_disagreement_sentence(e, rows, model, ours, theirs, other))

    how, change = e.limits.get(e.method, ("", None))
    if how in UNREACHED_LIMITS:
        bound = "no bound: it stopped before two estimates" if change is None else f"last moved by {change:.2g}"
        findings.append(
            f"The {name} solver stopped before the end of its branch: this game has a continuum of equilibria "
            f"(common with judgments on a coarse grid) and the branch was still creeping along it. The ratings "
            f"are those of an exact equilibrium, but which point of the continuum the selection picks is known "
            f"only as well as the limit's estimate ({bound}, L1 over the players' strategies)."
        )
        if change is None or change >= UNCERTAIN_LIMIT:
            unfit.append("its solver stopped on a continuum of equilibria, so which one it selects is not pinned down")
        broader = [m for m in COMPARED if m != e.method and is_equilibrium(m) and m in _methods(e.table)]
        if broader:
            advice.append(
                f"for a selection that is unique on every game, read {' or '.join(label(m) for m in broader)}"
            )

    deciding = ()
    if findings and e.prompt_mass:
        deciding = tuple(_deciding(e, p) for p in deciding_prompt_ids(e.prompt_mass))
    said = "; ".join(dict.fromkeys(advice))
    lead = next((m for m in LEAD_INSTEAD if m != e.method and m in _methods(e.table)), None) if unfit else None
    return Diagnosis(
        e.method,
        tuple(findings),
        said[0].upper() + said[1:] + "." if said else None,
        deciding,
        lead,
        tuple(unfit) if lead else (),
    )


def _disagreement_sentence(e: Evidence, rows: list[dict], model: str, ours: int, theirs: int, other: str) -> str:
    row = next(r for r in rows if r["action"] == model)
    name, their_name = label(e.method), label(other)
    causes = []
    if (row["mass"] or 0.0) > 0:
        causes.append(
            f"the {name} plays it as king (mass {row['mass']:.0%}): on the equilibrium's prompts it is "
            "a best response to the rebels"
        )
    theirs_row = next((r for r in _rows(e.table, other) if r["action"] == model), None)
    if theirs_row is not None and (theirs_row["mass"] or 0.0) > 0:
        causes.append(
            f"the {their_name} plays it as king (mass {theirs_row['mass']:.0%})"
            + (
                ", and a CCE can pair a king with the prompts it wins, so a specialist can rate high"
                if get_method(other).concept == CCE and theirs < ours
                else ""
            )
        )
    if (row["imputed_share"] or 0.0) > IMPUTED_MAJORITY:
        causes.append(f"its {name} rating rests {row['imputed_share']:.0%} on imputed cells")
    if model in e.mean_payoffs:
        order = sorted(e.mean_payoffs, key=lambda x: -e.mean_payoffs[x])
        average = order.index(model) + 1
        closer = (
            their_name
            if abs(theirs - average) < abs(ours - average)
            else name
            if abs(ours - average) < abs(theirs - average)
            else None
        )
        causes.append(
            f"by mean payoff over all prompts and opponents ({e.mean_payoffs[model]:+.3f}) it is "
            f"{ordinal(average)} of {len(order)}" + (f", nearer its {closer} place" if closer else "")
        )
    return (
        f"{name} and {their_name} disagree on {model}: {ordinal(ours)} of {len(rows)} by {name}, "
        f"{ordinal(theirs)} by {their_name}" + (f"; {'; '.join(causes)}." if causes else ".")
    )


def _deciding(e: Evidence, prompt: str) -> DecidingPrompt:
    kings, rebels = shown_models(e.table, e.method, e.rebel_mass)
    cells = tuple(
        (k, r, *e.payoffs[(prompt, k, r)]) for k in kings for r in rebels if k != r and (prompt, k, r) in e.payoffs
    )
    return DecidingPrompt(prompt, e.prompt_mass[prompt], e.prompt_texts.get(prompt), cells)


def _rows(table: pl.DataFrame, method: str) -> list[dict]:
    return table.filter(pl.col("method") == method).sort("rank", "action").to_dicts()


def _methods(table: pl.DataFrame) -> list[str]:
    return table["method"].unique().to_list()


def _tie_groups(rows: list[dict]) -> list[list[dict]]:
    """Groups of two or more models below the top sharing one rank (ratings equal at the stored
    rounding, warehouse.ratings.RANK_DECIMALS)."""
    groups: dict[int, list[dict]] = {}
    for r in rows:
        if r["rank"] != 1:
            groups.setdefault(r["rank"], []).append(r)
    return [g for g in groups.values() if len(g) > 1]


def _orders(table: pl.DataFrame, method: str, models: list[str]) -> str | None:
    """The compared method that gives `models` the most distinct ranks, if it separates any."""
    best, spread = None, 1
    for other in COMPARED:
        if other == method or other not in _methods(table):
            continue
        ranks = table.filter((pl.col("method") == other) & pl.col("action").is_in(models))["rank"].n_unique()
        if ranks > spread:
            best, spread = other, ranks
    return best


def _disagreements(table: pl.DataFrame, method: str) -> list[tuple[str, int, int, str]]:
    """(model, rank by `method`, rank by the other, other method) for models whose ranks differ by at
    least max(2, M/4), largest gap first, one per model."""
    ours = {r["action"]: r["rank"] for r in _rows(table, method)}
    threshold = max(2, math.ceil(len(ours) / 4))
    found: dict[str, tuple[str, int, int, str]] = {}
    for other in COMPARED:
        if other == method or other not in _methods(table):
            continue
        for r in _rows(table, other):
            if r["action"] in ours and abs(ours[r["action"]] - r["rank"]) >= threshold:
                gap = abs(ours[r["action"]] - r["rank"])
                if r["action"] not in found or gap > abs(found[r["action"]][1] - found[r["action"]][2]):
                    found[r["action"]] = (r["action"], ours[r["action"]], r["rank"], other)
    return sorted(found.values(), key=lambda f: (-abs(f[1] - f[2]), f[1], f[0]))


def _names(models: list[str], limit: int = 6) -> str:
    if len(models) > limit:
        return ", ".join(models[:limit]) + f" and {len(models) - limit} more"
    return models[0] if len(models) == 1 else ", ".join(models[:-1]) + f" and {models[-1]}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
