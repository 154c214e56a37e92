"""Bounds on what an import takes in, checked before the work they would make expensive.

- binary content: a NUL byte never occurs in a text table (CSV, TSV, JSON Lines, JSON), so the file is
  scanned for one in fixed-size chunks before it is parsed (memory stays bounded on a hostile file);
- models: at most `InputLimits.models` (a game's tensor grows with its square), counted from a wide
  table's columns before they are parsed, and over the whole dataset once it is read;
- names (model and prompt ids) of at most `InputLimits.name_chars` characters, prompt and answer texts
  of at most `InputLimits.text_chars`: both are printed, stored and drawn in the report.

Each refusal is one DatasetError naming the file (and line or field), the bound and the option that
raises it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from eqarena.datasets.records import Dataset, DatasetError
from eqarena.options import InputLimits

_CHUNK = 1 << 22  # bytes read at a time by the scan for NUL bytes
_SHOWN = 40  # characters of an over-long value shown in the message


def refuse_binary(path: Path) -> None:
    """DatasetError at the first NUL byte of the text file `path` (its byte offset and line)."""
    lines = 1
    offset = 0
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            nul = chunk.find(b"\x00")
            if nul >= 0:
                lines += chunk.count(b"\n", 0, nul)
                raise DatasetError(
                    f"{path}:{lines}: binary content (a NUL byte at byte {offset + nul:,}); "
                    f"expected a text table (CSV, TSV, JSON Lines or JSON)"
                )
            lines += chunk.count(b"\n")
            offset += len(chunk)


def refuse_many_models(count: int, limits: InputLimits, where: str) -> None:
    """DatasetError when `count` models (found at `where`) exceed `limits.models`."""
    if count > limits.models:
        raise DatasetError(
            f"{where}: {count:,} models, more than --max-models {limits.models:,} "
            f"(a game's payoff tensor grows with the square of the models; raise --max-models to import them)"
        )


def check_bounds(dataset: Dataset, limits: InputLimits) -> None:
    """The model count, name lengths and text lengths of `dataset` within `limits` (module docstring)."""
    models = dataset.models
    refuse_many_models(len(models), limits, dataset.source)
    _refuse_long("model name", models, limits.name_chars, "--max-name-chars", dataset.source)
    _refuse_long(
        "prompt id", (p.prompt_id for p in dataset.prompts), limits.name_chars, "--max-name-chars", dataset.source
    )
    texts = (p.text for p in dataset.prompts if p.text is not None)
    _refuse_long("prompt text", texts, limits.text_chars, "--max-text-chars", dataset.source)
    answers = (r.text for r in dataset.responses)
    _refuse_long("answer text", answers, limits.text_chars, "--max-text-chars", dataset.source)


def _refuse_long(what: str, values: Iterable[str], bound: int, option: str, source: str) -> None:
    for value in values:
        if len(value) > bound:
            shown = value[:_SHOWN].encode("unicode_escape").decode("ascii")
            raise DatasetError(
                f"{source}: a {what} of {len(value):,} characters ({shown!r}...), more than {option} {bound:,}; "
                f"raise {option} to import it"
            )
