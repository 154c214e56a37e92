"""Task: read judgments from the warehouse into a complete payoff tensor u_king[P, M, M] (+ battles)."""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, replace

import numpy as np

from eqarena import warehouse
from eqarena.methods import get_method
from eqarena.options import ALL_PRD, PRD_PREFIX, MissingPolicy, RateOptions
from eqarena.orchestration.steps import step
from eqarena.solvers.sparse.group_game import GroupReplicates
from eqarena.solvers.sparse.imputation import ImputationError, impute_payoffs
from eqarena.tasks.assemble_groups import assemble_group_game, choose_grouping
from eqarena.warehouse.prompt_groups import PromptGroup, check_group, dataset_groups
from eqarena.warehouse.tensor import (
    Dropped,
    IncompleteTensorError,
    PayoffTensor,
    UnknownJudgeError,
    apply_missing_policy,
    assemble_tensor,
    available_judges,
    read_battles,
    score_judges,
)

NO_BATTLES = {
    key: np.zeros(0, dtype=np.float64 if key == "score" else np.int64)
    for key in ("prompt", "model_a", "model_b", "score")
}


@dataclass(frozen=True, eq=False)
class Assembled:
    """The judged data of a rate run: the tensor before (`raw`) and after (`tensor`) the missing-data
    policy, what the policy dropped, and the ok judgments behind `tensor` as battles."""

    raw: PayoffTensor
    tensor: PayoffTensor
    dropped: Dropped
    battles: dict[str, np.ndarray]
    grouping: str | None = None  # a prompt-group game's grouping (tasks.assemble_groups), None per prompt
    replicates: GroupReplicates | None = None  # ... and its bootstrap replicates


def expand_judges(dataset: str, available: list[str], requested: list[str] | None) -> list[str]:
    """The judges to pool: `requested` with `all-prd` expanded to every prd:* judge present; all
    available judges when nothing is requested."""
    if not requested:
        if not available:
            raise UnknownJudgeError(
                f"no judgments on dataset {dataset!r} yet: ingest recorded judgments or run `eqarena judge`"
            )
        return list(available)
    judges: list[str] = []
    for name in requested:
        if name == ALL_PRD:
            prd = [j for j in available if j.startswith(PRD_PREFIX)]
            if not prd:
                raise UnknownJudgeError(
                    f"--judge all-prd: no prd:* judgments on dataset {dataset!r} (ingest vicuna80 first)"
                )
            judges.extend(prd)
        else:
            judges.append(name)
    return list(dict.fromkeys(judges))


def category_group(options: RateOptions) -> PromptGroup | None:
    """The prompts `options.category` restricts a run to, or None (every prompt)."""
    return None if options.category is None else PromptGroup("category", options.category)


@step("assemble_tensor")
def assemble(db: str | None, options: RateOptions) -> Assembled:
    """Position-balanced u_king and coverage of `options.judges` on `options.dataset` (`orders`: both
    orders needed per cell, or any), on the prompts of `options.category` if given (LookupError listing
    the dataset's categories when it has no such one; also when `options.by` names a grouping its
    prompts lack, before any solving); applies the missing-cell policy (docs/game.md#missing-cells). A
    log too sparse for per-prompt payoffs, or `--prompt-groups`, gives the prompt-group game instead
    (tasks.assemble_groups), decided in SQL before any tensor is built."""
    with closing(warehouse.connect(db, read_only=True)) as con:
        group = category_group(options)
        if group is not None:
            check_group(con, options.dataset, group)
        if options.by is not None:
            dataset_groups(con, options.dataset, options.by.value, f"--by {options.by.value}")
        judges = expand_judges(options.dataset, available_judges(con, options.dataset), list(options.judges))
        choice = choose_grouping(con, options, judges)
        if choice is not None:
            game = assemble_group_game(con, options, judges, choice)
            return Assembled(
                raw=game.judged,
                tensor=game.tensor,
                dropped=game.dropped,
                battles=game.battles,
                grouping=choice.grouping,
                replicates=game.replicates,
            )
        return assemble_group(con, options, group)


def assemble_group(con, options: RateOptions, group: PromptGroup | None) -> Assembled:
    """`assemble` on an open connection, on the prompts of `group` (None: all)."""
    chosen = expand_judges(options.dataset, available_judges(con, options.dataset), list(options.judges))
    raw = assemble_tensor(con, options.dataset, chosen, orders=options.orders, group=group)
    # Score judges have no battles: Bradley-Terry then fits the tensor's cells, as for imputed data.
    scored = bool(score_judges(con, options.dataset) & set(chosen))
    if options.missing is MissingPolicy.IMPUTE:
        tensor, dropped = impute(raw)
    elif options.missing is MissingPolicy.REFUSE and not scored and rates_judged_battles_only(options):
        tensor, dropped = raw, judged_only(raw)
    else:
        tensor, dropped = apply_missing_policy(raw, options.missing)
    battles = NO_BATTLES if scored else read_battles(con, tensor)
    return Assembled(raw=raw, tensor=tensor, dropped=dropped, battles=battles)


def rates_judged_battles_only(options: RateOptions) -> bool:
    """Whether every method chosen is a model fit (Bradley-Terry, win rate, style-controlled BT: no
    equilibrium), which rates from the judged battles alone when there are battles: such a run needs no
    complete game, and stores only the judged cells (`judged_only`)."""
    methods = options.methods or ()
    return bool(methods) and not any(get_method(m).is_equilibrium for m in methods)


def judged_only(raw: PayoffTensor) -> Dropped:
    """The `Dropped` of a run that keeps the judged cells as they are (`rates_judged_battles_only`): none
    filled, none dropped; a game needs a prompt and two models all the same."""
    P, M, _ = raw.shape
    if P == 0 or M < 2:
        apply_missing_policy(raw, MissingPolicy.REFUSE)  # raises, naming what is there
    total = P * M * (M - 1) // 2
    return Dropped("judged-only", missing_cells=int(raw.missing_pairs.sum()), total_cells=total)


def impute(raw: PayoffTensor) -> tuple[PayoffTensor, Dropped]:
    """`--missing impute`: every uncovered cell gets the pair's prompt-wise Bradley-Terry prediction
    (solvers.sparse.imputation); judged cells keep their means. The tensor is marked with what was imputed."""
    P, M, _ = raw.shape
    if P == 0 or M < 2:
        apply_missing_policy(raw, "refuse")  # raises: a game needs a prompt and two models
    try:
        filled = impute_payoffs(raw.u_king, raw.covered, model_names=raw.models)
    except ImputationError as exc:
        raise IncompleteTensorError(f"--missing impute: {exc}") from None
    imputed = np.asarray(filled.imputed, dtype=bool)
    tensor = replace(
        raw, u_king=np.asarray(filled.u_king, dtype=np.float64), covered=np.ones_like(raw.covered), imputed=imputed
    )
    cells = int((imputed & np.triu(np.ones((M, M), dtype=bool), k=1)[None]).sum())
    return tensor, Dropped("impute", imputed_cells=cells, total_cells=P * M * (M - 1) // 2)
