"""Closed-form acquisition scores for MAXIMISATION, elementwise on arrays of predictive moments.

With ``d = μ − best − ξ`` and ``z = d / σ`` (``Φ``, ``φ``: standard normal cdf and pdf):

``expected_improvement_score``        ``EI = E[max(f − best − ξ, 0)] = d Φ(z) + σ φ(z)``; ``max(d, 0)`` at ``σ = 0``.
``probability_of_improvement_score``  ``PI = P(f > best + ξ) = Φ(z)``; the step ``1[d > 0]`` at ``σ = 0``.
``ucb_score``                         ``UCB = μ + β σ``.

``mean``, ``std`` (``σ ≥ 0``, a standard deviation, not a variance), ``best`` and ``xi`` broadcast against each
other.  All three are differentiable in ``(mean, std)`` wherever ``σ > 0`` (the ``σ = 0`` branch is guarded with
the double-``where`` trick, so gradients never see ``0/0``).  Note: EI keeps the ``σ φ(z)`` term (a public
reference implementation drops its ``σ`` factor, which is wrong whenever ``σ ≠ 1``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

Array = jax.Array

_INV_SQRT_2PI = 0.3989422804014327


def _float(a) -> Array:
    a = jnp.asarray(a)
    return a if jnp.issubdtype(a.dtype, jnp.floating) else a.astype(jnp.float32)


def _moments(mean, std, best, xi):
    mean = _float(mean)
    dtype = mean.dtype
    std = jnp.asarray(std, dtype)
    d = mean - jnp.asarray(best, dtype) - jnp.asarray(xi, dtype)
    positive = std > 0
    safe_std = jnp.where(positive, std, jnp.ones_like(std))
    z = d / safe_std
    return d, std, positive, safe_std, z


def expected_improvement_score(mean: Array, std: Array, best: Array | float, xi: Array | float = 0.0) -> Array:
    """Expected improvement over ``best + ξ`` of ``f ~ N(mean, std²)`` (maximisation).

    ``EI = d Φ(z) + σ φ(z)`` with ``d = μ − best − ξ``, ``z = d/σ``; exactly ``max(d, 0)`` where ``σ = 0``.
    Always ``≥ 0``.  Shapes broadcast; returns the broadcast shape.
    """
    d, std, positive, safe_std, z = _moments(mean, std, best, xi)
    pdf = _INV_SQRT_2PI * jnp.exp(-0.5 * z**2)
    ei = d * ndtr(z) + safe_std * pdf
    return jnp.where(positive, jnp.maximum(ei, 0.0), jnp.maximum(d, 0.0))


def probability_of_improvement_score(mean: Array, std: Array, best: Array | float, xi: Array | float = 0.0) -> Array:
    """Probability that ``f ~ N(mean, std²)`` exceeds ``best + ξ`` (maximisation).

    ``PI = Φ((μ − best − ξ)/σ)``; where ``σ = 0`` it is the step ``1[μ − best − ξ > 0]`` (no improvement is
    possible from a certain value equal to the incumbent).  Shapes broadcast.
    """
    d, std, positive, safe_std, z = _moments(mean, std, best, xi)
    return jnp.where(positive, ndtr(z), (d > 0).astype(z.dtype))


def ucb_score(mean: Array, std: Array, beta: Array | float) -> Array:
    """Upper confidence bound ``μ + β σ`` (``σ`` a standard deviation).  Shapes broadcast."""
    mean = _float(mean)
    return mean + jnp.asarray(beta, mean.dtype) * jnp.asarray(std, mean.dtype)


__all__ = ["expected_improvement_score", "probability_of_improvement_score", "ucb_score"]
