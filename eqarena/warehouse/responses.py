"""SQL for generated answers (`eqarena generate`): inserting them idempotently as they arrive, and which
prompts of a dataset a model has answered."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

import duckdb

from eqarena.warehouse.buffer import WriteBuffer
from eqarena.warehouse.inserts import RowTable


@dataclass(frozen=True)
class ResponseRow:
    """One generated answer; `generation` is the JSON text of the settings it was asked with."""

    dataset: str
    prompt_id: str
    model_id: str
    text: str
    generator: str
    generation: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    run_id: str | None = None

    @property
    def text_sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


_TYPES = {
    "dataset": "VARCHAR",
    "prompt_id": "VARCHAR",
    "model_id": "VARCHAR",
    "text": "VARCHAR",
    "generator": "VARCHAR",
    "generation": "VARCHAR",
    "tokens_in": "INTEGER",
    "tokens_out": "INTEGER",
    "run_id": "VARCHAR",
    "text_sha256": "VARCHAR",
}


RESPONSES = RowTable("responses", "dataset, prompt_id, model_id", _TYPES)


def insert_responses(con: duckdb.DuckDBPyConnection, rows: Iterable[ResponseRow]) -> int:
    """Insert answers whose (dataset, prompt_id, model_id) is not stored yet; returns how many were new."""
    return RESPONSES.insert(con, rows)


class ResponseWriter(WriteBuffer[ResponseRow]):
    """The write buffer of a generate run (eqarena/warehouse/buffer.py): answers are committed as they
    arrive, within `max_delay_s` or `max_rows`, each flush one idempotent insert."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, max_delay_s: float = 0.25, max_rows: int = 64):
        super().__init__(con, RESPONSES, max_delay_s=max_delay_s, max_rows=max_rows)


def answered_prompts(con: duckdb.DuckDBPyConnection, dataset: str, model_id: str) -> set[str]:
    """The prompts of `dataset` that `model_id` has a stored answer to."""
    return {
        p
        for (p,) in con.execute(
            "SELECT prompt_id FROM responses WHERE dataset = ? AND model_id = ?", [dataset, model_id]
        ).fetchall()
    }
