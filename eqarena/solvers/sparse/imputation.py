"""Missing-cell imputation for sparse king tensors: prompt-wise Bradley-Terry with shrinkage.

Model i's strength on prompt p is theta[p, i] = beta[i] + delta[p, i]; the predicted payoff of i over
j is u_hat[p, i, j] = tanh((theta[p, i] - theta[p, j]) / 2) = 2 sigmoid(theta_i - theta_j) - 1, the
expected score when a verdict is +1 / -1 with the Bradley-Terry probability. The fit minimises, over
the covered off-diagonal cells (each unordered pair once), the soft-label logistic loss with target
y = (1 + u) / 2, plus (shrinkage / 2) sum delta^2 and a tiny ridge (_BETA_RIDGE / 2) sum beta^2,
which makes the problem strictly convex (and the optimum exist on separable data); its minimiser has
sum(beta) = 0 and, per prompt, sum_i delta[p, i] = 0. Newton's method with a backtracking line
search solves it exactly: the Hessian is an arrow (beta couples to every prompt's delta block), so
one step costs P batched (M, M) solves and an (M, M) Schur complement.

Covered cells keep their values; only uncovered off-diagonal cells are filled. A prompt without any
covered cell gets the global prediction (delta = 0). shrinkage = inf fits the global Bradley-Terry
model (delta = 0 everywhere).

shrinkage = "auto" (the default) chooses the penalty by cross-validation, since the best value depends on
the judging noise (verdicts per cell) and on how prompt-specific the models' skills are, which a fixed
number cannot know: the covered unordered (prompt, pair) cells are split into AUTO_FOLDS folds by a fixed
seeded permutation (same input, same choice), each grid value in AUTO_GRID is fitted on the other folds
(warm-started from the neighbouring grid value's fit) and scored by the squared error of u on the held-out
fold, and the value with the least total error is refitted on all covered cells. With fewer than
AUTO_MIN_CELLS covered unordered cells there is too little to hold out, and DEFAULT_SHRINKAGE is used.
The value used is reported as ImputedTensor.shrinkage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from eqarena.exceptions import EqarenaError

# Fixed penalty on the prompt deviations delta used by shrinkage="auto" on inputs too small to
# cross-validate (and the default before "auto"): the minimiser of the held-out RMSE of hidden cells of
# synthetic_king_tensor games (8 verdicts per cell, prompt_noise 1; 100 x 8 and 500 x 17, 30% hidden)
# over the grid 0.03 ... 3 (`bench/impute.py --sweep`), which is also the generator's MAP value
# 1 / (verdicts * prompt_noise^2): each cell's soft label carries about 8 verdicts' information. With
# more verdicts per cell the best value is smaller, which is why "auto" is the default.
DEFAULT_SHRINKAGE = 0.125
# shrinkage="auto": log-spaced candidates 1/1024 ... 8 (powers of 2; the small end lets nearly noiseless
# payoffs, e.g. means of many verdicts, be fitted almost exactly), the number of cross-validation folds,
# the seed of the fold assignment, and the fewest covered unordered cells for which auto cross-validates
# (below it, DEFAULT_SHRINKAGE: each fold would hold out fewer than 4 cells).
AUTO_GRID = tuple(2.0**k for k in range(-10, 4))
AUTO_FOLDS = 5
AUTO_SEED = 20240517
AUTO_MIN_CELLS = 4 * AUTO_FOLDS
# Ridge on beta: fixes the additive gauge and keeps beta finite when a model wins (or loses) every
# covered cell; small against one cell's curvature (<= 1/4), so it barely moves a real fit.
_BETA_RIDGE = 1e-6
_TOL = 1e-10
_MAX_ITER = 200
# Relative Newton-decrement tolerance of the cross-validation fits (the final fit goes to rounding level):
# the decrement is ~ 2 x the objective gap, so these fits are converged far beyond what the comparison of
# held-out errors between grid values can notice, and they skip the last, confirming Newton step.
_CV_TOL = 1e-10
_ARMIJO = 1e-4


class ImputedTensor(NamedTuple):
    """A king tensor with its uncovered cells filled by the prompt-wise Bradley-Terry prediction.

    u_king: (P, M, M) complete, antisymmetric, zero diagonal; covered cells as given.
    imputed: (P, M, M) bool, True exactly where a value was filled in (symmetric, diagonal False).
    strengths: (M,) global strengths beta (natural-log scale, sum 0).
    prompt_strengths: (P, M) theta = beta + delta, the strengths behind u_hat on each prompt.
    shrinkage: the penalty on delta used for the fit (the cross-validated choice when "auto").
    """

    u_king: np.ndarray
    imputed: np.ndarray
    strengths: np.ndarray
    prompt_strengths: np.ndarray
    shrinkage: float


class ImputationError(EqarenaError, ValueError):
    """The covered cells do not determine every model's strength relative to the others."""


