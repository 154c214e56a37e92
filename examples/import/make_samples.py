"""Write the small sample files of examples/import/ (one per import format), from a made-up skill model.

    python examples/import/make_samples.py

The models, prompts, verdicts and judge texts are invented for the examples; the files are committed,
and this script documents how they were made (same seed, same files).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODELS = ["atlas-7b", "borealis-13b", "cirrus-70b", "drift-3b"]
BASELINE = "gpt-4-0314"
PROMPTS = {
    "q01": "Write a haiku about autumn rain.",
    "q02": "Explain the difference between a list and a tuple in Python.",
    "q03": "Summarise the causes of the French Revolution in three sentences.",
    "q04": "Give a SQL query that returns the second highest salary per department.",
    "q05": "What is the derivative of x^x?",
    "q06": "Draft a polite email declining a meeting invitation.",
    "q07": "Prove that the square root of 2 is irrational.",
    "q08": "Suggest a name for a bakery that only sells sourdough.",
}
LABELS = ["B>>A", "B>A", "A=B", "A>B", "A>>B"]


def skill(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Each model's (and the baseline's) skill on each prompt: a base skill plus prompt-specific noise."""
    base = {"atlas-7b": 0.0, "borealis-13b": 0.6, "cirrus-70b": 1.4, "drift-3b": -0.8, BASELINE: 1.0}
    return {m: b + 0.7 * rng.normal(size=len(PROMPTS)) for m, b in base.items()}


def label(rng: np.random.Generator, gap: float) -> str:
    """A five-label verdict for assistant A with skill gap `gap` over B (noisy)."""
    value = np.clip(np.round(gap + rng.normal(scale=0.6)), -2, 2)
    return LABELS[int(value) + 2]


def arena_hard_auto(rng: np.random.Generator, skills: dict) -> None:
    judge = "gpt-4o-2024-08-06"
    folder = HERE / "tiny-bench" / "model_judgment" / judge
    folder.mkdir(parents=True, exist_ok=True)
    for model in MODELS[:3]:
        with open(folder / f"{model}.jsonl", "w", encoding="utf-8") as out:
            for k, (qid, text) in enumerate(PROMPTS.items()):
                games = []
                for first, second in ((BASELINE, model), (model, BASELINE)):
                    verdict = label(rng, skills[first][k] - skills[second][k])
                    games.append({"user_prompt": f"<|User Prompt|>\n{text}\n\n(answers of {first} and {second})",
                                  "judgment": f"Both answers address the prompt. My final verdict is [[{verdict}]].",
                                  "score": verdict})
                if model == "cirrus-70b" and qid == "q05":  # a judge that never gave a label
                    games[1] = {"user_prompt": games[1]["user_prompt"],
                                "judgment": "The answers are hard to compare without running the code.",
                                "score": None}
                out.write(json.dumps({"question_id": qid, "model": model, "judge": judge, "games": games}) + "\n")


def battles(rng: np.random.Generator, skills: dict) -> None:
    rows = []
    ids = list(PROMPTS)
    for n in range(48):
        k = int(rng.integers(len(ids)))
        a, b = rng.choice(MODELS, size=2, replace=False)
        gap = skills[a][k] - skills[b][k] + rng.normal(scale=0.5)
        winner = "model_a" if gap > 0.3 else "model_b" if gap < -0.3 else ("tie" if n % 3 else "tie (bothbad)")
        rows.append({"question_id": ids[k], "model_a": str(a), "model_b": str(b), "winner": winner,
                     "judge": f"arena_user_{int(rng.integers(1, 40))}", "turn": 1, "anony": True,
                     "language": "English", "tstamp": 1_720_000_000 + 3_600 * n,
                     "conversation_a": [{"role": "user", "content": PROMPTS[ids[k]]},
                                        {"role": "assistant", "content": f"(answer of {a})"}],
                     "conversation_b": [{"role": "user", "content": PROMPTS[ids[k]]},
                                        {"role": "assistant", "content": f"(answer of {b})"}]})
    with open(HERE / "battles.jsonl", "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def pairwise(rng: np.random.Generator, skills: dict) -> None:
    with open(HERE / "pairwise.csv", "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["prompt_id", "model_a", "model_b", "verdict", "judge", "sample", "prompt_text"])
        for k, (qid, text) in enumerate(PROMPTS.items()):
            for a in MODELS:
                for b in MODELS:
                    if a != b:
                        verdict = label(rng, skills[a][k] - skills[b][k])
                        writer.writerow([qid, a, b, verdict, "my-judge", 0, text])


def scores(rng: np.random.Generator, skills: dict) -> None:
    with open(HERE / "scores.csv", "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["prompt_id", *MODELS])
        for k, qid in enumerate(PROMPTS):
            row = [f"{1 / (1 + np.exp(-skills[m][k])):.2f}" for m in MODELS]
            if qid in ("q03", "q06"):  # a model that was not run on every prompt
                row[MODELS.index("drift-3b")] = ""
            writer.writerow([qid, *row])


TASKS = ["code_generation", "code_completion", "math_competitions", "logic_puzzles", "summarize", "typos"]


def livebench_style(rng: np.random.Generator) -> None:
    """A table of a row per model and a column per task, in percent (`import scores --layout models-by-tasks`)."""
    base = {"atlas-7b": 0.0, "borealis-13b": 0.6, "cirrus-70b": 1.4, "drift-3b": -0.8}
    with open(HERE / "livebench-style.csv", "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["model", *TASKS])
        for model in MODELS:
            row = [f"{100 / (1 + np.exp(-(base[model] + 0.8 * rng.normal()))):.1f}" for _ in TASKS]
            if model == "drift-3b":  # tasks a model was not run on: NaN (as pandas writes it) or empty
                row[TASKS.index("summarize")], row[TASKS.index("typos")] = "NaN", ""
            writer.writerow([model, *row])


def alpacaeval_style(rng: np.random.Generator, skills: dict) -> None:
    """A row per instruction, a column per model: its preference in [1, 2] over the baseline
    (`import pairwise --layout preferences --baseline gpt4_turbo`)."""
    with open(HERE / "alpacaeval-style.csv", "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["instruction_idx", "instruction", *MODELS])
        for k, text in enumerate(PROMPTS.values()):
            row = []
            for model in MODELS:
                gap = skills[model][k] - skills[BASELINE][k] + rng.normal(scale=0.5)
                row.append("1.5" if abs(gap) < 0.15 else f"{1 + 1 / (1 + np.exp(-2 * gap)):.2f}")
            if k == 5:  # an instruction a model has no output for
                row[MODELS.index("drift-3b")] = ""
            writer.writerow([k, text, *row])


def main() -> None:
    rng = np.random.default_rng(20241125)
    skills = skill(rng)
    arena_hard_auto(rng, skills)
    battles(rng, skills)
    pairwise(rng, skills)
    scores(rng, skills)
    livebench_style(rng)
    alpacaeval_style(rng, skills)


if __name__ == "__main__":
    main()
