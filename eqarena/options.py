"""The options of every eqarena command, defined once.

One frozen dataclass per concern (what to judge and how, rating, bootstrap, analyses, runners), with
its defaults; modes are enums. The command line builds them from its flags, the Python API from
keyword arguments, and both hand them down whole: flows, tasks and the judge runner read the fields
they need. Prefect validates them as flow parameters (they serialise to JSON for deployments).

This module imports nothing of eqarena, so every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum

from eqarena.exceptions import OptionError

DEFAULT_DATASET = "vicuna80"  # the bundled PRD Vicuna-80 data
DEFAULT_JUDGE = "prd:gpt4"  # its recorded GPT-4 judgments: no API call
DEFAULT_OUT_DIR = "out"  # where reports are written
PRD_PREFIX = "prd:"  # the judge ids of recorded PRD judgments: prd:<judge>
ALL_PRD = "all-prd"  # every recorded PRD judge of the dataset, pooled


def is_recorded_judge(judge: str) -> bool:
    """Recorded judgments (`prd:<judge>`, `all-prd`) are imported by ingest; they need no judging."""
    return judge == ALL_PRD or judge.startswith(PRD_PREFIX)


class MissingPolicy(StrEnum):
    """What `rate` does with (prompt, model pair) cells that lack judgments (docs/game.md#missing-cells)."""

    REFUSE = "refuse"
    DROP_PROMPTS = "drop-prompts"
    DROP_MODELS = "drop-models"
    IMPUTE = "impute"


class OrderRule(StrEnum):
    """Which judged orders make a cell covered: both (position balance) or any (battle logs)."""

    BOTH = "both"
    ANY = "any"


class Analysis(StrEnum):
    """The robustness analyses of a rate run."""

    CLONES = "clones"
    RISK = "risk"


class Runner(StrEnum):
    """Where live judge calls run: this process's event loop, or Dask workers."""

    ASYNCIO = "asyncio"
    DASK = "dask"


class ImportFormat(StrEnum):
    """Formats `eqarena import` reads."""

    ARENA_HARD_AUTO = "arena-hard-auto"
    BATTLES = "battles"
    PAIRWISE = "pairwise"
    SCORES = "scores"


class ImportLayout(StrEnum):
    """The shape of a table `eqarena import` reads (`--layout`): for scores, `long` (prompt_id, model,
    score), `wide` (prompt_id + a column per model) or `models-by-tasks` (a row per model, a column per
    task); for pairwise, `long` (a row per judgment) or `preferences` (a row per prompt, a column per
    model holding its preference in [1, 2] over `--baseline`). Without `--layout`, scores tell long from
    wide by their columns and pairwise tables are long."""

    LONG = "long"
    WIDE = "wide"
    MODELS_BY_TASKS = "models-by-tasks"
    PREFERENCES = "preferences"


LAYOUTS = {"scores": ("long", "wide", "models-by-tasks"), "pairwise": ("long", "preferences")}


class Grouping(StrEnum):
    """A column of `prompts` that splits a dataset into groups rated separately (`rate --by`)."""

    CATEGORY = "category"
    CLUSTER = "cluster"


class PromptActions(StrEnum):
    """What the prompt player's actions are (`rate --prompt-groups`, docs/game.md#prompt-groups): each
    prompt (`prompts`, the paper's game), or groups of prompts whose payoffs come from every battle of
    the group, smoothed by a Bradley-Terry fit per group shrunk towards the global fit: one group
    (`all`), a column of `prompts` (`category`, `cluster`), or a battle log's fields (`language`, `turn`,
    `tag`: Chatbot Arena's category_tag). `auto`: per prompt, unless the judged cells are too sparse for
    per-prompt payoffs (a battle log), then the first grouping the dataset has of tag, category,
    language, cluster, else all."""

    AUTO = "auto"
    PROMPTS = "prompts"
    ALL = "all"
    CATEGORY = "category"
    CLUSTER = "cluster"
    LANGUAGE = "language"
    TURN = "turn"
    TAG = "tag"


class ScorePayoff(StrEnum):
    """How two per-prompt scores become a payoff: clip((s_a - s_b) / scale, -1, 1), or its sign."""

    CLIP_DIFF = "clip-diff"
    SIGN = "sign"


def _coerce(options, **enums: type[StrEnum]) -> None:
    """Turn strings into the enum of their field (a frozen dataclass, in __post_init__); ValueError
    naming the field and its choices otherwise."""
    for name, kind in enums.items():
        value = getattr(options, name)
        if isinstance(value, (list, tuple)):
            object.__setattr__(options, name, tuple(choice(kind, v, name) for v in value))
        elif value is not None:
            object.__setattr__(options, name, choice(kind, value, name))


def choice(kind: type[StrEnum], value, name: str) -> StrEnum:
    """`value` as a member of `kind`; ValueError "--<name> must be one of ...; got ..." otherwise."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(m.value for m in kind)
        raise OptionError(f"--{name.replace('_', '-')} must be one of {choices}; got {value!r}") from None


def _tuple(options, *names: str) -> None:
    for name in names:
        value = getattr(options, name)
        if isinstance(value, list):
            object.__setattr__(options, name, tuple(value))


def _at_least(name: str, value, low) -> None:
    if value is not None and value < low:
        raise OptionError(f"{name if name.startswith('--') else '--' + name} must be at least {low}; got {value}")


# ------------------------------------------------------------------------------------------ rating


@dataclass(frozen=True)
class BootstrapOptions:
    """Bootstrap confidence of every method: at most `replicates` resamples (0 or 1: none), seeded by
    `seed`; the equilibria's stop earlier once their intervals settle, no bound moving by more than
    `settle` times the interval width over 24 replicates (0: always all `replicates`;
    solvers.bootstrap.confidence.Settling). `time_limit`: seconds the replicates may take (0: no limit); fewer
    replicates are planned when the full-data solves say they would take longer, and the bootstrap stops
    at the limit with the replicates done (stated in the output). `dask_address`: solve the replicates on
    the Dask scheduler there instead of this machine's worker processes (runtime/dask_pool.py)."""

    replicates: int = 200
    seed: int = 0
    settle: float = 0.1
    time_limit: float = 600.0
    dask_address: str | None = None

    def __post_init__(self):
        _at_least("bootstrap", self.replicates, 0)
        _at_least("settle", self.settle, 0.0)
        _at_least("bootstrap-time", self.time_limit, 0.0)


@dataclass(frozen=True)
class RateOptions:
    """What `rate` solves: the judgments of `judges` (empty: every judge of the dataset; `all-prd`: the
    five recorded PRD judges) on `dataset`, by `methods` (names of the method registry; None: its
    default methods), with a missing-cell policy, an order rule and a bootstrap. `baseline`: the model
    the `winrate` method rates against (None: the model in the most judgments, which for an
    arena-hard-auto import is its baseline); `style_control`: also rate by `bt-style` (Bradley-Terry
    with the answers' length and markdown as covariates). `category`: rate only the prompts of this
    category (table prompts); `by`: also rate each category (or cluster) on its own, point ratings by
    the same methods and missing-cell policy. `prompt_groups`: the prompt player's actions
    (`PromptActions`)."""

    dataset: str | None = None
    judges: tuple[str, ...] = ()
    methods: tuple[str, ...] | None = None
    missing: MissingPolicy = MissingPolicy.REFUSE
    orders: OrderRule = OrderRule.BOTH
    bootstrap: BootstrapOptions = field(default_factory=BootstrapOptions)
    baseline: str | None = None
    style_control: bool = False
    category: str | None = None
    by: Grouping | None = None
    prompt_groups: PromptActions = PromptActions.AUTO

    def __post_init__(self):
        _tuple(self, "judges", "methods")
        _coerce(self, missing=MissingPolicy, orders=OrderRule, by=Grouping, prompt_groups=PromptActions)
        if (self.category is not None or self.by is not None) and self.prompt_groups not in (
            PromptActions.AUTO,
            PromptActions.PROMPTS,
        ):
            raise OptionError(
                "--prompt-groups cannot be combined with --category or --by: a group game already "
                "rates every group as one of the prompt player's actions"
            )
        if self.category is not None and not self.category.strip():
            raise OptionError("--category must name a category; got an empty string")
        if self.category is not None and self.by is not None:
            raise OptionError(
                "--category and --by cannot be combined: --category rates one category, "
                "--by rates the whole dataset and each group"
            )


# ---------------------------------------------------------------------------------------- analyses


@dataclass(frozen=True)
class CloneOptions:
    """Adversarial clones (paper Section 4.2, App. F.5): copies of prompts drawn from softmax(-lam *
    the target's mean payoff), `ns_exact` exact and `ns_noisy` noisy (Uniform(-noise, noise)) counts;
    target None: the rate run's top NE model; methods None: the rate run's methods."""

    target: str | None = None
    lam: float = 10.0
    seed: int = 0
    ns_exact: tuple[int, ...] = (0, 250, 500)
    ns_noisy: tuple[int, ...] = (0, 250, 500, 750, 1000)
    noise: float = 0.01
    methods: tuple[str, ...] | None = None

    def __post_init__(self):
        _tuple(self, "ns_exact", "ns_noisy", "methods")
        _at_least("noise", self.noise, 0.0)
        for name in ("ns_exact", "ns_noisy"):
            if any(n < 0 for n in getattr(self, name)):
                raise OptionError(f"--{name.replace('_', '-')}: clone counts must be >= 0")


@dataclass(frozen=True)
class RiskOptions:
    """Risk dominance (paper App. F.4): `equilibria` NEs searched (0 = the run's NE), priors updated
    `steps` times with step size `eta`."""

    equilibria: int = 128
    seed: int = 0
    eta: float = 1e-2
    steps: int = 10_000

    def __post_init__(self):
        _at_least("equilibria", self.equilibria, 2)


@dataclass(frozen=True)
class AnalysesOptions:
    """Which analyses a new rate run gets (`run`), and the settings of each."""

    run: tuple[Analysis, ...] = (Analysis.CLONES, Analysis.RISK)
    clones: CloneOptions = field(default_factory=CloneOptions)
    risk: RiskOptions = field(default_factory=RiskOptions)

    def __post_init__(self):
        unknown = [str(a) for a in self.run if a not in tuple(Analysis)]
        if unknown:
            choices = ", ".join(a.value for a in Analysis)
            raise OptionError(f"--analyses: unknown analysis {', '.join(unknown)} (choose from {choices})")
        object.__setattr__(self, "run", tuple(a for a in Analysis if a in self.run))  # canonical order


# ------------------------------------------------------------------------------------------- judge


@dataclass(frozen=True)
class GenerationOptions:
    """Sampling options sent with every judge request; None leaves the provider's default."""

    max_tokens: int | None = None
    temperature: float | None = None

    def __post_init__(self):
        _at_least("max-tokens", self.max_tokens, 1)


@dataclass(frozen=True)
class RunLimits:
    """concurrency: requests in flight at most; rpm / tpm: requests / tokens per minute (None: no limit).

    The token limiter lets `tpm_burst_s` seconds' worth of tokens through at once (a request larger
    than that waits for an empty bucket); tokens are estimated before the call (prompt + expected output).
    """

    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    tpm_burst_s: float = 10.0

    def __post_init__(self):
        if self.concurrency < 1:
            raise OptionError(f"--concurrency must be at least 1, got {self.concurrency}")
        for name, value in (("--rpm", self.rpm), ("--tpm", self.tpm)):
            if value is not None and value <= 0:
                raise OptionError(f"{name} must be positive, got {value}")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed request is retried.

    `attempts` counts the first try. Without a Retry-After header the wait is exponential with
    jitter, from `initial_wait_s` up to `max_wait_s`; a Retry-After is obeyed up to `max_retry_after_s`.
    `timeout_s` bounds each attempt.
    """

    attempts: int = 8
    initial_wait_s: float = 1.0
    max_wait_s: float = 60.0
    max_retry_after_s: float = 300.0
    timeout_s: float = 120.0

    def __post_init__(self):
        if self.attempts < 1:
            raise OptionError("retry attempts must be at least 1")
        if min(self.initial_wait_s, self.max_wait_s, self.max_retry_after_s) < 0 or self.timeout_s <= 0:
            raise OptionError("retry waits must be >= 0 and the timeout > 0")


@dataclass(frozen=True)
class SpendCaps:
    """Stop before spending more than `max_cost` USD or making more than `max_calls` judge calls."""

    max_cost: float | None = None
    max_calls: int | None = None

    def __post_init__(self):
        if (self.max_cost is not None and self.max_cost < 0) or (self.max_calls is not None and self.max_calls < 0):
            raise OptionError("--max-cost and --max-calls must not be negative")


@dataclass(frozen=True)
class RunnerOptions:
    """How live calls are made: from this process (asyncio) or on Dask workers (a LocalCluster of
    `dask_workers` processes, or the scheduler at `dask_address`); or through the OpenAI Batch API
    (`batch`, polled every `batch_poll_s` seconds). `prompts_per_chunk`: prompts per judge task."""

    runner: Runner = Runner.ASYNCIO
    dask_address: str | None = None
    dask_workers: int = 2
    batch: bool = False
    batch_poll_s: float = 30.0
    prompts_per_chunk: int = 10

    def __post_init__(self):
        _coerce(self, runner=Runner)
        _at_least("--dask-workers", self.dask_workers, 1)
        if self.runner is Runner.DASK and self.batch:
            raise OptionError("--runner dask makes live calls; it cannot be combined with --batch")


@dataclass(frozen=True)
class AdaptiveOptions:
    """Adaptive judging (`judge --adaptive`, eqarena/solvers/sparse/adaptive.py): rounds of `batch_calls`
    calls until every adjacent pair of the NE ranking is ordered, or tied within `indifference`, with
    probability `stop_probability`; a share `explore` of each round is drawn uniformly."""

    batch_calls: int = 200
    stop_probability: float = 0.95
    indifference: float = 0.02
    explore: float = 0.1
    seed: int = 0
    initial_prompts: int = 5
    replicates: int = 30

    def __post_init__(self):
        _at_least("--batch-calls", self.batch_calls, 2)
        for name in ("stop_probability", "explore"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise OptionError(f"--{name.replace('_', '-')} must be in [0, 1]")


@dataclass(frozen=True)
class JudgeOptions:
    """A judge run: who judges (`judge`: openai:MODEL, gemini:MODEL, openai-compatible:MODEL@URL,
    recorded:JUDGE), what (`dataset`, `models`, the first `prompts` prompts; None: all), how often
    (`samples_per_order` with each model shown first, paper Section 3.1: 4), with which `template`
    and price file, and the limits, retries, caps and runner of the calls. `adaptive` set: judge
    adaptively instead of every missing cell."""

    judge: str
    dataset: str | None = None
    models: tuple[str, ...] | None = None
    prompts: int | None = None
    samples_per_order: int = 4
    template: str = "pairwise5"
    max_unparsed: int | None = None
    multi_sample: bool | None = None
    prices: str | None = None
    generation: GenerationOptions = field(default_factory=GenerationOptions)
    limits: RunLimits = field(default_factory=RunLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    caps: SpendCaps = field(default_factory=SpendCaps)
    runner: RunnerOptions = field(default_factory=RunnerOptions)
    adaptive: AdaptiveOptions | None = None

    def __post_init__(self):
        _tuple(self, "models")
        _at_least("--samples-per-order", self.samples_per_order, 1)
        _at_least("--prompts", self.prompts, 1)
        _at_least("--max-unparsed", self.max_unparsed, 0)


# ---------------------------------------------------------------------------------------- generate

ANSWER_MAX_TOKENS = 4096  # output tokens per answer at most, as arena-hard-auto's gen_answer asks


@dataclass(frozen=True)
class GenerateOptions:
    """A generate run: the answers of `model` (a spec: openai:MODEL, gemini:MODEL,
    openai-compatible:MODEL@URL) to the first `prompts` prompts of `dataset` (None: all) that it has not
    answered yet, stored as model `model_id` (None: the spec's model name), asked with `generation`
    settings, within the limits, retries and caps of the calls; with `batch` through the OpenAI Batch
    API, polled every `batch_poll_s` seconds."""

    model: str
    dataset: str | None = None
    model_id: str | None = None
    prompts: int | None = None
    prices: str | None = None
    generation: GenerationOptions = field(default_factory=lambda: GenerationOptions(max_tokens=ANSWER_MAX_TOKENS))
    limits: RunLimits = field(default_factory=RunLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    caps: SpendCaps = field(default_factory=SpendCaps)
    batch: bool = False
    batch_poll_s: float = 30.0

    def __post_init__(self):
        _at_least("--prompts", self.prompts, 1)
        if self.model_id is not None and (
            not self.model_id.strip() or self.model_id != self.model_id.strip() or "," in self.model_id
        ):
            raise OptionError(
                f"--as {self.model_id!r}: a model id must be non-empty, without a comma and without "
                "leading or trailing spaces"
            )


# ---------------------------------------------------------------------------------------- main job


@dataclass(frozen=True)
class MainJobOptions:
    """The main job (`run`, `refresh`): ingest `source` (a bundled dataset or a directory), judge with
    `judge` (recorded `prd:<judge>` / `all-prd`, or a provider spec, which judges only missing cells
    with `samples_per_order` per order, capped at `max_cost` USD; `yes` confirms a plan above $1),
    rate, run the analyses and write the report into `out_dir`."""

    source: str = DEFAULT_DATASET
    judge: str = DEFAULT_JUDGE
    out_dir: str = DEFAULT_OUT_DIR
    rate: RateOptions = field(default_factory=RateOptions)
    analyses: AnalysesOptions = field(default_factory=AnalysesOptions)
    samples_per_order: int = 4
    max_cost: float | None = None
    yes: bool = False

    def __post_init__(self):
        _at_least("--samples-per-order", self.samples_per_order, 1)
        _at_least("--max-cost", self.max_cost, 0.0)


@dataclass(frozen=True)
class InputLimits:
    """What one import takes in at most (`importers.limits`): `models` models, names (model and prompt
    ids) of `name_chars` characters, prompt and answer texts of `text_chars` characters."""

    models: int = 1000
    name_chars: int = 200
    text_chars: int = 100_000

    def __post_init__(self):
        _at_least("--max-models", self.models, 2)
        _at_least("--max-name-chars", self.name_chars, 1)
        _at_least("--max-text-chars", self.text_chars, 1)


@dataclass(frozen=True)
class IngestOptions:
    """Ingest `source` (a bundled dataset name or a directory) under `name` (default: its own);
    `replace` overwrites stored rows whose content changed; `limits` bound what it takes in."""

    source: str = DEFAULT_DATASET
    name: str | None = None
    replace: bool = False
    limits: InputLimits = InputLimits()


@dataclass(frozen=True)
class ImportOptions:
    """`eqarena import`: files `paths` in format `fmt` into dataset `dataset` (default: from the
    files' names), under judge id `judge` (battles, pairwise, scores), against `baseline`
    (arena-hard-auto v0.1), with the payoff of two scores (`payoff`, `scale`), within `limits`;
    `named_battles`: a battle log's named battles too (`anony` false), not only its anonymous ones."""

    fmt: ImportFormat
    paths: tuple[str, ...]
    dataset: str | None = None
    judge: str | None = None
    baseline: str | None = None
    payoff: ScorePayoff = ScorePayoff.CLIP_DIFF
    scale: float = 1.0
    replace: bool = False
    layout: ImportLayout | None = None
    id_column: str | None = None
    limits: InputLimits = InputLimits()
    named_battles: bool = False

    def __post_init__(self):
        _tuple(self, "paths")
        _coerce(self, fmt=ImportFormat, payoff=ScorePayoff, layout=ImportLayout)
        if not self.scale > 0:
            raise OptionError(f"--scale must be positive; got {self.scale}")
        allowed = LAYOUTS.get(self.fmt.value, ())
        if self.layout is not None and self.layout.value not in allowed:
            hint = (
                "; preferences are pairwise judgments: eqarena import pairwise FILE --layout preferences "
                "--baseline MODEL"
                if self.layout is ImportLayout.PREFERENCES
                else ""
            )
            raise OptionError(
                f"--layout {self.layout.value} does not apply to {self.fmt.value}"
                + (f" (its layouts: {', '.join(allowed)})" if allowed else "")
                + hint
            )
        if self.layout is ImportLayout.PREFERENCES and not self.baseline:
            raise OptionError("--layout preferences needs --baseline (the model every column is compared with)")
        if self.named_battles and self.fmt is not ImportFormat.BATTLES:
            raise OptionError(f"--named-battles applies to battle logs (import battles), not {self.fmt.value}")
        if self.id_column is not None and not allowed:
            raise OptionError(f"--id-column applies to the table formats (pairwise, scores), not {self.fmt.value}")


def as_parameters(options) -> dict:
    """`options` as JSON-ready values (enums as their strings, tuples as lists): a run's parameters."""
    if hasattr(options, "__dataclass_fields__"):
        return {f.name: as_parameters(getattr(options, f.name)) for f in fields(options)}
    if isinstance(options, StrEnum):
        return options.value
    if isinstance(options, (list, tuple)):
        return [as_parameters(v) for v in options]
    return options


__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_JUDGE",
    "DEFAULT_OUT_DIR",
    "AdaptiveOptions",
    "Analysis",
    "AnalysesOptions",
    "BootstrapOptions",
    "CloneOptions",
    "GenerateOptions",
    "GenerationOptions",
    "Grouping",
    "ImportFormat",
    "ImportLayout",
    "ImportOptions",
    "InputLimits",
    "IngestOptions",
    "JudgeOptions",
    "MainJobOptions",
    "MissingPolicy",
    "OrderRule",
    "RateOptions",
    "RetryPolicy",
    "RiskOptions",
    "RunLimits",
    "Runner",
    "RunnerOptions",
    "ScorePayoff",
    "SpendCaps",
    "as_parameters",
    "choice",
]


# ------------------------------------------------------------------------ simulated improvement path

SETTINGS = ("initial", "additional")  # fixed initial prompts; a best-of-P' prompt added every iteration


@dataclass(frozen=True)
class PathSizes:
    """Algorithm 1's sizes. max_rounds bounds the inner loop (improvement rounds of one new model): a
    model that is still not top-ranked after it is added anyway, and its step says so (`rounds`)."""

    skills: int = 5  # K
    initial_prompts: int = 5  # P_0
    initial_models: int = 5  # M_0
    candidate_models: int = 8  # M'
    candidate_prompts: int = 64  # P' (best-of-64, paper Section 2)
    iterations: int = 16  # T
    max_rounds: int = 100

    def __post_init__(self):
        if (
            min(
                self.skills,
                self.initial_prompts,
                self.initial_models,
                self.candidate_models,
                self.candidate_prompts,
                self.max_rounds,
            )
            < 1
            or self.iterations < 0
        ):
            raise OptionError(f"improvement path sizes must be positive: {self}")
