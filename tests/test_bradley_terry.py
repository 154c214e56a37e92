"""Bradley-Terry / Elo: planted strengths, independent fits (scikit-learn, choix), bootstrap, online Elo."""

from __future__ import annotations

import choix
import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from eqarena.solvers import bradley_terry, online_elo, score_to_outcome
from eqarena.solvers.pairwise.bradley_terry import ELO_SCALE

pytestmark = pytest.mark.unit


def simulate(strengths: np.ndarray, battles: int, *, tie_rate: float = 0.0, seed: int = 0):
    """Battles between random distinct models; a decided battle follows the BT probability."""
    rng = np.random.default_rng(seed)
    m = len(strengths)
    a = rng.integers(0, m, battles)
    b = (a + rng.integers(1, m, battles)) % m
    win = rng.random(battles) < 1.0 / (1.0 + np.exp(strengths[b] - strengths[a]))
    outcome = np.where(win, 1.0, 0.0)
    outcome[rng.random(battles) < tie_rate] = 0.5
    return a, b, outcome


def sklearn_strengths(a, b, outcome, m, weights=None):
    """Unpenalised logistic regression on +-1 design rows; a tie is half a win for each side."""
    w = np.ones(len(a)) if weights is None else weights
    x = np.zeros((len(a), m))
    x[np.arange(len(a)), a] = 1.0
    x[np.arange(len(a)), b] = -1.0
    design = np.concatenate([x, x])
    labels = np.concatenate([np.ones(len(a)), np.zeros(len(a))])
    sample_weight = np.concatenate([w * outcome, w * (1 - outcome)])
    keep = sample_weight > 0
    lr = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10_000)
    lr.fit(design[keep], labels[keep], sample_weight=sample_weight[keep])
    theta = lr.coef_[0]
    return theta - theta.mean()


def test_recovers_planted_strengths():
    strengths = np.array([-1.2, -0.5, 0.0, 0.3, 0.8, 1.5])
    a, b, outcome = simulate(strengths, 60_000)
    fit = bradley_terry(a, b, outcome)
    planted = 1000 + ELO_SCALE * (strengths - strengths.mean())
    # About 4,000 battles per pair: a standard error of about 12 Elo points per rating.
    assert np.abs(fit.ratings - planted).max() < 30
    assert np.argsort(fit.ratings).tolist() == list(range(6))
    assert fit.ratings.mean() == pytest.approx(1000.0)


def test_agrees_with_scikit_learn_with_ties_and_weights():
    strengths = np.array([0.4, -0.3, 1.1, 0.0, -0.9])
    a, b, outcome = simulate(strengths, 3000, tie_rate=0.25, seed=1)
    weights = np.random.default_rng(2).uniform(0.5, 3.0, len(a))
    fit = bradley_terry(a, b, outcome, weights=weights)
    reference = sklearn_strengths(a, b, outcome, 5, weights)
    assert np.abs(fit.log_strengths - reference).max() < 1e-5


def test_agrees_with_choix_without_ties():
    strengths = np.array([0.2, -1.0, 0.7, 1.3, -0.4, 0.0, 0.5])
    a, b, outcome = simulate(strengths, 5000, seed=3)
    fit = bradley_terry(a, b, outcome)
    data = [(int(i), int(j)) if o == 1.0 else (int(j), int(i)) for i, j, o in zip(a, b, outcome)]
    reference = choix.ilsr_pairwise(7, data, alpha=0.0, tol=1e-12, max_iter=1000)
    assert np.abs(fit.log_strengths - (reference - reference.mean())).max() < 1e-6


def test_anchor_and_elo_scale():
    a, b, outcome = simulate(np.array([0.0, 1.0, -1.0]), 5000, seed=4)
    fit = bradley_terry(a, b, outcome, anchor=2)
    assert fit.ratings[2] == pytest.approx(1000.0)
    # 400 Elo points = 10x odds.
    p = 1 / (1 + 10 ** ((fit.ratings[0] - fit.ratings[1]) / 400))
    assert p == pytest.approx(1 / (1 + np.exp(fit.log_strengths[0] - fit.log_strengths[1])))


def test_weights_equal_duplication_and_swapping_sides_is_antisymmetric():
    a, b, outcome = simulate(np.array([0.3, -0.2, 0.0, 0.6]), 400, tie_rate=0.2, seed=5)
    doubled = bradley_terry(
        np.concatenate([a, a[:50]]), np.concatenate([b, b[:50]]), np.concatenate([outcome, outcome[:50]])
    )
    weighted = bradley_terry(a, b, outcome, weights=np.r_[np.full(50, 2.0), np.ones(len(a) - 50)])
    assert np.allclose(doubled.ratings, weighted.ratings, atol=1e-8)
    swapped = bradley_terry(b, a, 1 - outcome)
    assert np.allclose(swapped.ratings, bradley_terry(a, b, outcome).ratings, atol=1e-8)


