"""Evaluation data whose equilibria degenerate, as public leaderboards' often do: a star-shaped battle log
(one model in every battle, the other pairs never compared) and a baseline-only preference table
(every model compared with one baseline only)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

HUB = "hub"
STAR_SKILLS = {HUB: -1.0, "m1": 0.5, "m2": 0.2, "m3": 1.5}  # the hub is the weakest model
BASELINE = "baseline"


def star_battles(path: Path, prompts: int = 60, battles_per_pair: int = 3, seed: int = 3) -> Path:
    """A Chatbot-Arena battle log (JSONL) in which every battle is the hub against another model, with
    Bradley-Terry outcomes from STAR_SKILLS and a random order of the two models."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for q in range(prompts):
            for other in (m for m in STAR_SKILLS if m != HUB):
                for _ in range(battles_per_pair):
                    hub_wins = rng.random() < 1 / (1 + math.exp(STAR_SKILLS[other] - STAR_SKILLS[HUB]))
                    a, b = (HUB, other) if rng.random() < 0.5 else (other, HUB)
                    winner = "model_a" if (a == HUB) == hub_wins else "model_b"
                    out.write(json.dumps({"question_id": f"q{q}", "model_a": a, "model_b": b, "winner": winner}) + "\n")
    return path


def baseline_preferences(path: Path, models: int = 8, prompts: int = 200, seed: int = 3) -> Path:
    """A pairwise table (CSV: prompt_id, model_a, model_b, score) of `models` models each judged against
    BASELINE only, in both orders, with skill rising by model index and per-prompt noise."""
    rng = np.random.default_rng(seed)
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["prompt_id", "model_a", "model_b", "score"])
        for q in range(prompts):
            for k in range(models):
                score = round(float(np.tanh(0.3 * k - 1 + rng.normal())), 3)
                writer.writerow([f"i{q}", f"m{k}", BASELINE, score])
                writer.writerow([f"i{q}", BASELINE, f"m{k}", -score])
    return path
