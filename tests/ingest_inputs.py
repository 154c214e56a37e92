"""Small arena-hard directories for ingest tests, written in either layout, and warehouse snapshots."""

from __future__ import annotations

import json
from pathlib import Path

from eqarena import warehouse

CATALOG_TABLES = ("prompts", "models", "responses", "judgments")


def question_record(layout: str, prompt_id: str, text: str) -> dict:
    if layout == "new":
        return {"uid": prompt_id, "category": "arena-hard-v0.1", "cluster": "tests", "prompt": text}
    return {"question_id": prompt_id, "category": "arena-hard-v0.1", "cluster": "tests", "turns": [{"content": text}]}


def answer_record(layout: str, prompt_id: str, model: str, text: str) -> dict:
    if layout == "new":
        return {
            "uid": prompt_id,
            "ans_id": f"{model}-{prompt_id}",
            "model": model,
            "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": {"answer": text}}],
        }
    return {
        "question_id": prompt_id,
        "answer_id": f"{model}-{prompt_id}",
        "model_id": model,
        "choices": [{"index": 0, "turns": [{"content": text}]}],
    }


def answer_text(model: str, prompt_id: str) -> str:
    return f"answer of {model} to {prompt_id}: ünïcode ✓"


def write_arena_dir(
    root: Path,
    *,
    n_prompts: int = 5,
    models: dict[str, str] | None = None,
    question_layout: str = "new",
) -> Path:
    """An arena-hard directory: prompts p0..p{n-1} and, per model, an answer file in the given layout
    (default: m-new in the new layout, m-old in the old one)."""
    models = {"m-new": "new", "m-old": "old"} if models is None else models
    (root / "model_answer").mkdir(parents=True, exist_ok=True)
    ids = [f"p{i}" for i in range(n_prompts)]
    write_jsonl(root / "question.jsonl", [question_record(question_layout, p, f"prompt {p}?") for p in ids])
    for model, layout in models.items():
        write_jsonl(
            root / "model_answer" / f"{model}.jsonl",
            [answer_record(layout, p, model, answer_text(model, p)) for p in ids],
        )
    return root


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def snapshot(db_path: Path) -> dict[str, list[tuple]]:
    """Every row of the catalog tables and judgments, sorted (to compare a warehouse before/after)."""
    con = warehouse.connect(db_path, read_only=True)
    try:
        return {t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in CATALOG_TABLES}
    finally:
        con.close()
