"""Datasets as plain records (prompts, responses) and columnar tables (recorded judgments, per-prompt
scores), and the JSONL reading they share.

Every reader validates as it goes and raises `DatasetError` with `file:line: what is wrong`; a dataset
is only handed on once all of its files have been read, so a bad line never leaves partial rows behind.
Judgments and scores are polars frames (`JUDGMENT_SCHEMA`, `SCORE_SCHEMA`): an import of millions of
battles never becomes millions of Python objects.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass, field, fields
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import polars as pl

from eqarena.exceptions import EqarenaError

Progress = Callable[[int], None]  # called with the number of (file) bytes consumed since the last call

_FAMILY = re.compile(r"[A-Za-z]+")


class DatasetError(EqarenaError, ValueError):
    """An input file is malformed or inconsistent; the message names `file:line` and the field."""


@dataclass(frozen=True)
class Prompt:
    """A prompt; `text` is None when the source names the prompt only by id (imported judgments)."""

    prompt_id: str
    text: str | None
    category: str | None = None
    cluster: str | None = None


@dataclass(frozen=True)
class Response:
    prompt_id: str
    model_id: str
    text: str
    response_id: str | None = None


@dataclass(frozen=True)
class RecordedJudgment:
    """A judgment made elsewhere and imported as is; score is from model_a's (assistant A's) side.

    status 'unparsed' (score None) records a judge output without a valid verdict label."""

    judge: str
    template_hash: str
    prompt_id: str
    model_a: str
    model_b: str
    sample_index: int
    verdict: str | None
    score: float | None
    raw_text: str | None = None
    status: str = "ok"


# One row per recorded judgment; score is model_a's (assistant A's), None unless status is 'ok'.
JUDGMENT_SCHEMA = {
    "judge": pl.Utf8,
    "template_hash": pl.Utf8,
    "prompt_id": pl.Utf8,
    "model_a": pl.Utf8,
    "model_b": pl.Utf8,
    "sample_index": pl.Int64,
    "status": pl.Utf8,
    "verdict": pl.Utf8,
    "score": pl.Float64,
    "raw_text": pl.Utf8,
}
# One row per (judge, prompt, model) score of a score table, with the rule that turns two scores into a
# payoff (`payoff`: clip-diff or sign, `scale`) named by template_hash (importers/scores.py).
SCORE_SCHEMA = {
    "judge": pl.Utf8,
    "template_hash": pl.Utf8,
    "prompt_id": pl.Utf8,
    "model_id": pl.Utf8,
    "score": pl.Float64,
    "payoff": pl.Utf8,
    "scale": pl.Float64,
}


def judgment_frame(records: Iterable[RecordedJudgment] = ()) -> pl.DataFrame:
    """Recorded judgments as a frame of JUDGMENT_SCHEMA (for sources read record by record)."""
    order = (
        "judge",
        "template_hash",
        "prompt_id",
        "model_a",
        "model_b",
        "sample_index",
        "verdict",
        "score",
        "raw_text",
        "status",
    )
    row = attrgetter(*order)  # dataclasses.astuple deep-copies every field: 20x slower
    frame = pl.DataFrame([row(r) for r in records], schema={c: JUDGMENT_SCHEMA[c] for c in order}, orient="row")
    return frame.select(list(JUDGMENT_SCHEMA))


def judgment_records(frame: pl.DataFrame) -> list[RecordedJudgment]:
    """The rows of a JUDGMENT_SCHEMA frame as records (for code that reads a few judgments one by one)."""
    return [RecordedJudgment(**row) for row in frame.iter_rows(named=True)]


def score_frame() -> pl.DataFrame:
    """An empty frame of SCORE_SCHEMA."""
    return pl.DataFrame(schema=SCORE_SCHEMA)


# Labels of prompts beyond category / cluster (table prompt_tags): grouping language, turn or tag.
TAG_SCHEMA = {"prompt_id": pl.Utf8, "grouping": pl.Utf8, "tag": pl.Utf8}


def tag_frame() -> pl.DataFrame:
    """An empty frame of TAG_SCHEMA."""
    return pl.DataFrame(schema=TAG_SCHEMA)


@dataclass(frozen=True, eq=False)
class Dataset:
    """One dataset, validated: every response and judgment refers to a prompt (and models) it holds.

    `judgments` (JUDGMENT_SCHEMA), `scores` (SCORE_SCHEMA) and `tags` (TAG_SCHEMA) are polars frames."""

    name: str
    source: str
    prompts: tuple[Prompt, ...]
    responses: tuple[Response, ...] = ()
    judgments: pl.DataFrame = field(default_factory=judgment_frame)
    scores: pl.DataFrame = field(default_factory=score_frame)
    tags: pl.DataFrame = field(default_factory=tag_frame)

    @property
    def models(self) -> tuple[str, ...]:
        """Models with a response, a judgment or a score, sorted."""
        names = {r.model_id for r in self.responses}
        for column in (self.judgments["model_a"], self.judgments["model_b"], self.scores["model_id"]):
            names.update(column.unique().to_list())
        return tuple(sorted(names))

    @property
    def judges(self) -> tuple[str, ...]:
        """Judges of the judgments and scores, sorted."""
        return tuple(sorted({*self.judgments["judge"].unique().to_list(), *self.scores["judge"].unique().to_list()}))

    def fingerprint(self) -> str:
        """sha256 of the dataset's content (order-independent), to tell runs on the same data apart."""
        digest = hashlib.sha256(self.name.encode())
        for records in (self.prompts, self.responses):
            # The fields of these flat records, as astuple gives them (without its deep copies, 10x slower).
            names = [f.name for f in fields(records[0])] if records else []
            for row in sorted(json.dumps([getattr(r, n) for n in names], ensure_ascii=False) for r in records):
                digest.update(row.encode())
            digest.update(b"\x00")
        for frame in (self.judgments, self.scores):
            digest.update(_frame_digest(frame))
            digest.update(b"\x00")
        return digest.hexdigest()


