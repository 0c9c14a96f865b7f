"""Maximising an acquisition over the unit cube: a Sobol candidate set refined by projected gradient ascent.

Given a differentiable score ``a(x)`` on ``[0, 1]^d`` (a Thompson-sampled function, or EI / PI / UCB of the
surrogate's predictive moments):

1. score every candidate ``x_c`` of a fixed scrambled-Sobol set ``X_c (N, d)`` (in chunks, so memory stays
   ``O(chunk · P)`` even when the score needs a Jacobian per point);
2. take the ``k`` best candidates as starts and run ``T`` steps of projected, normalised gradient ascent
   ``x ← clip(x + η_t ∇a(x) / (‖∇a(x)‖ + ε), 0, 1)`` with a linearly decaying step ``η_t``;
3. return the best point seen over all starts and steps (never worse than the best candidate).

Everything here is a pure function; :func:`make_maximizer` returns one jitted function per score family so
that repeated asks reuse the compiled code.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array


def sobol_points(n: int, dim: int, seed: int, skip: int = 0):
    """``n`` scrambled Sobol points in ``[0, 1)^dim`` (numpy float64, shape ``(n, dim)``), after skipping ``skip``.

    The same ``(seed, skip)`` always gives the same points, which is what lets a saved optimiser resume its
    initial design exactly.
    """
    import warnings

    from scipy.stats import qmc

    sampler = qmc.Sobol(dim, scramble=True, seed=seed)
    if skip:
        sampler.fast_forward(skip)
    with warnings.catch_warnings():  # "balance properties" warning for n not a power of two: harmless here
        warnings.simplefilter("ignore", UserWarning)
        return sampler.random(n)


def refine(score: Callable[[Array], Array], starts: Array, steps: int, step_size: float) -> tuple[Array, Array]:
    """Projected normalised gradient ascent of ``score`` from each row of ``starts (k, d)``.

    Returns ``(x_best (d,), a_best ())``: the best point visited over all starts and steps (starts included).
    """
    grad = jax.grad(score)

    def one_start(x0):
        def body(t, carry):
            x, best_x, best_a = carry
            g = grad(x)
            g = jnp.where(jnp.isfinite(g), g, 0.0)
            eta = step_size * (1.0 - t / steps)
            x = jnp.clip(x + eta * g / (jnp.linalg.norm(g) + 1e-12), 0.0, 1.0)
            a = score(x)
            better = jnp.isfinite(a) & (a > best_a)
            return x, jnp.where(better, x, best_x), jnp.where(better, a, best_a)

        a0 = score(x0)
        _, bx, ba = jax.lax.fori_loop(0, steps, body, (x0, x0, a0))
        return bx, ba

    xs, scores = jax.vmap(one_start)(starts)
    i = jnp.argmax(scores)
    return xs[i], scores[i]


def maximize(
    score: Callable[[Array], Array],
    candidates: Array,
    *,
    n_starts: int = 4,
    steps: int = 10,
    step_size: float = 0.05,
    chunk: int = 256,
) -> tuple[Array, Array, Array]:
    """Maximise ``score`` over ``[0, 1]^d``: best of ``candidates (N, d)``, refined by :func:`refine`.

    Returns ``(x (d,), a (), order (N,))`` where ``order`` ranks the candidates by score (best first), used as
    a fallback when a batch needs distinct points.
    """
    vals = jax.lax.map(score, candidates, batch_size=min(chunk, candidates.shape[0]))
    vals = jnp.where(jnp.isfinite(vals), vals, -jnp.inf)
    order = jnp.argsort(-vals)
    starts = candidates[order[:n_starts]]
    if steps > 0:
        x, a = refine(score, starts, steps, step_size)
    else:
        x, a = starts[0], vals[order[0]]
    return x, a, order