def impute_payoffs(
    u_king,
    covered,
    *,
    shrinkage: float | str = "auto",
    model_names: Sequence[str] | None = None,
) -> ImputedTensor:
    """Fill the uncovered cells of u_king (P, M, M) with prompt-wise Bradley-Terry predictions.

    u_king: (P, M, M) in [-1, 1], antisymmetric on covered cells; uncovered values are ignored (NaN).
    covered: (P, M, M) bool, symmetric; the diagonal is ignored. shrinkage: penalty on the prompt
    deviations delta (> 0; inf = global Bradley-Terry), or "auto" (default): the value of AUTO_GRID with
    the least AUTO_FOLDS-fold cross-validated squared error of u on the covered cells (deterministic;
    DEFAULT_SHRINKAGE when fewer than AUTO_MIN_CELLS unordered cells are covered). The value used is
    returned as .shrinkage. model_names: (M,) names for error messages. Raises ImputationError when a
    model has no covered cell or the comparison graph (models linked when some prompt covers their
    pair) is disconnected.
    """
    u, obs, names = _check_inputs(u_king, covered, shrinkage, model_names)
    P, M, _ = u.shape
    _check_identified(obs, names)
    auto = isinstance(shrinkage, str)
    if M == 1:
        lam = DEFAULT_SHRINKAGE if auto else float(shrinkage)
        return ImputedTensor(np.zeros_like(u), np.zeros_like(obs), np.zeros(1), np.zeros((P, 1)), lam)
    cells = _cells(obs, u)
    lam = _cross_validate(cells) if auto else float(shrinkage)
    beta, delta = _fit(cells, lam)
    theta = beta[None, :] + delta
    gap = theta[:, :, None] - theta[:, None, :]
    upper = np.triu(np.ones((M, M), dtype=bool), k=1)[None]
    u_hat = np.where(upper, np.tanh(gap / 2.0), 0.0)
    u_hat = u_hat - np.swapaxes(u_hat, 1, 2)  # exactly antisymmetric
    offdiag = ~np.eye(M, dtype=bool)[None]
    imputed = ~obs & offdiag
    out = np.where(obs, u, np.where(imputed, u_hat, 0.0))
    return ImputedTensor(out, imputed, beta, theta, lam)


# ----------------------------------------------------------------------------------------------


