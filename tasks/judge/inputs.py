"""What a judge run shows the judge: the chosen prompts, models and answers, read from the warehouse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import duckdb

from tasks.judge.plan import PlanError, choose_models, choose_prompts
from warehouse.catalog import datasets, read_models, read_prompts, read_responses


@dataclass(frozen=True, eq=False)
class JudgeInputs:
    """The texts a judge run shows: prompts in judging order, the models compared, their answers."""

    dataset: str
    prompts: dict[str, str]
    models: tuple[str, ...]
    responses: dict[tuple[str, str], str]


def read_inputs(
    con: duckdb.DuckDBPyConnection, dataset: str, models: Sequence[str] | None, prompt_count: int | None
) -> JudgeInputs:
    """The first `prompt_count` prompts of `dataset` (natural order) and the chosen models' answers."""
    stored = read_prompts(con, dataset)
    if not stored:
        known = ", ".join(datasets(con)) or "none"
        raise PlanError(f"dataset {dataset!r} has no prompts in the warehouse (datasets: {known}); "
                        f"run `eqarena ingest --dataset {dataset}` first")
    texts = {row["prompt_id"]: row["text"] for row in stored}
    chosen_prompts = choose_prompts(list(texts), prompt_count)
    chosen_models = choose_models([m["model_id"] for m in read_models(con, dataset)], models, dataset)
    wanted = set(chosen_prompts)
    responses = {
        (row["prompt_id"], row["model_id"]): row["text"]
        for row in read_responses(con, dataset, chosen_models)
        if row["prompt_id"] in wanted
    }
    return JudgeInputs(dataset, {p: texts[p] for p in chosen_prompts}, tuple(chosen_models), responses)
