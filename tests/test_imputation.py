"""Missing-cell imputation (prompt-wise Bradley-Terry with shrinkage): cvxpy reference, structure of the
output, complete input, recovery of planted BT payoffs, the errors for unidentified models, and the
cross-validated choice of the shrinkage (shrinkage="auto", the default)."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

from eqarena.solvers.sparse import imputation
from eqarena.solvers.sparse.imputation import ImputationError, ImputedTensor, impute_payoffs
from eqarena.solvers.toys.games import synthetic_king_tensor

pytestmark = pytest.mark.unit


def hide(num_prompts: int, num_models: int, share: float, seed: int, keep_path: bool = False) -> np.ndarray:
    """Symmetric (P, M, M) mask of hidden cells: each unordered pair hidden with probability `share`.

    keep_path: never hide the pairs (k, k + 1), so every prompt's covered pairs connect all models.
    """
    rng = np.random.default_rng(seed)
    hidden = np.triu(rng.random((num_prompts, num_models, num_models)) < share, k=1)
    if keep_path:
        k = np.arange(num_models - 1)
        hidden[:, k, k + 1] = False
    return hidden | np.swapaxes(hidden, 1, 2)


def sparse(u: np.ndarray, hidden: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.where(hidden, np.nan, u), ~hidden


def cvxpy_reference(u: np.ndarray, covered: np.ndarray, shrinkage: float) -> tuple[np.ndarray, np.ndarray]:
    """beta (M,), theta (P, M) minimising the same objective, written independently as an exponential-cone program."""
    P, M, _ = u.shape
    rows, targets = [], []
    for p in range(P):
        for i in range(M):
            for j in range(i + 1, M):
                if covered[p, i, j]:
                    row = np.zeros(P * M)
                    row[p * M + i], row[p * M + j] = 1.0, -1.0
                    rows.append(row)
                    targets.append((1.0 + u[p, i, j]) / 2.0)
    design, y = np.array(rows), np.array(targets)
    beta = cp.Variable(M)
    spread = np.kron(np.ones((P, 1)), np.eye(M))  # theta[p * M + i] = beta[i] (+ delta[p * M + i])
    if math.isinf(shrinkage):
        theta = spread @ beta
        penalty = 0
    else:
        delta = cp.Variable(P * M)
        theta = spread @ beta + delta
        penalty = shrinkage / 2 * cp.sum_squares(delta)
    gaps = design @ theta
    ridge = imputation._BETA_RIDGE / 2 * cp.sum_squares(beta)
    objective = cp.sum(cp.logistic(gaps) - cp.multiply(y, gaps)) + penalty + ridge
    problem = cp.Problem(cp.Minimize(objective))
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    assert problem.status == cp.OPTIMAL
    return np.asarray(beta.value), np.asarray(theta.value).reshape(P, M)


@pytest.mark.parametrize("shrinkage", [imputation.DEFAULT_SHRINKAGE, 1.0, math.inf])
def test_matches_cvxpy_on_the_same_convex_objective(shrinkage):
    u = synthetic_king_tensor(8, 5, seed=3)
    u_sparse, covered = sparse(u, hide(8, 5, 0.3, seed=4))
    beta_ref, theta_ref = cvxpy_reference(u, covered, shrinkage)
    fit = impute_payoffs(u_sparse, covered, shrinkage=shrinkage)
    assert fit.shrinkage == shrinkage
    np.testing.assert_allclose(fit.strengths, beta_ref, atol=1e-5)
    np.testing.assert_allclose(fit.prompt_strengths, theta_ref, atol=1e-5)
    gap = theta_ref[:, :, None] - theta_ref[:, None, :]
    np.testing.assert_allclose(fit.u_king[fit.imputed], np.tanh(gap / 2)[fit.imputed], atol=1e-5)


def test_observed_cells_kept_and_output_antisymmetric():
    u = synthetic_king_tensor(40, 7, seed=1)
    hidden = hide(40, 7, 0.3, seed=2)
    u_sparse, covered = sparse(u, hidden)
    fit = impute_payoffs(u_sparse, covered)
    assert isinstance(fit, ImputedTensor)
    assert fit.u_king.shape == (40, 7, 7) and fit.prompt_strengths.shape == (40, 7) and fit.strengths.shape == (7,)
    assert np.array_equal(fit.imputed, hidden)  # exactly the uncovered off-diagonal cells
    assert fit.imputed.any()
    assert np.array_equal(fit.u_king[covered], u[covered])  # bit for bit, diagonal included
    assert np.array_equal(fit.u_king, -np.swapaxes(fit.u_king, 1, 2))
    assert np.all(np.diagonal(fit.u_king, axis1=1, axis2=2) == 0)
    assert np.all(np.isfinite(fit.u_king)) and np.all(np.abs(fit.u_king[hidden]) < 1)
    assert abs(fit.strengths.sum()) < 1e-9
    # Values in uncovered cells are ignored, whatever they are.
    garbage = np.where(hidden, 0.9 * np.sign(np.triu(np.ones((7, 7)), 1) - 0.5), u)
    np.testing.assert_array_equal(impute_payoffs(garbage, covered).u_king, fit.u_king)


def test_complete_input_is_unchanged():
    u = synthetic_king_tensor(20, 6, seed=5)
    covered = np.ones(u.shape, dtype=bool)
    fit = impute_payoffs(u, covered)
    assert not fit.imputed.any()
    assert np.array_equal(fit.u_king, u)


def test_global_bt_recovered_from_large_samples():
    """Judgments from one BT model (no prompt effects), 100,000 verdicts per cell: filled cells ~ the truth.

    Prompt-wise BT also fits each prompt's sampling noise (sd ~ 3e-3 per cell) into delta; the global
    model, here the true one, pools every prompt and is tighter."""
    P, M = 60, 6
    rng = np.random.default_rng(0)
    strengths = rng.normal(size=M)
    gap = strengths[:, None] - strengths[None, :]
    n = 100_000
    upper = np.triu(2 * rng.binomial(n, 1 / (1 + np.exp(-np.broadcast_to(gap, (P, M, M))))) / n - 1, k=1)
    u = upper - np.swapaxes(upper, 1, 2)
    hidden = hide(P, M, 0.3, seed=1)
    truth = np.broadcast_to(np.tanh(gap / 2), (P, M, M))[hidden]
    fit = impute_payoffs(*sparse(u, hidden), shrinkage=imputation.DEFAULT_SHRINKAGE)
    assert np.max(np.abs(fit.u_king[hidden] - truth)) < 1.5e-2
    assert np.mean(np.abs(fit.u_king[hidden] - truth)) < 3e-3
    np.testing.assert_allclose(fit.strengths, strengths - strengths.mean(), atol=3e-3)
    pooled = impute_payoffs(*sparse(u, hidden), shrinkage=math.inf)
    assert np.max(np.abs(pooled.u_king[hidden] - truth)) < 2e-3


def test_prompt_specific_strengths_recovered_with_little_shrinkage():
    """Expected payoffs of a prompt-wise BT model: with shrinkage -> 0 the fit reproduces every prompt's gaps,
    while the global model (shrinkage inf) cannot."""
    P, M = 30, 6
    rng = np.random.default_rng(1)
    theta = rng.normal(size=M)[None, :] + 0.7 * rng.normal(size=(P, M))
    truth = np.tanh((theta[:, :, None] - theta[:, None, :]) / 2)
    hidden = hide(P, M, 0.4, seed=2, keep_path=True)
    fit = impute_payoffs(*sparse(truth, hidden), shrinkage=1e-6)
    assert hidden.any()
    assert np.max(np.abs(fit.u_king - truth)) < 1e-3
    global_fit = impute_payoffs(*sparse(truth, hidden), shrinkage=math.inf)
    assert np.max(np.abs(global_fit.u_king - truth)) > 0.1


def test_prompt_without_data_gets_the_global_prediction():
    u = synthetic_king_tensor(10, 5, seed=2)
    hidden = hide(10, 5, 0.2, seed=3)
    hidden[4] = ~np.eye(5, dtype=bool)  # prompt 4: nothing covered
    fit = impute_payoffs(*sparse(u, hidden))
    np.testing.assert_allclose(fit.prompt_strengths[4], fit.strengths, atol=1e-12)
    assert fit.imputed[4].sum() == 5 * 4


def test_model_that_always_wins_stays_finite():
    u = synthetic_king_tensor(12, 4, seed=0)
    u[:, 0, 1:], u[:, 1:, 0] = 1.0, -1.0  # model 0 wins every verdict
    hidden = hide(12, 4, 0.3, seed=1)
    fit = impute_payoffs(*sparse(u, hidden))
    assert np.all(np.isfinite(fit.prompt_strengths))
    assert fit.strengths[0] == fit.strengths.max()
    assert np.all(fit.u_king[:, 0, 1:][fit.imputed[:, 0, 1:]] > 0.9)


def test_model_without_data_is_named():
    u = synthetic_king_tensor(5, 4, seed=0)
    hidden = np.zeros(u.shape, dtype=bool)
    hidden[:, 2, :] = hidden[:, :, 2] = True
    hidden[:, 2, 2] = False
    with pytest.raises(ImputationError, match=r"gpt-x has no covered cell"):
        impute_payoffs(*sparse(u, hidden), model_names=["a", "b", "gpt-x", "d"])


def test_disconnected_comparison_graph_names_the_groups():
    u = synthetic_king_tensor(6, 5, seed=0)
    covered = np.zeros(u.shape, dtype=bool)
    covered[:, range(5), range(5)] = True
    for p, (i, j) in enumerate([(0, 3), (3, 4), (1, 2), (0, 4), (1, 2), (3, 0)]):  # {a, d, e} and {b, c}
        covered[p, i, j] = covered[p, j, i] = True
    names = ["a", "b", "c", "d", "e"]
    with pytest.raises(ImputationError, match=r"disconnected into 2 groups \(\{a, d, e\}; \{b, c\}\)"):
        impute_payoffs(np.where(covered, u, np.nan), covered, model_names=names)
    covered[5, 1, 4] = covered[5, 4, 1] = True  # one bridging cell is enough
    fit = impute_payoffs(np.where(covered, u, np.nan), covered, model_names=names)
    assert fit.imputed.sum() == 6 * 5 * 4 - 2 * 7


def _flip_one(u, c):
    c = c.copy()
    c[0, 0, 1] = ~c[0, 0, 1]
    return u, c


@pytest.mark.parametrize(
    "change,message",
    [
        (_flip_one, "symmetric"),
        (lambda u, c: (u, c.astype(int)), "boolean"),
        (lambda u, c: (1.5 * u, c), r"\[-1, 1\]"),
        (lambda u, c: (np.abs(u), c), "antisymmetric"),
        (lambda u, c: (np.where(c, np.nan, u), c), "finite"),
        (lambda u, c: (u[:, :3], c[:, :3]), r"shape \(P, M, M\)"),
    ],
)
def test_invalid_inputs(change, message):
    u = synthetic_king_tensor(4, 4, seed=0)
    u[:, 0, 1], u[:, 1, 0] = 1.0, -1.0
    covered = ~hide(4, 4, 0.3, seed=0)
    covered[:, 0, 1] = covered[:, 1, 0] = True
    with pytest.raises(ValueError, match=message):
        impute_payoffs(*change(np.where(covered, u, np.nan), covered))


@pytest.mark.parametrize("shrinkage", [0.0, -1.0, "bogus", None])
def test_shrinkage_must_be_positive_or_auto(shrinkage):
    u = synthetic_king_tensor(3, 3, seed=0)
    with pytest.raises(ValueError, match="shrinkage"):
        impute_payoffs(u, np.ones(u.shape, dtype=bool), shrinkage=shrinkage)


def planted_bt(
    num_prompts: int, num_models: int, prompt_spread: float, verdicts: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sparse (u, covered): theta = beta + prompt_spread * noise, `verdicts`-verdict means, 30% of cells hidden."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=num_models)[None, :] + prompt_spread * rng.normal(size=(num_prompts, num_models))
    gap = theta[:, :, None] - theta[:, None, :]
    upper = np.triu(2 * rng.binomial(verdicts, 1 / (1 + np.exp(-gap))) / verdicts - 1, k=1)
    return sparse(upper - np.swapaxes(upper, 1, 2), hide(num_prompts, num_models, 0.3, seed=seed + 100))


def test_auto_is_the_default_and_deterministic():
    u_sparse, covered = planted_bt(40, 6, 0.5, 8, seed=0)
    first = impute_payoffs(u_sparse, covered)
    again = impute_payoffs(u_sparse.copy(), covered.copy(), shrinkage="auto")
    assert first.shrinkage == again.shrinkage
    assert np.array_equal(first.u_king, again.u_king)
    assert np.array_equal(first.prompt_strengths, again.prompt_strengths)


def test_auto_reports_a_grid_value_and_refits_with_it():
    u_sparse, covered = planted_bt(40, 6, 0.5, 8, seed=1)
    fit = impute_payoffs(u_sparse, covered)
    assert isinstance(fit.shrinkage, float)
    assert fit.shrinkage in imputation.AUTO_GRID
    assert fit.shrinkage == fit[-1]  # appended last: positional unpacking of the first four is unchanged
    fixed = impute_payoffs(u_sparse, covered, shrinkage=fit.shrinkage)
    assert fixed.shrinkage == fit.shrinkage
    np.testing.assert_array_equal(fit.u_king, fixed.u_king)
    np.testing.assert_array_equal(fit.prompt_strengths, fixed.prompt_strengths)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_shrinks_noise_more_than_real_prompt_skills(seed):
    """Global BT judged with 4 verdicts per cell: every prompt deviation is noise, so auto shrinks hard;
    strong prompt-specific skills judged with 1000 verdicts: auto keeps them (a small penalty)."""
    noise = impute_payoffs(*planted_bt(40, 6, 0.0, 4, seed=seed)).shrinkage
    skills = impute_payoffs(*planted_bt(40, 6, 1.0, 1000, seed=seed)).shrinkage
    assert noise >= 2.0
    assert skills <= 0.0625
    assert noise >= 32 * skills


def test_auto_fits_noiseless_payoffs_almost_exactly():
    """Expected payoffs tanh(gap / 2) of prompt-wise skills, no judging noise: auto picks the grid's
    smallest penalties and recovers the hidden cells far better than the noise-tuned fixed default."""
    rng = np.random.default_rng(7)
    theta = rng.normal(size=8)[None, :] + rng.normal(size=(100, 8))
    u = np.tanh((theta[:, :, None] - theta[:, None, :]) / 2)
    hidden = hide(100, 8, 0.3, seed=7)
    fit = impute_payoffs(*sparse(u, hidden))
    fixed = impute_payoffs(*sparse(u, hidden), shrinkage=imputation.DEFAULT_SHRINKAGE)
    rmse = lambda x: float(np.sqrt(np.mean((x - u)[hidden] ** 2)))  # noqa: E731
    assert fit.shrinkage <= 2.0**-8
    assert rmse(fit.u_king) < 0.01 < rmse(fixed.u_king)


def test_auto_falls_back_on_tiny_input():
    """Fewer covered unordered cells than AUTO_MIN_CELLS (here 2 prompts x 6 pairs = 12): DEFAULT_SHRINKAGE."""
    u = synthetic_king_tensor(2, 4, seed=0)
    covered = np.ones(u.shape, dtype=bool)
    covered[0, 0, 1] = covered[0, 1, 0] = False
    assert 2 * 6 - 1 < imputation.AUTO_MIN_CELLS
    fit = impute_payoffs(np.where(covered, u, np.nan), covered)
    assert fit.shrinkage == imputation.DEFAULT_SHRINKAGE == 0.125
    fixed = impute_payoffs(np.where(covered, u, np.nan), covered, shrinkage=0.125)
    np.testing.assert_array_equal(fit.u_king, fixed.u_king)
    one = impute_payoffs(np.zeros((3, 1, 1)), np.ones((3, 1, 1), dtype=bool))
    assert one.shrinkage == imputation.DEFAULT_SHRINKAGE


def test_numeric_shrinkage_is_reported_as_given():
    u_sparse, covered = planted_bt(10, 4, 0.5, 8, seed=3)
    assert impute_payoffs(u_sparse, covered, shrinkage=1).shrinkage == 1.0
    assert impute_payoffs(u_sparse, covered, shrinkage=math.inf).shrinkage == math.inf
