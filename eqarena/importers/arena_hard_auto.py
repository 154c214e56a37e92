"""Importing arena-hard-auto judgment files: `model_judgment/<judge>/<model>.jsonl`.

Each line judges one model against the baseline on one question, in two games with swapped positions:
game 1 shows the baseline as assistant A, game 2 shows the model as A. A game's `score` is the verdict
label (`A>>B` ... `B>>A`, scored as in `labels.py`); a game without a valid label is kept as an
`unparsed` judgment with the judge's text, never dropped or scored 0. Both layouts are read:
v0.1 (`question_id`, `judgment` text) and v2.0 (`uid`, `baseline`, `judgment.answer`, `prompt` messages).

The judge becomes `arena-hard-auto:<judge>`; the template hash is the sha256 of the judge's system
prompt when the file records it (v2.0), else the tag `arena-hard-auto`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from eqarena.datasets.records import (
    Dataset,
    DatasetError,
    Line,
    Prompt,
    RecordedJudgment,
    check_unique,
    judgment_frame,
    read_jsonl,
)
from eqarena.importers.labels import FIVE_LABELS, five_label
from eqarena.importers.result import Imported

JUDGE_PREFIX = "arena-hard-auto:"
DEFAULT_BASELINE = "gpt-4-0314"  # arena-hard-v0.1's baseline
TEMPLATE_TAG = "arena-hard-auto"
JUDGMENT_DIR = "model_judgment"


def judgment_files(path: Path) -> list[Path]:
    """The .jsonl files of `path`: a file, a judge directory, or `model_judgment/` with judge folders."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DatasetError(f"{path}: no such file or directory")
    files = sorted(path.glob("*.jsonl")) or sorted(path.glob("*/*.jsonl"))
    if not files:
        raise DatasetError(f"{path}: no judgment files (<model>.jsonl, or <judge>/<model>.jsonl)")
    return files


def default_dataset_name(path: Path) -> str:
    """The benchmark folder above `model_judgment/` (e.g. arena-hard-v0.1), else 'arena-hard-auto'."""
    parts = path.resolve().parts
    if JUDGMENT_DIR in parts:
        index = len(parts) - 1 - parts[::-1].index(JUDGMENT_DIR)
        if index > 0:
            return parts[index - 1]
    return "arena-hard-auto"


def read_arena_hard_judgments(paths: list[Path], name: str | None, baseline: str | None) -> Imported:
    """Every game of every judgment file under `paths` as recorded judgments (see module docstring).

    `baseline` names the baseline model for v0.1 files, which do not record it (default gpt-4-0314).
    """
    files = [f for p in paths for f in judgment_files(p)]
    name = name or default_dataset_name(paths[0])
    seen: dict[tuple, Line] = {}
    prompts: dict[str, Prompt] = {}
    judgments: list[RecordedJudgment] = []
    self_games = 0
    missing_games = 0
    for path in files:
        for line in read_jsonl(path):
            prompt_id = line.get_id("uid") if "uid" in line.data else line.get_id("question_id")
            model = line.get("model", required=False) or path.stem
            judge = line.get("judge", required=False) or path.parent.name
            base = line.get("baseline", required=False) or baseline or DEFAULT_BASELINE
            games = line.get("games", kind=list)
            check_unique(seen, (judge, prompt_id, model), line, f"judgment of {model!r} on {prompt_id!r} by {judge!r}")
            if model == base:
                self_games += 1
                continue
            prompts.setdefault(
                prompt_id, Prompt(prompt_id=prompt_id, text=None, category=line.get("category", required=False))
            )
            for index, game in enumerate(games[:2]):
                if game is None:
                    missing_games += 1
                    continue
                if not isinstance(game, dict):
                    raise line.error(f"games[{index}] must be an object, got {type(game).__name__}")
                first, second = (base, model) if index == 0 else (model, base)
                judgments.append(_judgment(line, index, game, JUDGE_PREFIX + judge, prompt_id, first, second))
    if not judgments:
        raise DatasetError(f"{files[0]}: no judgments of a model against its baseline")
    notes = []
    if self_games:
        notes.append(f"skipped {self_games} line(s) judging the baseline against itself")
    if missing_games:
        notes.append(f"skipped {missing_games} game(s) recorded as null (the judge call failed)")
    source = ", ".join(str(p) for p in paths)
    return Imported(
        Dataset(name=name, source=source, prompts=tuple(prompts.values()), judgments=judgment_frame(judgments)),
        tuple(notes),
    )


def _judgment(
    line: Line, index: int, game: dict, judge: str, prompt_id: str, model_a: str, model_b: str
) -> RecordedJudgment:
    label = game.get("score")
    if label is not None and not isinstance(label, str):
        raise line.error(f"games[{index}].score must be a verdict label or null, got {type(label).__name__}")
    verdict = five_label(label)
    text = game.get("judgment")
    if isinstance(text, dict):
        text = text.get("answer")
    if text is not None and not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False)
    return RecordedJudgment(
        judge=judge,
        template_hash=_template_hash(game),
        prompt_id=prompt_id,
        model_a=model_a,
        model_b=model_b,
        sample_index=0,
        verdict=verdict,
        score=None if verdict is None else FIVE_LABELS[verdict],
        raw_text=text,
        status="ok" if verdict is not None else "unparsed",
    )


def _template_hash(game: dict) -> str:
    messages = game.get("prompt")
    if isinstance(messages, list):
        system = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "system"]
        if system and isinstance(system[0], str):
            return hashlib.sha256(system[0].encode("utf-8")).hexdigest()[:16]
    return TEMPLATE_TAG
