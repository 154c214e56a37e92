"""How much of each rating rests on imputed payoffs (`rate --missing impute`).

A rating is a deviation gain u_i(a_i, x_-i) - u_i(x) (paper eq. 1); its first term averages player i's
payoff over the other players' actions under the equilibrium. The imputed share of action a_i is the
weight that average puts on imputed cells: sum_{a_-i} x_-i(a_-i) [cell (a_i, a_-i) imputed], in [0, 1].
"""

from __future__ import annotations

import numpy as np

Shares = tuple[np.ndarray, np.ndarray, np.ndarray]  # prompt (P,), king (M,), rebel (M,)


def imputed_shares(imputed: np.ndarray, marginals: tuple[np.ndarray, ...], joint: np.ndarray | None = None) -> Shares:
    """Imputed shares of every prompt, king and rebel action of a king-of-the-hill equilibrium.

    imputed: (P, M, M) bool, True where u_king(p, i, j) was imputed (symmetric in i, j).
    marginals: (x_prompt (P,), x_king (M,), x_rebel (M,)) of an NE, used when `joint` is None;
    joint: the CCE's (P, M, M) distribution, whose marginals over the other two players weight each
    player's deviations.
    """
    w = np.asarray(imputed, dtype=np.float64)
    if joint is None:
        prompt, king, rebel = (np.asarray(m, dtype=np.float64) for m in marginals)
        return (
            np.einsum("pij,i,j->p", w, king, rebel),
            np.einsum("pij,p,j->i", w, prompt, rebel),
            np.einsum("pij,p,i->j", w, prompt, king),
        )
    x = np.asarray(joint, dtype=np.float64)
    return (
        np.einsum("pij,ij->p", w, x.sum(axis=0)),
        np.einsum("pij,pj->i", w, x.sum(axis=1)),
        np.einsum("pij,pi->j", w, x.sum(axis=2)),
    )
