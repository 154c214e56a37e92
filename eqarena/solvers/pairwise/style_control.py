"""Style-controlled Bradley-Terry: model strengths with the answers' style as covariates.

P(a beats b) = sigmoid(theta_a - theta_b + beta . z), z the standardised style differences of the
two answers (solvers.pairwise.style_features; each feature minus its mean over the judgments, over its
standard deviation, as arena-hard-auto's show_result.py and Chatbot Arena's style control do). The
outcome is (1 + s) / 2 of judge score s, as in the raw `bt` method, so the two differ only by the
covariates. beta is in natural-log odds per standard deviation of a feature: beta_length > 0 means
the judge prefers the longer answer, quality held equal. Ratings are on the Elo scale, mean 1000.
"""

from __future__ import annotations

import numpy as np

from eqarena.methods import Battles, ModelFit
from eqarena.solvers.bootstrap.intervals import rating_interval
from eqarena.solvers.pairwise.bradley_terry import (
    ELO_ANCHOR,
    ELO_SCALE,
    FALLBACK_REGULARIZATION,
    _check_identifiable,
    score_to_outcome,
)
from eqarena.solvers.pairwise.style_features import FEATURES

CONFIDENCE = 0.95
_MAX_STEP = 4.0


def standardise(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Features (K, F) minus their mean over their (sample, ddof=1) standard deviation, and which
    columns vary (a constant column, e.g. no markdown anywhere, is zeroed and left out of the fit)."""
    z = np.asarray(features, dtype=np.float64)
    sd = z.std(axis=0, ddof=1) if len(z) > 1 else np.zeros(z.shape[1])
    varies = sd > 1e-12
    out = np.zeros_like(z)
    out[:, varies] = (z[:, varies] - z[:, varies].mean(axis=0)) / sd[varies]
    return out, varies


def fit_logistic_bt(
    a,
    b,
    outcome,
    z,
    num_models: int,
    regularization: float = 0.0,
    weights=None,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Maximum likelihood (theta (M,) with mean 0, beta (F,), Newton steps) of P(a beats b) =
    sigmoid(theta_a - theta_b + beta . z) for soft outcomes in [0, 1]; `regularization`: L2 on theta."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    o, z = np.asarray(outcome, dtype=np.float64), np.asarray(z, dtype=np.float64).reshape(len(a), -1)
    w = np.ones(len(a)) if weights is None else np.asarray(weights, dtype=np.float64)
    m, f = num_models, z.shape[1]
    x = np.zeros((len(a), m + f))
    rows = np.arange(len(a))
    x[rows, a] += 1.0
    x[rows, b] -= 1.0
    x[:, m:] = z
    u = np.zeros(m + f)
    u[:m] = 1.0 / np.sqrt(m)  # the free direction: adding a constant to every theta
    penalty = np.zeros(m + f)
    penalty[:m] = regularization
    params = np.zeros(m + f)
    step = 0
    for _ in range(max_iter):
        step += 1
        p = 1.0 / (1.0 + np.exp(-(x @ params)))
        grad = x.T @ (w * (o - p)) - penalty * params
        info = (x * (w * p * (1.0 - p))[:, None]).T @ x + np.diag(penalty)
        delta = np.linalg.solve(info + np.outer(u, u) + 1e-12 * np.eye(m + f), grad)
        delta -= u * (u @ delta)
        size = np.max(np.abs(delta))
        if size > _MAX_STEP:
            delta *= _MAX_STEP / size
        params += delta
        if size < tol:
            break
    else:
        raise ValueError("style-controlled Bradley-Terry did not converge")
    theta = params[:m] - params[:m].mean()
    return theta, params[m:], step


def fit_style_bradley_terry(u_king, battles: Battles | None, bootstrap: int = 0, seed: int = 0) -> ModelFit:
    """Style-controlled Bradley-Terry Elo of `battles` with style differences `battles['style']`
    (K, F; NaN rows: a text is missing, left out), with a battle-bootstrap interval like `bt`'s.
    The diagnostics hold the fitted style coefficients (`style_<feature>`, module docstring)."""
    u = np.asarray(u_king, dtype=np.float64)
    if battles is None or "style" not in battles:
        raise ValueError("bt-style needs the judgments and the answers' style features (rate --style-control)")
    style = np.asarray(battles["style"], dtype=np.float64)
    known = ~np.isnan(style).any(axis=1)
    if not known.any():
        raise ValueError("bt-style: no judgment has both answers' texts (the dataset has no responses for them)")
    m = u.shape[1]
    a, b = np.asarray(battles["model_a"])[known], np.asarray(battles["model_b"])[known]
    o = score_to_outcome(np.asarray(battles["score"])[known])
    z, varies = standardise(style[known])
    z = z[:, varies]
    regularization = 0.0
    try:
        _check_identifiable(a, b, o, np.ones(len(a)), m)
        theta, beta, steps = fit_logistic_bt(a, b, o, z, m)
    except ValueError:
        regularization = FALLBACK_REGULARIZATION
        theta, beta, steps = fit_logistic_bt(a, b, o, z, m, regularization)
    ratings = ELO_ANCHOR + ELO_SCALE * theta
    lo = hi = None
    if bootstrap > 1:
        rng = np.random.default_rng(seed)
        samples = []
        for _ in range(bootstrap):
            counts = np.bincount(rng.integers(0, len(a), len(a)), minlength=len(a)).astype(np.float64)
            th, _, _ = fit_logistic_bt(a, b, o, z, m, max(regularization, 1e-6), weights=counts)
            samples.append(ELO_ANCHOR + ELO_SCALE * th)
        lo, hi = rating_interval(np.stack(samples), ratings, CONFIDENCE)
    coefficients = np.zeros(len(FEATURES))
    coefficients[varies] = beta
    diagnostics = {
        "battles": int(len(a)),
        "battles_without_text": int(np.sum(~known)),
        "iterations": steps,
        "regularization": regularization,
        "bootstrap": bootstrap,
        "confidence": CONFIDENCE if lo is not None else 0.0,
    }
    diagnostics.update({f"style_{name}": float(c) for name, c in zip(FEATURES, coefficients)})
    return ModelFit(ratings, lo, hi, diagnostics)
