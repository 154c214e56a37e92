"""The rating methods: one registry that every part of eqarena reads.

The command line's `--methods` choices, the rate flow, the bootstrap, the report (order, labels,
colours), the clone analysis and the bench all iterate over this table. Adding a method is one
`register(RatingMethod(...))` plus its solver function (a callable, or "module:function" imported on
first use, which keeps this module light: it imports nothing of eqarena, so every layer may use it):

- an *equilibrium* method gives `solve(game, target) -> Equilibrium` (ratings of all three players
  are deviation gains, docs/game.md#ratings, paper eq. 1) and a selection `target`;
- a *model-rating* method gives `fit(u_king, battles, bootstrap, seed) -> ModelFit` (king ratings
  only, optionally with an interval), like Bradley-Terry.

`battles` are the judgments behind u_king ({'prompt', 'model_a', 'model_b': int (K,), 'score': (K,)},
scores in [-1, 1] for model_a), or None where only the tensor is known (the clone analysis): a method
then rates from u_king alone, or, if it `needs_battles`, is not offered there. The rate flow may add
'baseline' (a model index: `rate --baseline`) and 'style' ((K, F) style-feature differences of the two
answers, NaN rows where a text is missing: `rate --style-control`) for the methods that use them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eqarena.exceptions import OptionError

Battles = Mapping[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class ModelFit:
    """A model-rating method's result: king ratings (M,), an optional interval (M,) each, diagnostics."""

    ratings: np.ndarray
    ci_lo: np.ndarray | None = None
    ci_hi: np.ndarray | None = None
    diagnostics: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RatingMethod:
    """One row of the registry.

    name: the id in `--methods`, in DuckDB (`ratings.method`) and in the report; label / colour: how
    the report and the console show it; concept: the solution concept stored with an equilibrium
    ("nash", "cce", "bradley-terry", ...); target: the selection target passed to `solve`
    ("affinity", "uniform"; None for model-rating methods); default: rated when no --methods is given;
    rating_format: how a rating prints (a format spec); needs_battles: rates only from the judgments
    (not from a tensor alone, so the clone analysis leaves it out); warm_starts: `solve` takes
    start=, the dual multipliers of a nearby game's solve (`Equilibrium.multipliers`), and returns the
    same equilibrium from there in fewer steps (bootstrap replicates start from the full data's);
    enabled_by: the rate option (a `RateOptions` field: "baseline", "style_control") that adds the method
    to the ones chosen, and whose value the rate flow hands it.
    """

    name: str
    label: str
    colour: str
    description: str
    concept: str
    target: str | None = None
    solve: Callable[..., Any] | str | None = None  # (game, target=, start=) -> solvers.games.Equilibrium
    fit: Callable[[np.ndarray, Battles | None, int, int], ModelFit] | str | None = None
    default: bool = True
    rating_format: str = "+.3f"
    needs_battles: bool = False
    warm_starts: bool = False
    enabled_by: str | None = None

    def __post_init__(self):
        if (self.solve is None) == (self.fit is None):
            raise ValueError(f"rating method {self.name!r}: give exactly one of solve (equilibrium) or fit")
        if not self.name or "," in self.name or self.name != self.name.strip().lower():
            raise ValueError(f"rating method name {self.name!r}: lower case, no commas or spaces around it")

    @property
    def is_equilibrium(self) -> bool:
        return self.solve is not None

    def model_fit(self, u_king, battles: Battles | None = None, bootstrap: int = 0, seed: int = 0) -> ModelFit:
        """A model-rating method's fit of u_king (P, M, M) (and the battles behind it, if known)."""
        return resolve(self.fit)(np.asarray(u_king, dtype=np.float64), battles, bootstrap, seed)


def resolve(function):
    """A callable, or the callable a "module:attribute" string names (imported on first use)."""
    if isinstance(function, str):
        module, _, name = function.partition(":")
        return getattr(importlib.import_module(module), name)
    return function


_REGISTRY: dict[str, RatingMethod] = {}