def test_bootstrap_intervals_are_seeded_and_cover_the_fit():
    strengths = np.array([-0.5, 0.0, 0.5, 1.0])
    a, b, outcome = simulate(strengths, 2000, tie_rate=0.1, seed=6)
    fit = bradley_terry(a, b, outcome, bootstrap=200, seed=7)
    again = bradley_terry(a, b, outcome, bootstrap=200, seed=7)
    assert np.array_equal(fit.ci_lo, again.ci_lo) and np.array_equal(fit.ci_hi, again.ci_hi)
    assert fit.samples.shape == (200, 4)
    assert np.all(fit.ci_lo < fit.ratings) and np.all(fit.ratings < fit.ci_hi)
    # The percentile interval of the mean-anchored ratings is about +-1.96 standard errors wide.
    spread = fit.samples.std(axis=0)
    assert np.allclose(fit.ci_hi - fit.ci_lo, 2 * 1.96 * spread, rtol=0.25)
    larger = bradley_terry(*simulate(strengths, 20_000, tie_rate=0.1, seed=8), bootstrap=100, seed=7)
    assert np.all(larger.ci_hi - larger.ci_lo < fit.ci_hi - fit.ci_lo)


def test_online_elo_follows_the_update_rule():
    r = online_elo([0, 0, 1], [1, 2, 2], [1.0, 0.5, 0.0], num_models=3, k_factor=32)
    r0 = np.full(3, 1000.0)
    for i, j, s in [(0, 1, 1.0), (0, 2, 0.5), (1, 2, 0.0)]:
        e = 1 / (1 + 10 ** ((r0[j] - r0[i]) / 400))
        r0[i] += 32 * (s - e)
        r0[j] -= 32 * (s - e)
    assert np.allclose(r.ratings, r0)
    assert r.ratings.sum() == pytest.approx(3000.0)


def test_scores_map_to_outcomes():
    assert np.allclose(score_to_outcome([-1, -0.5, 0, 0.5, 1]), [0, 0.25, 0.5, 0.75, 1])
    with pytest.raises(ValueError, match="score"):
        score_to_outcome([1.5])


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ValueError, match="battle 1"):
        bradley_terry([0, 1], [1, 1], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"outcome\[0\]"):
        bradley_terry([0], [1], [2.0])
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        bradley_terry([0, 1], [1, 0], [1.0, 0.0], weights=[1.0, -1.0])
    with pytest.raises(ValueError, match="integer"):
        bradley_terry([0.0], [1.0], [1.0])
    # Model 2 never loses: the MLE does not exist, regularisation makes it finite.
    a, b, o = [0, 1, 2, 2], [1, 0, 0, 1], [1.0, 1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"models \[2\]"):
        bradley_terry(a, b, o)
    fit = bradley_terry(a, b, o, regularization=0.1)
    assert np.argmax(fit.ratings) == 2 and np.all(np.isfinite(fit.ratings))
    # A loss of weight 0 links nothing; one of positive weight does.
    with pytest.raises(ValueError, match=r"models \[2\]"):
        bradley_terry(a + [0], b + [2], o + [1.0], weights=[1.0, 1.0, 1.0, 1.0, 0.0])
    assert np.all(np.isfinite(bradley_terry(a + [0], b + [2], o + [1.0]).ratings))


def test_a_tensor_without_judgments_is_bootstrapped_over_its_prompts():
    """BT of a tensor alone resamples its prompts: identical prompts give replicates that are all the
    full fit (a zero-width interval), unlike a resampling of its cells; distinct prompts give a spread that
    holds the rating."""
    from eqarena.solvers import synthetic_king_tensor
    from eqarena.solvers.pairwise.bradley_terry import fit_bradley_terry, prompt_bootstrap

    one = synthetic_king_tensor(1, 6, seed=3, judgments=None)
    copies = np.repeat(one, 30, axis=0)
    fit = fit_bradley_terry(copies, None, bootstrap=20, seed=1)
    np.testing.assert_allclose(fit.ci_lo, fit.ratings, atol=1e-6)
    np.testing.assert_allclose(fit.ci_hi, fit.ratings, atol=1e-6)
    assert fit.diagnostics["resampled"] == "prompts"
    varied = synthetic_king_tensor(60, 6, seed=4)
    fit = fit_bradley_terry(varied, None, bootstrap=50, seed=1)
    assert np.all(fit.ci_hi - fit.ci_lo > 1.0) and np.all((fit.ci_lo <= fit.ratings) & (fit.ratings <= fit.ci_hi))
    again = prompt_bootstrap(varied, 50, seed=1)
    np.testing.assert_array_equal(again, prompt_bootstrap(varied, 50, seed=1))
