"""Win rate against a baseline model: arena-hard-auto's headline number.

arena-hard-auto (v2.0 show_result.py) judges every model against one baseline on each prompt in two
games, baseline as A then the model as A, and scores each game from the model's side: a win 1, a tie
1/2, a loss 0, a decisive verdict (`A>>B`, `B>>A`) counted `STRONG_WEIGHT` = 3 times. A model's win
rate is the weighted mean of those scores over its games; the baseline rates 50%.

Here a judgment's score s in [-1, 1] (model_a's, docs/game.md#verdict-labels-and-scores) is a win for
the model when s > 0 from its side, a tie at s = 0, and decisive when |s| = 1 (`A>>B`, `B>>A`, and
battle logs' wins). As arena-hard-auto, which drops a judgment line whose other game failed, only
prompts where the model met the baseline in both positions count (position bias then cancels);
every ok judgment of those pairs counts (several judges or samples: all of them).

The bootstrap resamples prompts with replacement (arena-hard-auto resamples games within a model);
the interval is the percentile range widened to hold the full-data rate (`solvers.bootstrap.intervals`).
"""

from __future__ import annotations

import numpy as np

from eqarena.methods import Battles, ModelFit
from eqarena.solvers.bootstrap.intervals import rating_interval

STRONG_WEIGHT = 3.0  # arena-hard-auto's weight of a decisive verdict (`weight=3` in show_result.py)
CONFIDENCE = 0.95


def most_compared(battles: Battles, num_models: int) -> int:
    """The model in the most judgments (an arena-hard-auto import's baseline: it is in every one);
    ties go to the lowest index."""
    counts = np.bincount(np.asarray(battles["model_a"]), minlength=num_models) + np.bincount(
        np.asarray(battles["model_b"]), minlength=num_models
    )
    return int(np.argmax(counts))


def baseline_games(battles: Battles, num_models: int, baseline: int) -> dict[str, np.ndarray]:
    """The judgments of each model against `baseline` from the model's side, where the pair met in
    both positions on the prompt: {'prompt', 'model', 'score' (the model's win share), 'weight'}."""
    a, b = np.asarray(battles["model_a"]), np.asarray(battles["model_b"])
    s, p = np.asarray(battles["score"], dtype=np.float64), np.asarray(battles["prompt"])
    keep = (a == baseline) ^ (b == baseline)
    model_first = keep & (b == baseline)
    model = np.where(model_first, a, b)[keep]
    score = np.where(model_first, s, -s)[keep]
    first, prompt = model_first[keep], p[keep]
    # a (prompt, model) pair counts only when both positions were judged
    key = prompt.astype(np.int64) * num_models + model
    both = np.intersect1d(key[first], key[~first])
    counted = np.isin(key, both)
    score, model, prompt = score[counted], model[counted], prompt[counted]
    share = np.where(score > 0, 1.0, np.where(score < 0, 0.0, 0.5))
    weight = np.where(np.isclose(np.abs(score), 1.0), STRONG_WEIGHT, 1.0)
    return {"prompt": prompt, "model": model, "score": share, "weight": weight}


def win_rates(games: dict[str, np.ndarray], num_models: int, baseline: int, prompt_weights=None) -> np.ndarray:
    """Percent win rate (M,) of each model over `games` (baseline_games); the baseline 50, a model
    without games NaN. `prompt_weights` (P,): how often each prompt is drawn (a bootstrap replicate)."""
    w = games["weight"] if prompt_weights is None else games["weight"] * prompt_weights[games["prompt"]]
    total = np.bincount(games["model"], weights=w, minlength=num_models)
    won = np.bincount(games["model"], weights=w * games["score"], minlength=num_models)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(total > 0, 100.0 * won / total, np.nan)
    rate[baseline] = 50.0
    return rate


def fit_win_rate(u_king, battles: Battles | None, bootstrap: int = 0, seed: int = 0) -> ModelFit:
    """Each model's percent win rate against the baseline (`battles['baseline']`, a model index;
    default `most_compared`), with a prompt-bootstrap interval from `bootstrap` replicates."""
    u = np.asarray(u_king, dtype=np.float64)
    if battles is None or not len(battles.get("score", ())):
        raise ValueError("winrate needs the judgments behind the tensor (battles), not only the tensor")
    m, n_prompts = u.shape[1], u.shape[0]
    baseline = int(battles["baseline"]) if "baseline" in battles else most_compared(battles, m)
    games = baseline_games(battles, m, baseline)
    rates = win_rates(games, m, baseline)
    lo = hi = None
    if bootstrap > 1:
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(n_prompts, np.full(n_prompts, 1.0 / n_prompts), size=bootstrap)
        samples = np.stack([win_rates(games, m, baseline, d.astype(np.float64)) for d in draws])
        # a replicate without a model's games says nothing about it: fill with the full-data rate
        samples = np.where(np.isnan(samples), rates[None], samples)
        lo, hi = rating_interval(samples, rates, CONFIDENCE)
    diagnostics = {
        "baseline_index": baseline,
        "games": int(len(games["score"])),
        "strong_weight": STRONG_WEIGHT,
        "bootstrap": bootstrap,
        "confidence": CONFIDENCE if lo is not None else 0.0,
        "models_without_games": int(np.sum(np.isnan(rates))),
    }
    return ModelFit(rates, lo, hi, diagnostics)
