"""Style-controlled Bradley-Terry (`bt-style`): planted quality recovered, coefficients as a reference fit."""

from __future__ import annotations

import numpy as np
import pytest

from eqarena.methods import get_method
from eqarena.solvers.pairwise.style_control import fit_style_bradley_terry, standardise
from eqarena.solvers.pairwise.style_features import FEATURES, battle_style_features, style_counts, style_difference

pytestmark = pytest.mark.unit

QUALITY = np.array([1.0, 0.5, 0.0, -0.5])  # model 0 best
MEAN_TOKENS = np.array([100.0, 200.0, 400.0, 800.0])  # ... but the worst answers are longest
LENGTH_EFFECT = 1.5  # log-odds per standard deviation of the length feature


def length_driven_battles(k: int = 6000, seed: int = 0) -> dict[str, np.ndarray]:
    """Random pairs; the judge's log-odds for A are quality difference + LENGTH_EFFECT * standardised
    length difference; markdown counts are noise the judge ignores."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, k)
    b = (a + rng.integers(1, 4, k)) % 4
    counts = [
        np.column_stack(
            [rng.lognormal(np.log(MEAN_TOKENS[m]), 0.3), rng.poisson(2.0, k), rng.poisson(5.0, k), rng.poisson(3.0, k)]
        )
        for m in (a, b)
    ]
    style = style_difference(*counts)
    z, _ = standardise(style)
    p = 1.0 / (1.0 + np.exp(-(QUALITY[a] - QUALITY[b] + LENGTH_EFFECT * z[:, 0])))
    score = np.where(rng.random(k) < p, 1.0, -1.0)
    return {"prompt": np.arange(k), "model_a": a, "model_b": b, "score": score, "style": style}


def test_style_control_recovers_the_planted_order():
    battles = length_driven_battles()
    raw = get_method("bt").model_fit(np.zeros((1, 4, 4)), battles)
    styled = fit_style_bradley_terry(np.zeros((1, 4, 4)), battles)
    assert list(np.argsort(-styled.ratings)) == [0, 1, 2, 3]
    assert list(np.argsort(-raw.ratings)) != [0, 1, 2, 3]
    assert np.argmax(raw.ratings) != 0  # length sells: raw BT does not put the best model first
    assert styled.diagnostics["style_length"] == pytest.approx(LENGTH_EFFECT, abs=0.2)
    for name in FEATURES[1:]:
        assert abs(styled.diagnostics[f"style_{name}"]) < 0.15


def test_coefficients_match_a_reference_logistic_regression():
    """scikit-learn's logistic regression (no intercept, in effect unpenalised) on the design
    [e_a - e_b, standardised style differences] gives the same strengths (centred) and coefficients."""
    from sklearn.linear_model import LogisticRegression

    battles = length_driven_battles(k=3000, seed=1)
    ours = fit_style_bradley_terry(np.zeros((1, 4, 4)), battles)
    z, _ = standardise(battles["style"])
    x = np.zeros((len(z), 4))
    x[np.arange(len(z)), battles["model_a"]] += 1.0
    x[np.arange(len(z)), battles["model_b"]] -= 1.0
    lr = LogisticRegression(fit_intercept=False, C=1e12, tol=1e-12, max_iter=100_000)
    lr.fit(np.hstack([x, z]), battles["score"] > 0)
    theta = lr.coef_[0][:4] - lr.coef_[0][:4].mean()
    elo = 1000.0 + 400.0 / np.log(10.0) * theta
    assert ours.ratings == pytest.approx(elo, abs=0.05)
    for k, name in enumerate(FEATURES):
        assert ours.diagnostics[f"style_{name}"] == pytest.approx(lr.coef_[0][4 + k], abs=1e-4)


def test_bootstrap_interval_holds_the_rating():
    battles = length_driven_battles(k=1500)
    fit = fit_style_bradley_terry(np.zeros((1, 4, 4)), battles, bootstrap=30, seed=3)
    assert np.all(fit.ci_lo <= fit.ratings) and np.all(fit.ratings <= fit.ci_hi)
    assert np.all(fit.ci_hi - fit.ci_lo > 1.0)


def test_markdown_counts_as_arena_hard_auto():
    text = (
        "# Title\n## Part\nSome **bold** and __also__ text.\n\n1. one\n2. two\n- dash\n  * nested\n"
        "```\n# not a header\n- not a list\n**not bold**\n```\n#no space is no header\n"
    )
    tokens, headers, lists, bold = style_counts(text)
    assert (headers, lists, bold) == (2, 4, 2)
    assert tokens > 20  # code blocks count towards the length, not the markdown


def test_feature_differences_and_missing_texts():
    a, b = np.array([30.0, 2, 0, 1]), np.array([10.0, 0, 0, 1])
    diff = style_difference(a, b)
    assert diff[0] == pytest.approx(0.5)  # (30 - 10) / 40
    assert diff[1] == pytest.approx((2 / 31) / (2 / 31 + 1))  # densities 2/31 and 0
    assert diff[2] == 0.0 and diff[3] == pytest.approx((1 / 31 - 1 / 11) / (1 / 31 + 1 / 11 + 1))
    battles = {"prompt": np.array([0, 0]), "model_a": np.array([0, 1]), "model_b": np.array([1, 2])}
    feats = battle_style_features(battles, ["p"], ["x", "y", "z"], {("p", "x"): "a b c", ("p", "y"): "**d**"})
    assert np.all(np.isfinite(feats[0])) and np.all(np.isnan(feats[1]))
    with pytest.raises(ValueError, match="style"):
        get_method("bt-style").model_fit(np.zeros((1, 3, 3)), None)