def _check_inputs(u_king, covered, shrinkage, model_names):
    u = np.asarray(u_king, dtype=np.float64)
    if u.ndim != 3 or u.shape[1] != u.shape[2]:
        raise ValueError(f"u_king must have shape (P, M, M); got {u.shape}")
    cov = np.asarray(covered)
    if cov.shape != u.shape:
        raise ValueError(f"covered must have the shape of u_king {u.shape}; got {cov.shape}")
    if cov.dtype != np.bool_:
        raise ValueError(f"covered must be a boolean mask; got dtype {cov.dtype}")
    if not np.array_equal(cov, np.swapaxes(cov, 1, 2)):
        raise ValueError("covered must be symmetric: covered[p, i, j] == covered[p, j, i]")
    if isinstance(shrinkage, str):
        if shrinkage != "auto":
            raise ValueError(f'shrinkage must be "auto" or a number > 0 (inf: global Bradley-Terry); got {shrinkage!r}')
    elif not (isinstance(shrinkage, (int, float, np.floating, np.integer)) and shrinkage > 0):
        raise ValueError(f'shrinkage must be "auto" or a number > 0 (inf: global Bradley-Terry); got {shrinkage!r}')
    M = u.shape[1]
    if model_names is None:
        names = [f"model {k}" for k in range(M)]
    else:
        names = [str(n) for n in model_names]
        if len(names) != M:
            raise ValueError(f"model_names: expected {M} names; got {len(names)}")
    obs = cov & ~np.eye(M, dtype=bool)[None]
    seen = u[obs]
    if not np.all(np.isfinite(seen)):
        raise ValueError("u_king must be finite on covered cells")
    if np.any(np.abs(seen) > 1.0 + 1e-9):
        raise ValueError("u_king values must lie in [-1, 1] on covered cells")
    skew = np.abs(np.where(obs, u + np.swapaxes(u, 1, 2), 0.0))
    if np.any(skew > 1e-9):
        p, i, j = np.unravel_index(np.argmax(skew), skew.shape)
        raise ValueError(f"u_king is not antisymmetric on covered cell (p, i, j) = ({p}, {i}, {j})")
    return u, obs, names


def _check_identified(obs: np.ndarray, names: list[str]) -> None:
    import scipy.sparse
    import scipy.sparse.csgraph

    M = obs.shape[1]
    linked = obs.any(axis=0)  # (M, M): some prompt covers the pair
    lonely = np.flatnonzero(~linked.any(axis=1))
    if M > 1 and lonely.size:
        raise ImputationError(
            f"{_names(names, lonely)} {'has' if lonely.size == 1 else 'have'} no covered cell on any prompt: "
            "there is nothing to predict their payoffs from; judge them or drop them"
        )
    count, labels = scipy.sparse.csgraph.connected_components(scipy.sparse.csr_matrix(linked), directed=False)
    if count > 1:
        groups = sorted((np.flatnonzero(labels == c) for c in range(count)), key=lambda g: (-g.size, g[0]))
        listing = "; ".join("{" + _names(names, g) + "}" for g in groups)
        raise ImputationError(
            f"the comparison graph is disconnected into {count} groups ({listing}): no prompt covers a pair "
            "across groups, so predictions between them would be arbitrary; judge such a pair or drop a group"
        )


def _names(names: list[str], idx, limit: int = 8) -> str:
    shown = [names[k] for k in idx[:limit]]
    more = f", ... ({len(idx) - limit} more)" if len(idx) > limit else ""
    return ", ".join(shown) + more


class _Cells(NamedTuple):
    """The covered unordered cells the fit sees: prompt p, models i < j, soft label y = (1 + u[p, i, j]) / 2,
    and weight w (1 per cell of a tensor; the number of battles behind a cell of a group game)."""

    P: int
    M: int
    p: np.ndarray
    i: np.ndarray
    j: np.ndarray
    y: np.ndarray
    w: np.ndarray

    def subset(self, keep: np.ndarray) -> _Cells:
        return _Cells(self.P, self.M, self.p[keep], self.i[keep], self.j[keep], self.y[keep], self.w[keep])


def _cells(obs: np.ndarray, u: np.ndarray) -> _Cells:
    P, M, _ = obs.shape
    p, i, j = np.nonzero(np.triu(obs, k=1))
    return _Cells(P, M, p, i, j, (1.0 + u[p, i, j]) / 2.0, np.ones(p.size))


class ShrunkStrengths(NamedTuple):
    """Strengths of a prompt-wise (or group-wise) Bradley-Terry fit: beta (M,) global, theta (P, M) = beta + delta."""

    strengths: np.ndarray
    prompt_strengths: np.ndarray
    shrinkage: float


