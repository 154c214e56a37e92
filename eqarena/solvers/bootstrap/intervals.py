"""Bootstrap intervals that hold the rating shown beside them.

A percentile interval is the central `confidence` range of the replicates' ratings. It need not hold
the full-data rating: under the "judgments" scheme a cell at +-1 can only move inward, so where many
cells are unanimous the replicates sit to one side of the rating the data gives. The interval used
everywhere (equilibrium methods under both schemes, Bradley-Terry) is the percentile interval widened
just enough to take in the full-data rating: [min(q_lo, rating), max(q_hi, rating)].

Why this one: it is a superset of the percentile interval, so it holds every rating the percentile
interval held (bench/coverage.py: coverage cannot drop), and it differs from it only where the rating
lay outside, by the distance the rating lay out. Both ends are ratings the method produced (a
replicate's or the full data's), so the interval stays within what the method can give (equilibrium
ratings in [-2, 0]) without clipping. The shifted percentile interval (the replicates' median moved
onto the rating) holds the rating too, but covered less with 8 verdicts per order (bench/coverage.py
--compare, 24 seeds: NE 94.8% and 87.5% against 100% and 93.8%, CCE 91.7% and 90.6% against 93.8%
and 91.7%); with 2 verdicts per order it covered a little more than either (VIEWS.md).
"""

from __future__ import annotations

import numpy as np


def rating_interval(samples, rating, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), each (M,): the central `confidence` percentile range of samples (B, M), widened to hold
    `rating` (M,), the full-data rating shown beside it."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence}")
    samples = np.asarray(samples, dtype=np.float64)
    rating = np.asarray(rating, dtype=np.float64)
    if samples.ndim != 2 or rating.shape != samples.shape[1:]:
        raise ValueError(f"samples (B, M) and rating (M,) expected; got {samples.shape} and {rating.shape}")
    tail = (1.0 - confidence) / 2.0
    q_lo, q_hi = np.quantile(samples, [tail, 1.0 - tail], axis=0)
    return np.minimum(q_lo, rating), np.maximum(q_hi, rating)
