"""The paper's NE solver: Adam on the annealed QRE loss (Section 3.2, eq. for L^tau; App. F).

L^tau(x) = sum_i u_i^tau(BR_i, x_-i) - u_i^tau(x_i, x_-i), u_i^tau(z, x_-i) = u_i(z, x_-i) - tau KL(z || t_i),
BR_i = softmax(grad_i / tau + log t_i), so u_i^tau(BR_i, x_-i) = tau logsumexp(grad_i / tau + log t_i).
x_i = softmax(theta_i), theta_i initialised at log t_i. Schedule (App. F): Adam with learning rate 1e-2;
every 250 updates, if L^tau <= 1e-5, tau <- max(0.95 tau, 1e-2); stop at an epsilon-NE (epsilon 1e-3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from eqarena.solvers.games.normal_form import KothGame, dense_action_values
from eqarena.solvers.nash.logit import koth_values


@dataclass(frozen=True)
class AnnealOptions:
    learning_rate: float = 1e-2
    initial_temperature: float = 1.0
    decay: float = 0.95
    steps_per_decay: int = 250
    loss_threshold: float = 1e-5
    min_temperature: float = 1e-2
    epsilon: float = 1e-3
    max_steps: int = 500_000
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8


def _values(game_arrays, xs, kind: str):
    if kind == "koth":
        u, a = game_arrays
        return koth_values(u, a, xs[0], xs[1], xs[2])
    return tuple(dense_action_values(game_arrays[0], xs))


def _loss(thetas, tau, game_arrays, log_t, kind):
    xs = [jax.nn.softmax(th) for th in thetas]
    values = _values(game_arrays, xs, kind)
    total = 0.0
    for x, v, lt in zip(xs, values, log_t):
        br_value = tau * jax.nn.logsumexp(v / tau + lt)
        kl = jnp.sum(x * (jnp.log(jnp.maximum(x, 1e-300)) - lt))
        total = total + br_value - (jnp.dot(x, v) - tau * kl)
    return total


@partial(jax.jit, static_argnames=("kind", "steps", "options"))
def _adam_block(state, tau, game_arrays, log_t, kind, steps, options):
    grad_fn = jax.grad(_loss)

    def body(carry, _):
        thetas, m, v, count = carry
        g = grad_fn(thetas, tau, game_arrays, log_t, kind)
        count = count + 1
        m = [options.beta1 * mi + (1 - options.beta1) * gi for mi, gi in zip(m, g)]
        v = [options.beta2 * vi + (1 - options.beta2) * gi * gi for vi, gi in zip(v, g)]
        c1 = 1 - options.beta1**count
        c2 = 1 - options.beta2**count
        thetas = [
            th - options.learning_rate * (mi / c1) / (jnp.sqrt(vi / c2) + options.adam_eps)
            for th, mi, vi in zip(thetas, m, v)
        ]
        return (thetas, m, v, count), None

    state, _ = jax.lax.scan(body, state, None, length=steps)
    thetas = state[0]
    loss = _loss(thetas, tau, game_arrays, log_t, kind)
    xs = [jax.nn.softmax(th) for th in thetas]
    values = _values(game_arrays, xs, kind)
    expl = sum(jnp.max(v) - jnp.dot(x, v) for x, v in zip(xs, values))
    return state, loss, expl


def anneal(game, targets: Sequence[np.ndarray], options: AnnealOptions) -> tuple[list[np.ndarray], dict]:
    """Runs the annealing schedule; returns (marginals, diagnostics)."""
    log_t = [jnp.log(jnp.asarray(t)) for t in targets]
    if isinstance(game, KothGame):
        u = np.asarray(game.u_king)
        arrays = (jnp.asarray(u), jnp.abs(jnp.asarray(u)))
        kind = "koth"
    else:
        arrays = (jnp.asarray(game.payoffs),)
        kind = "dense"
    thetas = [lt for lt in log_t]
    zeros = [jnp.zeros_like(lt) for lt in log_t]
    state = (thetas, zeros, zeros, jnp.asarray(0, dtype=jnp.int64))
    tau = options.initial_temperature
    steps = 0
    loss = expl = float("nan")
    stop = "max_steps"
    while steps < options.max_steps:
        state, loss_j, expl_j = _adam_block(
            state, jnp.asarray(tau), arrays, log_t, kind, options.steps_per_decay, options
        )
        steps += options.steps_per_decay
        loss, expl = float(loss_j), float(expl_j)
        if not np.isfinite(loss):
            stop = "non_finite"
            break
        if expl <= options.epsilon:
            stop = "epsilon_ne"
            break
        if loss <= options.loss_threshold:
            tau = max(tau * options.decay, options.min_temperature)
    xs = [np.asarray(jax.nn.softmax(th)) for th in state[0]]
    return xs, {"stop_reason": stop, "steps": steps, "temperature": tau, "qre_loss": loss, "epsilon": expl}