def fit_shrunk_strengths(
    p,
    i,
    j,
    y,
    w,
    num_prompts: int,
    num_models: int,
    *,
    shrinkage: float | str = "auto",
    start: ShrunkStrengths | None = None,
) -> ShrunkStrengths:
    """The model of this module fitted to weighted soft labels: cell k is prompt (or group) p[k], models
    i[k] < j[k], label y[k] = P(i beats j) in [0, 1], weight w[k] > 0 (e.g. its battles; the loss is the
    weighted soft-label logistic loss). shrinkage as in `impute_payoffs` ("auto": cross-validated over the
    cells). start: a nearby fit to start Newton's method from (same shrinkage)."""
    cells = _Cells(
        int(num_prompts),
        int(num_models),
        np.asarray(p, dtype=np.int64),
        np.asarray(i, dtype=np.int64),
        np.asarray(j, dtype=np.int64),
        np.asarray(y, dtype=np.float64),
        np.asarray(w, dtype=np.float64),
    )
    lam = _cross_validate(cells) if isinstance(shrinkage, str) else float(shrinkage)
    warm = None if start is None else (start.strengths, start.prompt_strengths - start.strengths[None, :])
    beta, delta = _fit(cells, lam, warm)
    return ShrunkStrengths(beta, beta[None, :] + delta, lam)


def _cross_validate(cells: _Cells) -> float:
    """shrinkage="auto": the value of AUTO_GRID with the least cross-validated squared error of u."""
    n = cells.p.size
    if n < AUTO_MIN_CELLS:
        return DEFAULT_SHRINKAGE
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(AUTO_SEED).permutation(n)] = np.arange(n) % AUTO_FOLDS
    grid = sorted(AUTO_GRID, reverse=True)  # large to small: each fit starts from a smoother neighbour
    error = np.zeros(len(grid))
    for k in range(AUTO_FOLDS):
        train, test = cells.subset(fold != k), cells.subset(fold == k)
        start = None
        for g, lam in enumerate(grid):
            beta, delta = start = _fit(train, lam, start, tol=_CV_TOL)
            theta = beta[None, :] + delta
            pred = np.tanh((theta[test.p, test.i] - theta[test.p, test.j]) / 2.0)
            # Squared error of u: the filled values are used as payoffs, so their error in payoff units is what
            # matters (the bench's RMSE), and it stays bounded where the log loss explodes on cells at +-1.
            error[g] += float(np.sum(test.w * (pred - (2.0 * test.y - 1.0)) ** 2))
    return grid[int(np.argmin(error))]  # ties: the larger value (the grid runs downwards)


def _objective(cells: _Cells, lam: float, beta: np.ndarray, delta: np.ndarray) -> float:
    theta = beta[None, :] + delta
    d = theta[cells.p, cells.i] - theta[cells.p, cells.j]
    loss = float(np.sum(cells.w * (np.logaddexp(0.0, d) - cells.y * d)))
    penalty = 0.0 if math.isinf(lam) else 0.5 * lam * float(np.sum(delta**2))
    return loss + penalty + 0.5 * _BETA_RIDGE * float(np.sum(beta**2))


