"""What a judge run shows the judge: the chosen prompts, models and answers, read from the warehouse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import duckdb

from eqarena.exceptions import EqarenaError
from eqarena.warehouse.catalog import dataset_model_ids, dataset_prompt_texts, dataset_response_texts, datasets


class PlanError(EqarenaError, ValueError):
    """The requested prompts or models do not exist in the warehouse."""


@dataclass(frozen=True, eq=False)
class JudgeInputs:
    """The texts a judge run shows: prompts in judging order, the models compared, their answers."""

    dataset: str
    prompts: dict[str, str]
    models: tuple[str, ...]
    responses: dict[tuple[str, str], str]


def natural_key(name: str) -> tuple:
    """Sort key putting '2' before '10' and numbers before names."""
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def choose_prompts(available: Sequence[str], count: int | None) -> list[str]:
    """The first `count` prompts in natural order (all when count is None)."""
    ordered = sorted(available, key=natural_key)
    if count is not None:
        if count < 1:
            raise PlanError(f"--prompts must be at least 1, got {count}")
        ordered = ordered[:count]
    return ordered


def choose_models(available: Sequence[str], wanted: Sequence[str] | None, dataset: str) -> list[str]:
    """`wanted` (validated against the dataset's models, order kept) or all of them, sorted."""
    if not wanted:
        return sorted(available, key=natural_key)
    missing = [m for m in wanted if m not in set(available)]
    if missing:
        raise PlanError(
            f"--models: no responses of {', '.join(missing)} in dataset {dataset!r}; "
            f"models there: {', '.join(sorted(available)) or 'none'}"
        )
    if len(set(wanted)) != len(wanted):
        raise PlanError(f"--models lists a model twice: {', '.join(wanted)}")
    return list(wanted)


def read_prompt_texts(con: duckdb.DuckDBPyConnection, dataset: str) -> dict[str, str]:
    """prompt_id -> text of `dataset`'s prompts; PlanError when the warehouse holds none."""
    texts = dataset_prompt_texts(con, dataset)
    if not texts:
        known = ", ".join(datasets(con)) or "none"
        raise PlanError(
            f"dataset {dataset!r} has no prompts in the warehouse (datasets: {known}); "
            f"run `eqarena ingest --dataset {dataset}` first"
        )
    return texts


def read_inputs(
    con: duckdb.DuckDBPyConnection, dataset: str, models: Sequence[str] | None, prompt_count: int | None
) -> JudgeInputs:
    """The first `prompt_count` prompts of `dataset` (natural order) and the chosen models' answers."""
    texts = read_prompt_texts(con, dataset)
    chosen_prompts = choose_prompts(list(texts), prompt_count)
    chosen_models = choose_models(dataset_model_ids(con, dataset), models, dataset)
    wanted = set(chosen_prompts)
    responses = {
        key: text for key, text in dataset_response_texts(con, dataset, chosen_models).items() if key[0] in wanted
    }
    return JudgeInputs(dataset, {p: texts[p] for p in chosen_prompts}, tuple(chosen_models), responses)