def register(method: RatingMethod) -> RatingMethod:
    """Add `method` to the registry (after the ones already there); ValueError if its name is taken."""
    if method.name in _REGISTRY:
        raise ValueError(f"a rating method named {method.name!r} is registered already")
    _REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a registered method (tests that add a toy method take it out again)."""
    _REGISTRY.pop(name, None)


def registered() -> tuple[RatingMethod, ...]:
    """Every registered method, in registration order (the order of tables and plots)."""
    return tuple(_REGISTRY.values())


def method_names(*, default_only: bool = False) -> tuple[str, ...]:
    return tuple(m.name for m in _REGISTRY.values() if m.default or not default_only)


def get_method(name: str) -> RatingMethod:
    """The registered method `name`; OptionError (a ValueError) naming the choices otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise OptionError(f"unknown rating method {name!r} (choose from {', '.join(_REGISTRY)})") from None


def parse_methods(methods: str | Iterable[str] | None) -> tuple[str, ...]:
    """`bt,ne` / ['bt', 'ne'] / None (the default methods) -> known names in registry order."""
    if methods is None:
        return method_names(default_only=True)
    items = methods.split(",") if isinstance(methods, str) else [p for m in methods for p in str(m).split(",")]
    items = [m.strip().lower() for m in items if m.strip()]
    unknown = [m for m in items if m not in _REGISTRY]
    if unknown:
        raise OptionError(f"--methods: unknown method {', '.join(unknown)} (choose from {', '.join(_REGISTRY)})")
    if not items:
        raise OptionError(f"--methods: give at least one of {', '.join(_REGISTRY)}")
    return tuple(m for m in _REGISTRY if m in items)


def ordered(names: Iterable[str]) -> list[str]:
    """`names` in registry order; names not registered (an old run's) follow, sorted."""
    names = set(names)
    known = [m for m in _REGISTRY if m in names]
    return known + sorted(names - set(known))


def label(name: str) -> str:
    return _REGISTRY[name].label if name in _REGISTRY else name


def colour(name: str) -> str:
    return _REGISTRY[name].colour if name in _REGISTRY else "#7f7f7f"


def format_rating(name: str, rating: float) -> str:
    """`rating` as the method `name` prints it (deviation gains: +0.123; Elo: 1034). A value that rounds
    to zero prints as zero with a plus sign (a solver's 1e-12 or -4e-13 is 0, not -0.000)."""
    spec = _REGISTRY[name].rating_format if name in _REGISTRY else "+.3f"
    decimals = int(spec.split(".")[1].rstrip("f")) if "." in spec else 0
    return format(round(rating, decimals) + 0.0, spec)  # + 0.0 turns -0.0 into 0.0


NO_SPREAD = "no spread"  # an interval whose bounds print the same
AT_MOST_ZERO = "0 (max)"  # an equilibrium interval's upper bound at 0, the most a deviation gain can be


def format_interval(name: str, lo: float | None, hi: float | None) -> str:
    """A 95% interval as the method `name` prints it: "[lo, hi]"; "x, no spread" where both bounds print
    as x (the central replicates all give it); an equilibrium's upper bound at 0 as "0 (max)", which no
    equilibrium rating can exceed (eq. 1: a best response gains 0); "–" without an interval."""
    if lo is None or hi is None:
        return "–"
    low, high = format_rating(name, lo), format_rating(name, hi)
    if low == high:
        return f"{low}, {NO_SPREAD}"
    if is_equilibrium(name) and high == format_rating(name, 0.0):
        high = AT_MOST_ZERO
    return f"[{low}, {high}]"


def interval_note(shown: Iterable[str]) -> str:
    """What the `format_interval` texts in `shown` need said: "no spread" and "0 (max)", where they appear."""
    shown = list(shown)
    notes = []
    if any(NO_SPREAD in text for text in shown):
        notes.append(f"{NO_SPREAD}: the central 95% of replicates give that rating")
    if any(AT_MOST_ZERO in text for text in shown):
        notes.append(f"{AT_MOST_ZERO}: no equilibrium rating exceeds 0, a best response's (eq. 1)")
    return "; ".join(notes)


def tensor_methods(names: Iterable[str]) -> tuple[str, ...]:
    """`names` without the methods that need the judgments (what a tensor alone can be rated by)."""
    return tuple(n for n in names if n not in _REGISTRY or not _REGISTRY[n].needs_battles)


def is_equilibrium(name: str) -> bool:
    """Whether `name` rates by an equilibrium (an unregistered name: judged by its stored rows elsewhere)."""
    return name in _REGISTRY and _REGISTRY[name].is_equilibrium


# ---------------------------------------------------------------------------------- the built-ins

