"""Final skill entropies of improvement-path trials (Algorithm 1) with percentile bootstrap intervals
over trials, and the paired difference between two methods (trial k of every method starts from the
same draw, seed + k, so differences are taken trial by trial). No I/O."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """A mean over trials and its percentile bootstrap interval."""

    mean: float
    lo: float
    hi: float
    trials: int


def bootstrap_mean(values, *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = 0) -> Interval:
    """The mean of `values` (one per trial) with a percentile bootstrap interval (trials resampled)."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError("bootstrap_mean needs a non-empty vector of per-trial values")
    draws = np.random.default_rng(seed).integers(0, len(x), size=(resamples, len(x)))
    means = x[draws].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(x.mean()), float(lo), float(hi), len(x))


def paired_difference(a, b, **options) -> Interval:
    """mean(a - b) over trials paired by index, with its bootstrap interval."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired difference needs as many trials on both sides; got {a.shape} and {b.shape}")
    return bootstrap_mean(a - b, **options)


def difference_sentence(first: str, second: str, what: str, d: Interval) -> str:
    """'under elo the model skill entropy ends 0.21 lower than under ne (95% interval 0.12 to 0.30)'."""
    if d.lo == d.hi == 0:  # e.g. the prompts of the "initial" setting: the same in every trial
        return f"under {first} the {what} skill entropy ends the same as under {second}"
    word = "lower" if d.mean < 0 else "higher"
    lo, hi = (-d.hi, -d.lo) if d.mean < 0 else (d.lo, d.hi)  # the interval of the amount lower / higher
    return (
        f"under {first} the {what} skill entropy ends {abs(d.mean):.3f} nats {word} than under {second} "
        f"({CONFIDENCE:.0%} interval {lo:.3f} to {hi:.3f})"
    )


@dataclass(frozen=True)
class FinalEntropy:
    """Mean final skill entropies of one method in one setting, with bootstrap intervals over trials."""

    method: str
    setting: str
    prompt: Interval
    model: Interval


@dataclass(frozen=True)
class EntropyDifference:
    """first - second in final skill entropy (paired by trial), with its interval and a sentence."""

    first: str
    second: str
    setting: str
    what: str  # "model" or "prompt"
    difference: Interval
    sentence: str