def _fit(cells: _Cells, lam: float, start=None, tol: float = 1e-16) -> tuple[np.ndarray, np.ndarray]:
    """Newton's method on the strictly convex objective over the covered cells.

    start: (beta, delta) to start from (a warm start), else zeros. tol: stop once the Newton decrement
    is below tol * (1 + |f|) (1e-16: rounding level). Returns beta (M,) and delta (P, M) (zeros when
    lam is inf).
    """
    P, M = cells.P, cells.M
    glob = math.isinf(lam)
    eye = np.eye(M)
    if start is None or glob:
        beta, delta = np.zeros(M), np.zeros((P, M))
    else:
        beta, delta = start[0].copy(), start[1].copy()
    at_i, at_j = cells.p * M + cells.i, cells.p * M + cells.j  # flat (p, i) and (p, j) indices into (P, M)
    at_ij, at_ji = at_i * M + cells.j, at_j * M + cells.i  # flat (p, i, j) and (p, j, i) into (P, M, M)
    diag = (np.arange(P)[:, None] * M * M + np.arange(M) * (M + 1)).ravel()  # flat (p, i, i)
    f = _objective(cells, lam, beta, delta)
    for _ in range(_MAX_ITER):
        theta = (beta[None, :] + delta).ravel()
        s = 1.0 / (1.0 + np.exp(-(theta[at_i] - theta[at_j])))
        r = cells.w * (s - cells.y)
        g_theta = (np.bincount(at_i, r, P * M) - np.bincount(at_j, r, P * M)).reshape(P, M)
        c = cells.w * s * (1.0 - s)
        lap = np.zeros(P * M * M)  # per-prompt Hessian in theta (a weighted graph Laplacian)
        lap[at_ij] = lap[at_ji] = -c
        lap[diag] = np.bincount(at_i, c, P * M) + np.bincount(at_j, c, P * M)
        lap = lap.reshape(P, M, M)
        g_beta = g_theta.sum(axis=0) + _BETA_RIDGE * beta
        if glob:
            step_beta = -np.linalg.solve(lap.sum(axis=0) + _BETA_RIDGE * eye, g_beta)
            step_delta = np.zeros_like(delta)
        else:
            g_delta = g_theta + lam * delta
            # Eliminate delta: D_p = L_p + lam I, Schur complement S = sum_p L_p + ridge I - L_p D_p^-1 L_p.
            solved = np.linalg.solve(lap + lam * eye[None], np.concatenate([lap, g_delta[:, :, None]], axis=2))
            d_lap, d_g = solved[:, :, :M], solved[:, :, M]
            # Batched small products, not one long (M, P M) x (P M, M) product: BLAS may thread that one, and
            # its spinning threads slow everything else down on a busy machine.
            schur = lap.sum(axis=0) + _BETA_RIDGE * eye - np.matmul(lap, d_lap).sum(axis=0)
            schur = (schur + schur.T) / 2.0
            rhs = -g_beta + np.matmul(lap, d_g[:, :, None]).sum(axis=0)[:, 0]
            step_beta = np.linalg.solve(schur, rhs)
            step_delta = -d_g - d_lap @ step_beta
        # The loss ignores a common shift of beta, so its exact Newton component is -mean(beta); rounding
        # in the gradient (~1e-13) divided by the ridge would otherwise move beta along it at random.
        step_beta = step_beta - np.mean(step_beta + beta)
        decrement = -(g_beta @ step_beta + (0.0 if glob else np.sum(g_delta * step_delta)))
        if decrement <= max(tol, 1e-12) * (1.0 + abs(f)):
            # Quadratic region: the full step is safe, and a line search could not see its decrease
            # through the rounding of f. Stop once the decrement (~2 x the gap to the optimum) is below
            # tol (by default at rounding level) or the step is negligible.
            beta, delta = beta + step_beta, delta + step_delta
            small = max(np.max(np.abs(step_beta)), np.max(np.abs(step_delta))) < _TOL
            if small or decrement <= tol * (1.0 + abs(f)):
                return beta, delta
            f = _objective(cells, lam, beta, delta)
            continue
        t = 1.0
        while True:
            nb, nd = beta + t * step_beta, delta + t * step_delta
            nf = _objective(cells, lam, nb, nd)
            if nf <= f - _ARMIJO * t * decrement:
                break
            t *= 0.5
            if t < 1e-10:
                raise ImputationError("the Bradley-Terry imputation fit stalled: no descent along the Newton step")
        beta, delta, f = nb, nd, nf
    raise ImputationError(f"the Bradley-Terry imputation fit did not converge in {_MAX_ITER} Newton steps")