register(
    RatingMethod(
        "bt",
        "BT",
        "#4c72b0",
        "Bradley-Terry (Elo scale) on the judged battles, as Chatbot Arena fits it",
        "bradley-terry",
        fit="eqarena.solvers.pairwise.bradley_terry:fit_bradley_terry",
        rating_format=".0f",
    )
)
register(
    RatingMethod(
        "ne",
        "NE",
        "#dd8452",
        "Nash equilibrium (limiting logit equilibrium) selected by the clone-invariant affinity entropy",
        "nash",
        "affinity",
        solve="eqarena.solvers.nash.limiting_logit:nash",
    )
)
register(
    RatingMethod(
        "cce",
        "CCE",
        "#55a868",
        "coarse correlated equilibrium of maximum relative entropy to the affinity target",
        "cce",
        "affinity",
        solve="eqarena.solvers.cce.max_entropy:cce",
        warm_starts=True,
    )
)
register(
    RatingMethod(
        "ne-shannon",
        "NE-Shannon",
        "#c44e52",
        "Nash equilibrium from the uniform target (the classic LLE; not clone-invariant)",
        "nash",
        "uniform",
        solve="eqarena.solvers.nash.limiting_logit:nash",
    )
)
register(
    RatingMethod(
        "cce-shannon",
        "CCE-Shannon",
        "#8172b3",
        "maximum-entropy CCE (uniform target; not clone-invariant)",
        "cce",
        "uniform",
        solve="eqarena.solvers.cce.max_entropy:cce",
        warm_starts=True,
    )
)
register(
    RatingMethod(
        "deviation",
        "Deviation",
        "#937860",
        "deviation ratings: the CCE deviation gains minimised lexicographically, "
        "largest first (Marris et al. 2025; clone-invariant, no selection target)",
        "cce",
        "strictest",
        solve="eqarena.solvers.cce.deviation:deviation",
        default=False,
    )
)
register(
    RatingMethod(
        "winrate",
        "Win rate",
        "#da8bc3",
        "percent win rate against a baseline model (rate --baseline), ties half and "
        "decisive verdicts thrice, both positions per prompt: arena-hard-auto's headline score",
        "win-rate",
        fit="eqarena.solvers.pairwise.win_rate:fit_win_rate",
        default=False,
        rating_format=".1f",
        needs_battles=True,
        enabled_by="baseline",
    )
)
register(
    RatingMethod(
        "bt-style",
        "BT (style)",
        "#8c8c8c",
        "Bradley-Terry with the answers' length and markdown (headers, lists, "
        "bold) as covariates: style control as arena-hard-auto and Chatbot Arena fit it (rate --style-control)",
        "bradley-terry-style",
        fit="eqarena.solvers.pairwise.style_control:fit_style_bradley_terry",
        default=False,
        rating_format=".0f",
        needs_battles=True,
        enabled_by="style_control",
    )
)


# ------------------------------------------------------------------------- the built-ins' roles
# Which registered method plays which part: every other module reads these, never the names.

HEADLINE = ("ne", "cce")  # the paper's headline ratings, in preference: the answer leads with the first rated
REFERENCE = "bt"  # the average-based rating the equilibria are compared with (robustness, figures, diagnosis)
COMPARED = ("bt", "cce")  # the methods the headline NE's diagnosis compares it with, when the run rated them
LEAD_INSTEAD = ("cce", "bt")  # what the answer leads with when the NE cannot rank the models, first rated first
SELECTED_NE = "ne"  # the NE whose equilibrium the risk analysis places among the game's others
ALIASES = {"elo": "bt"}  # other names of a method (the improvement-path simulation's Elo is BT on u_king)
NASH, CCE = "nash", "cce"  # the solution concepts (`RatingMethod.concept`) of the equilibrium methods


def canonical(name: str) -> str:
    """The registered name of `name` (an alias of `ALIASES` or the name itself)."""
    return ALIASES.get(name, name)


def enabled_methods(options) -> tuple[str, ...]:
    """The methods that options of a rate run add to the ones chosen (`enabled_by`: a baseline named, style
    control asked), in registry order."""
    return tuple(m.name for m in _REGISTRY.values() if m.enabled_by and getattr(options, m.enabled_by, None))


def uses_option(names: Iterable[str], option: str) -> bool:
    """Whether one of the methods `names` is the one that rate option `option` enables (and feeds)."""
    return any(name in _REGISTRY and _REGISTRY[name].enabled_by == option for name in names)
