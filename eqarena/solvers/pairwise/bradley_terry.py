"""Elo ratings from pairwise battles: Bradley-Terry maximum likelihood and online Elo.

Bradley-Terry (as Chatbot Arena and arena-hard-auto fit it): P(a beats b) = 1 / (1 + 10^((R_b - R_a) / 400)),
i.e. natural-log strengths theta with R = 1000 + (400 / ln 10) (theta - theta_anchor). The fit
maximises the (weighted) log-likelihood of the observed outcomes; a tie counts as half a win for
each side (outcome 0.5), exactly as arena-hard-auto's tie handling (a tie adds one to each side's
win count while a win adds two). Judge scores s in [-1, 1] (A>>B +1 ... B>>A -1,
docs/game.md#verdict-labels-and-scores) map to
outcomes (1 + s) / 2; arena-hard-auto's extra weight for strong verdicts is a `weights` choice.

Anchor: by default the ratings average 1000; with `anchor=m` model m is rated exactly 1000.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eqarena.methods import Battles, ModelFit
from eqarena.solvers.bootstrap.intervals import rating_interval

ELO_SCALE = 400.0 / np.log(10.0)  # rating points per unit of natural-log strength
ELO_ANCHOR = 1000.0
# L2 penalty on log-strengths for callers to retry with when the plain MLE does not exist (a model
# that never loses or never wins).
FALLBACK_REGULARIZATION = 1e-2
_MAX_STEP = 4.0


@dataclass(frozen=True, eq=False)
class EloRatings:
    """Ratings on the Elo scale; `ci_lo`/`ci_hi` are bootstrap bounds that hold `ratings` (None without
    bootstrap; `solvers.bootstrap.intervals`).

    `samples` (B, M) are the bootstrap replicates' ratings, `log_strengths` the fitted theta (M,)
    before the Elo affine map, `iterations` the Newton steps of the full-data fit.
    """

    ratings: np.ndarray
    ci_lo: np.ndarray | None = None
    ci_hi: np.ndarray | None = None
    samples: np.ndarray | None = None
    log_strengths: np.ndarray | None = None
    num_battles: int = 0
    method: str = ""
    iterations: int = 0
    confidence: float = 0.0


def score_to_outcome(score) -> np.ndarray:
    """Judge score s in [-1, 1] for model a -> outcome (1 + s) / 2 in [0, 1]."""
    s = np.asarray(score, dtype=np.float64)
    if np.any(np.abs(s) > 1.0):
        raise ValueError("score: values must lie in [-1, 1]")
    return (1.0 + s) / 2.0


def bradley_terry(
    model_a,
    model_b,
    outcome,
    *,
    num_models: int | None = None,
    weights=None,
    anchor: int | None = None,
    regularization: float = 0.0,
    bootstrap: int = 0,
    confidence: float = 0.95,
    seed: int = 0,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> EloRatings:
    """Maximum-likelihood Bradley-Terry ratings on the Elo scale, with bootstrap confidence intervals.

    Args:
      model_a, model_b: (K,) integer model indices of each battle (0 .. num_models - 1).
      outcome: (K,) model a's share of the win in [0, 1]: 1 win, 0.5 tie, 0 loss (fractions allowed).
      weights: (K,) non-negative battle weights (default 1).
      anchor: model rated exactly 1000; default: the mean rating is 1000.
      regularization: L2 penalty on theta (0 = plain MLE, which needs every model to have both a
        win and a loss share against a connected opponent graph).
      bootstrap: number of replicates that resample the K battles (`_bootstrap_strengths`); the interval is
        the central `confidence` percentile range of the replicates' ratings, widened to hold the
        full-data rating (`solvers.bootstrap.intervals`). `seed` fixes them.
    """
    a, b, o, w, m = _battles(model_a, model_b, outcome, weights, num_models)
    if anchor is not None and not 0 <= anchor < m:
        raise ValueError(f"anchor={anchor} is not a model index in [0, {m})")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence}")
    if regularization < 0:
        raise ValueError("regularization must be >= 0")
    if regularization == 0.0:
        _check_identifiable(a, b, o, w, m)

    pair = a * m + b
    games = np.bincount(pair, weights=w, minlength=m * m).reshape(1, m, m)
    wins = np.bincount(pair, weights=w * o, minlength=m * m).reshape(1, m, m)
    theta, iterations = _fit(games, wins, regularization, tol, max_iter)
    theta = theta[0]
    ratings = _to_elo(theta[None], anchor)[0]

    samples = ci_lo = ci_hi = None
    if bootstrap > 0:
        reps = list(_bootstrap_strengths(pair, o, w, m, bootstrap, seed, regularization, tol, max_iter, anchor))
        samples = np.concatenate(reps)
        ci_lo, ci_hi = rating_interval(samples, ratings, confidence)
    return EloRatings(
        ratings=ratings,
        ci_lo=ci_lo,
        ci_hi=ci_hi,
        samples=samples,
        log_strengths=theta,
        num_battles=len(a),
        method="bradley_terry",
        iterations=iterations,
        confidence=confidence if bootstrap > 0 else 0.0,
    )


def _bootstrap_strengths(pair, o, w, m, bootstrap, seed, regularization, tol, max_iter, anchor):
    """Elo ratings (n, M) of the bootstrap replicates, in chunks. Where many battles share a (pair,
    outcome, weight) kind (battle logs: 2M battles of 200 models are some 60k kinds), the Poisson bootstrap
    draws each kind's count, Poisson(its number), in O(kinds) per replicate; otherwise (a tensor's soft
    outcomes, nearly one kind per battle) the K battles are drawn with replacement. Both resample the
    battles; they agree asymptotically."""
    rng = np.random.default_rng(seed)
    k = len(pair)
    o_values, o_code = np.unique(o, return_inverse=True)
    w_values, w_code = np.unique(w, return_inverse=True)
    key = (pair * len(o_values) + o_code.reshape(-1)) * len(w_values) + w_code.reshape(-1)
    kinds, count = np.unique(key, return_counts=True)
    if 4 * len(kinds) <= k:
        kind_pair, rest = np.divmod(kinds, len(o_values) * len(w_values))
        kind_o, kind_w = o_values[rest // len(w_values)], w_values[rest % len(w_values)]
        chunk = max(1, min(bootstrap, 4_000_000 // (m * m), 20_000_000 // len(kinds)))
    else:
        chunk = max(1, min(bootstrap, 4_000_000 // (m * m), 20_000_000 // max(k, 1)))
    for start in range(0, bootstrap, chunk):
        n = min(chunk, bootstrap - start)
        if 4 * len(kinds) <= k:
            drawn = rng.poisson(count.astype(np.float64), size=(n, len(count))) * kind_w[None, :]
            flat = (np.arange(n)[:, None] * (m * m) + kind_pair[None, :]).ravel()
            weight, outcome = drawn.ravel(), (drawn * kind_o[None, :]).ravel()
        else:
            idx = rng.integers(0, k, size=(n, k))
            flat = (np.arange(n)[:, None] * (m * m) + pair[idx]).ravel()
            weight, outcome = w[idx].ravel(), (w * o)[idx].ravel()
        g = np.bincount(flat, weights=weight, minlength=n * m * m).reshape(n, m, m)
        s = np.bincount(flat, weights=outcome, minlength=n * m * m).reshape(n, m, m)
        th, _ = _fit(g, s, max(regularization, 0.0), tol, max_iter, strict=False)
        yield _to_elo(th, anchor)


def online_elo(
    model_a,
    model_b,
    outcome,
    *,
    num_models: int | None = None,
    k_factor: float = 4.0,
    initial: float = ELO_ANCHOR,
) -> EloRatings:
    """Sequential Elo: for each battle in order, R_a += K (o - E_a), R_b += K (E_a - o),
    E_a = 1 / (1 + 10^((R_b - R_a) / 400)). Order-dependent (Chatbot Arena's online Elo, K = 4)."""
    a, b, o, _, m = _battles(model_a, model_b, outcome, None, num_models)
    r = np.full(m, float(initial))
    for i, j, s in zip(a.tolist(), b.tolist(), o.tolist()):
        expected = 1.0 / (1.0 + 10.0 ** ((r[j] - r[i]) / 400.0))
        r[i] += k_factor * (s - expected)
        r[j] -= k_factor * (s - expected)
    return EloRatings(ratings=r, num_battles=len(a), method="online_elo")


# ----------------------------------------------------------------------------------------------


def _battles(model_a, model_b, outcome, weights, num_models):
    a = np.asarray(model_a)
    b = np.asarray(model_b)
    o = np.asarray(outcome, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.shape != o.shape:
        raise ValueError(
            f"model_a, model_b and outcome must be 1-D of equal length; got {a.shape}, {b.shape}, {o.shape}"
        )
    if len(a) == 0:
        raise ValueError("no battles")
    for name, v in (("model_a", a), ("model_b", b)):
        if not np.issubdtype(v.dtype, np.integer):
            raise ValueError(f"{name}: expected integer model indices; got dtype {v.dtype}")
    a = a.astype(np.int64)
    b = b.astype(np.int64)
    m = int(max(a.max(), b.max()) + 1) if num_models is None else int(num_models)
    for name, v in (("model_a", a), ("model_b", b)):
        bad = np.flatnonzero((v < 0) | (v >= m))
        if len(bad):
            raise ValueError(f"{name}[{bad[0]}] = {v[bad[0]]} is not a model index in [0, {m})")
    same = np.flatnonzero(a == b)
    if len(same):
        raise ValueError(f"battle {same[0]}: a model cannot battle itself (model {a[same[0]]})")
    bad = np.flatnonzero(~np.isfinite(o) | (o < 0) | (o > 1))
    if len(bad):
        raise ValueError(f"outcome[{bad[0]}] = {o[bad[0]]} is not in [0, 1]")
    if weights is None:
        w = np.ones(len(a))
    else:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != a.shape:
            raise ValueError(f"weights: expected shape {a.shape}; got {w.shape}")
        bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
        if len(bad):
            raise ValueError(f"weights[{bad[0]}] = {w[bad[0]]} must be finite and >= 0")
    return a, b, o, w, m


def _check_identifiable(a, b, o, w, m) -> None:
    """Plain MLE exists iff the directed 'beats with positive weight' graph is strongly connected."""
    import scipy.sparse
    import scipy.sparse.csgraph

    pair = a * m + b  # battles summed per ordered pair first: an M x M graph, not one edge per battle
    a_wins = np.bincount(pair, weights=w * o, minlength=m * m).reshape(m, m) > 0
    b_wins = np.bincount(pair, weights=w * (1 - o), minlength=m * m).reshape(m, m) > 0
    graph = scipy.sparse.csr_matrix(a_wins | b_wins.T)  # edge winner -> loser
    count, labels = scipy.sparse.csgraph.connected_components(graph, directed=True, connection="strong")
    if count > 1:
        sizes = np.bincount(labels)
        lonely = np.flatnonzero(labels != np.argmax(sizes))
        raise ValueError(
            "Bradley-Terry MLE does not exist: models "
            f"{lonely.tolist()[:10]} are not linked to the rest by both wins and losses "
            "(a model that never loses, never wins or never plays); pass regularization > 0"
        )


_SOLVE_RIDGE = 1e-12


def _fit(games, wins, regularization, tol, max_iter, strict=True):
    """Newton's method on the concave BT log-likelihood for a batch of (B, M, M) pair tables.

    games[b, i, j]: total weight of battles with i as model a and j as model b; wins[b, i, j]: their
    total outcome for i. Returns theta (B, M) with mean 0, and the steps taken.
    """
    n, m, _ = games.shape
    g = games + np.swapaxes(games, 1, 2)  # battles between i and j, either side
    s = wins + np.swapaxes(games - wins, 1, 2)  # i's wins over j
    theta = np.zeros((n, m))
    ones = np.ones(m) / np.sqrt(m)
    projector = np.eye(m) - np.outer(ones, ones)  # keeps sum(theta) = 0 (the free direction)
    steps = 0
    for _ in range(max_iter):
        steps += 1
        d = theta[:, :, None] - theta[:, None, :]
        p = 1.0 / (1.0 + np.exp(-d))
        grad = np.sum(s - g * p, axis=2) - regularization * theta
        c = g * p * (1.0 - p)
        hess = c - np.eye(m)[None] * np.sum(c, axis=2)[:, :, None] - regularization * np.eye(m)[None]
        # Newton step in the sum-zero subspace: solve (-H + 11^T/m) delta = P grad. The tiny ridge
        # keeps the system regular when a model has no battle (a bootstrap replicate of sparse data).
        system = -hess + np.outer(ones, ones)[None] + _SOLVE_RIDGE * np.eye(m)[None]
        delta = np.linalg.solve(system, (grad @ projector)[:, :, None])[:, :, 0]
        delta = delta @ projector
        # Bounded Newton steps: the likelihood is concave, the bound only guards far-off starts.
        size = np.max(np.abs(delta), axis=1, keepdims=True)
        delta = delta * np.minimum(1.0, _MAX_STEP / np.maximum(size, 1e-300))
        theta = theta + delta
        if np.max(np.abs(delta)) < tol:
            break
    else:
        if strict:
            raise ValueError("Bradley-Terry fit did not converge; pass regularization > 0")
    return theta, steps


def _to_elo(theta: np.ndarray, anchor: int | None) -> np.ndarray:
    centre = theta[:, anchor][:, None] if anchor is not None else theta.mean(axis=1, keepdims=True)
    return ELO_ANCHOR + ELO_SCALE * (theta - centre)


# ------------------------------------------------------ Bradley-Terry as a rating method (eqarena.methods)


def tensor_battles(u_king) -> dict[str, np.ndarray]:
    """Battles of a tensor u_king (P, M, M): one per prompt and pair i < j with model i's score
    u_king[p, i, j], so every copy of a prompt adds battles (paper Section 4.2)."""
    u = np.asarray(u_king, dtype=np.float64)
    p, m = u.shape[0], u.shape[1]
    i, j = np.triu_indices(m, k=1)
    return {
        "prompt": np.repeat(np.arange(p), len(i)),
        "model_a": np.tile(i, p),
        "model_b": np.tile(j, p),
        "score": np.clip(u[:, i, j].reshape(-1), -1.0, 1.0),
    }


def fit_bradley_terry(u_king, battles: Battles | None, bootstrap: int = 0, seed: int = 0) -> ModelFit:
    """Bradley-Terry Elo (mean 1000) on `battles` (a score s counts as (1 + s) / 2 of a win), or on the
    tensor's battles without them, with bootstrap intervals that hold the ratings. When the plain maximum-likelihood
    fit does not exist (a model never loses or never wins), a small L2 penalty
    (FALLBACK_REGULARIZATION) keeps it finite; the diagnostics record which was used."""
    u = np.asarray(u_king, dtype=np.float64)
    data = tensor_battles(u) if battles is None else battles
    args = (np.asarray(data["model_a"]), np.asarray(data["model_b"]), score_to_outcome(data["score"]))
    # Without the judgments, the tensor's battles are one per prompt and pair: its prompts are resampled.
    by_prompts = battles is None and bootstrap > 0
    options = dict(num_models=u.shape[1], bootstrap=0 if by_prompts else bootstrap, seed=seed)
    regularization = 0.0
    try:
        elo = bradley_terry(*args, **options)
    except ValueError as exc:
        if "does not exist" not in str(exc):
            raise
        regularization = FALLBACK_REGULARIZATION
        elo = bradley_terry(*args, regularization=regularization, **options)
    ci_lo, ci_hi = elo.ci_lo, elo.ci_hi
    if by_prompts:
        samples = prompt_bootstrap(u, bootstrap, seed, regularization)
        ci_lo, ci_hi = rating_interval(samples, elo.ratings, 0.95)
    diagnostics = {
        "battles": int(elo.num_battles),
        "iterations": int(elo.iterations),
        "regularization": regularization,
        "bootstrap": bootstrap,
        "confidence": 0.95 if by_prompts else float(elo.confidence),
        "resampled": "prompts" if by_prompts else "battles",
    }
    return ModelFit(
        np.asarray(elo.ratings),
        None if ci_lo is None else np.asarray(ci_lo),
        None if ci_hi is None else np.asarray(ci_hi),
        diagnostics,
    )


def prompt_bootstrap(u_king, bootstrap: int, seed: int = 0, regularization: float = 0.0) -> np.ndarray:
    """Elo ratings (B, M) of the tensor's battles (`tensor_battles`) with its P prompts drawn with
    replacement, B times: a replicate's pair tables are the drawn prompts' tables summed, one (B, P) x
    (P, M M) product per chunk, not a resampling of P M (M - 1) / 2 battles (at 805 x 200: 16M)."""
    u = np.asarray(u_king, dtype=np.float64)
    p, m = u.shape[0], u.shape[1]
    i, j = np.triu_indices(m, k=1)
    wins = np.zeros((p, m * m))
    wins[:, i * m + j] = score_to_outcome(np.clip(u[:, i, j], -1.0, 1.0))
    pattern = np.zeros(m * m)
    pattern[i * m + j] = 1.0
    rng = np.random.default_rng(seed)
    chunk = max(1, min(bootstrap, 4_000_000 // (m * m)))
    out = []
    for start in range(0, bootstrap, chunk):
        n = min(chunk, bootstrap - start)
        counts = np.stack([np.bincount(rng.integers(0, p, p), minlength=p) for _ in range(n)]).astype(np.float64)
        games = (counts.sum(axis=1)[:, None] * pattern[None, :]).reshape(n, m, m)
        theta, _ = _fit(games, (counts @ wins).reshape(n, m, m), regularization, 1e-10, 100, strict=False)
        out.append(_to_elo(theta, None))
    return np.concatenate(out)