def _frame_digest(frame: pl.DataFrame) -> bytes:
    """Order-independent bytes of a frame's rows: their sorted 64-bit row hashes (fixed seeds)."""
    if frame.height == 0:
        return b""
    hashes = np.sort(frame.hash_rows(seed=0).to_numpy())
    return hashlib.sha256(hashes.tobytes()).digest()


def model_family(model_id: str) -> str:
    """The leading letters of a model name, lower-cased: gpt-4-0314 and gpt35 -> 'gpt', claude-3-haiku -> 'claude'."""
    match = _FAMILY.match(model_id)
    return match.group(0).lower() if match else model_id


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Line:
    """A parsed JSON object and where it came from."""

    path: Path
    number: int
    data: dict

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"

    def error(self, message: str) -> DatasetError:
        return DatasetError(f"{self.where}: {message}")

    def get(self, *steps: str | int, kind: type | tuple[type, ...] = str, required: bool = True) -> Any:
        """The value at data[steps[0]][steps[1]]...; a clear error when it is missing or of another type.

        Use `get_id` for identifiers, which may also be integers.
        """
        value: Any = self.data
        for depth, step in enumerate(steps):
            try:
                value = value[step]
            except (KeyError, IndexError, TypeError):
                if not required and depth == 0:
                    return None
                raise self.error(f"missing field {field_name(steps)}") from None
        if value is None and not required:
            return None
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise self.error(
                f"field {field_name(steps)} must be {_KIND_NAMES.get(kind, 'a string or an integer')}, "
                f"got {type(value).__name__}"
            )
        return value

    def get_id(self, *steps: str | int, required: bool = True) -> str | None:
        """An identifier: a string, or an integer turned into one (question_id 7 -> '7')."""
        value = self.get(*steps, kind=(str, int), required=required)
        return None if value is None else str(value)


_KIND_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object"}


def field_name(steps: tuple[str | int, ...]) -> str:
    """('messages', -1, 'content', 'answer') -> 'messages[-1].content.answer'."""
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out


def read_jsonl(path: Path, progress: Progress | None = None) -> Iterator[Line]:
    """Each non-blank line of a JSONL file (gzip-compressed when the name ends in .gz) as a `Line`."""
    try:
        raw = open(path, "rb")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    with raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.name.endswith(".gz") else raw
        consumed = 0
        number = 0
        while True:
            try:
                chunk = stream.readline()
            except (OSError, EOFError) as exc:  # corrupt gzip stream
                raise DatasetError(f"{path}:{number + 1}: unreadable compressed data ({exc})") from None
            if not chunk:
                break
            number += 1
            if progress is not None:
                position = raw.tell()
                progress(position - consumed)
                consumed = position
            if not chunk.strip():
                continue
            try:
                data = json.loads(chunk.rstrip(b"\r\n").decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise DatasetError(f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: malformed JSON ({json_error(exc)})") from None
            if not isinstance(data, dict):
                raise DatasetError(f"{path}:{number}: expected a JSON object, got {type(data).__name__}")
            yield Line(path, number, data)


def json_error(exc: json.JSONDecodeError) -> str:
    """'Expecting value at column 46', 'Unterminated string starting at column 3'."""
    return f"{exc.msg}{'' if exc.msg.endswith(' at') else ' at'} column {exc.colno}"


def check_unique(seen: dict[Any, Line], key: Any, line: Line, what: str) -> None:
    """Remember `key` for `line`; a duplicate within the same file is an error naming both lines."""
    first = seen.get(key)
    if first is not None:
        raise line.error(f"duplicate {what} (first at line {first.number})")
    seen[key] = line


def merge_responses(dataset: str, batches: list[list[tuple[Response, Line]]]) -> tuple[Response, ...]:
    """Responses of several files; the same (prompt, model) in two files must agree (it is kept once)."""
    kept: dict[tuple[str, str], tuple[Response, Line]] = {}
    for batch in batches:
        for response, line in batch:
            key = (response.prompt_id, response.model_id)
            earlier = kept.get(key)
            if earlier is None:
                kept[key] = (response, line)
            elif earlier[0] != response:
                raise line.error(
                    f"answer of model {response.model_id!r} to prompt {response.prompt_id!r} differs from "
                    f"the one at {earlier[1].where} (dataset {dataset!r})"
                )
    return tuple(response for response, _ in kept.values())


def input_size(paths: list[Path]) -> int:
    """Total bytes of the files (what progress callbacks count up to)."""
    return sum(p.stat().st_size for p in paths if p.exists())
