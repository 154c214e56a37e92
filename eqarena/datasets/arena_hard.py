"""Reading arena-hard directories: `question.jsonl` plus `model_answer/*.jsonl`, in either layout.

The layout is detected per file from its first record:
- new (arena-hard-auto v0.1 today, v2.0): questions `uid`, `prompt`; answers `uid`, `model`, `ans_id`,
  `messages[-1].content.answer`;
- old (the original releases and their forks): questions `question_id`, `turns[0].content`; answers
  `question_id`, `model_id`, `answer_id`, `choices[0].turns[0].content`.
"""

from __future__ import annotations

from pathlib import Path

from eqarena.datasets.records import (
    Dataset,
    DatasetError,
    Line,
    Progress,
    Prompt,
    Response,
    check_unique,
    merge_responses,
    read_jsonl,
)

QUESTION_FILE = "question.jsonl"
ANSWER_DIR = "model_answer"


def is_arena_hard_dir(path: Path) -> bool:
    return path.is_dir() and (path / QUESTION_FILE).is_file()


def arena_hard_files(directory: Path) -> list[Path]:
    """question.jsonl first, then the answer files in name order."""
    answers = sorted((directory / ANSWER_DIR).glob("*.jsonl")) if (directory / ANSWER_DIR).is_dir() else []
    return [directory / QUESTION_FILE, *answers]


def read_arena_hard(directory: Path, name: str, progress: Progress | None = None) -> Dataset:
    """All prompts and answers of an arena-hard directory, validated (see module docstring)."""
    if not is_arena_hard_dir(directory):
        raise DatasetError(f"{directory}: not an arena-hard directory (no {QUESTION_FILE})")
    question_file, *answer_files = arena_hard_files(directory)
    prompts = read_questions(question_file, progress)
    known = {p.prompt_id for p in prompts}
    batches = [read_answers(path, known, question_file, progress) for path in answer_files]
    return Dataset(name=name, source=str(directory), prompts=prompts, responses=merge_responses(name, batches))


def read_questions(path: Path, progress: Progress | None = None) -> tuple[Prompt, ...]:
    seen: dict[str, Line] = {}
    prompts = []
    new_layout: bool | None = None
    for line in read_jsonl(path, progress):
        if new_layout is None:
            new_layout = "uid" in line.data or "question_id" not in line.data
        if new_layout:
            prompt_id, text = line.get_id("uid"), line.get("prompt")
        else:
            prompt_id, text = line.get_id("question_id"), line.get("turns", 0, "content")
        check_unique(seen, prompt_id, line, f"prompt {prompt_id!r}")
        prompts.append(
            Prompt(
                prompt_id=prompt_id,
                text=text,
                category=line.get("category", required=False),
                cluster=line.get("cluster", required=False),
            )
        )
    if not prompts:
        raise DatasetError(f"{path}: no prompts")
    return tuple(prompts)


def read_answers(
    path: Path, known: set[str], question_file: Path, progress: Progress | None = None
) -> list[tuple[Response, Line]]:
    seen: dict[tuple[str, str], Line] = {}
    out = []
    new_layout: bool | None = None
    for line in read_jsonl(path, progress):
        if new_layout is None:
            new_layout = "uid" in line.data or "question_id" not in line.data
        if new_layout:
            prompt_id, model_id = line.get_id("uid"), line.get("model")
            answer_id = line.get_id("ans_id", required=False)
            text = line.get("messages", -1, "content", "answer")
        else:
            prompt_id, model_id = line.get_id("question_id"), line.get("model_id")
            answer_id = line.get_id("answer_id", required=False)
            text = line.get("choices", 0, "turns", 0, "content")
        if prompt_id not in known:
            raise line.error(f"answer for unknown prompt {prompt_id!r} (not in {question_file})")
        check_unique(seen, (prompt_id, model_id), line, f"answer of model {model_id!r} to prompt {prompt_id!r}")
        out.append((Response(prompt_id=prompt_id, model_id=model_id, text=text, response_id=answer_id), line))
    return out
