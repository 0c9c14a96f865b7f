"""Closed-form acquisition scores for MAXIMISATION, elementwise on arrays of predictive moments.

With ``d = μ − best − ξ`` and ``z = d / σ`` (``Φ``, ``φ``: standard normal cdf and pdf):

``expected_improvement_score``        ``EI = E[max(f − best − ξ, 0)] = d Φ(z) + σ φ(z)``; ``max(d, 0)`` at ``σ = 0``.
``probability_of_improvement_score``  ``PI = P(f > best + ξ) = Φ(z)``; the step ``1[d > 0]`` at ``σ = 0``.
``ucb_score``                         ``UCB = μ + β σ``.
``log_expected_improvement_score``    ``log EI = log σ + log h(z)``, ``h(z) = φ(z) + z Φ(z)`` (no underflow).
``log_probability_of_improvement_score``  ``log PI = log Φ(z)``.

Why the logs.  For ``z ≲ −6`` (float32) or ``z ≲ −38`` (float64) EI underflows to exactly 0 and its gradient with
it, so a gradient-based maximiser started away from the data sees a flat acquisition (Ament et al., NeurIPS 2023,
"Unexpected improvements to expected improvement").  ``log h`` is evaluated in three pieces, each accurate to a
few ulps of the log: ``z > −1`` directly; ``−c < z ≤ −1`` as ``log φ(z) + log(1 − |z| √(π/2) erfcx(|z|/√2))``
(``Φ(z) = φ(z) √(π/2) erfcx(−z/√2)``, relative cancellation error ``≈ eps · z²``); ``z ≤ −c`` by the asymptotic
series ``h(z) = φ(z) z⁻² (1 − 3 z⁻² + 15 z⁻⁴ − 105 z⁻⁶ + 945 z⁻⁸ − 10395 z⁻¹⁰ + O(z⁻¹²))``, with ``c = 30`` in
float64 (both errors < 10⁻¹²) and ``c = 10`` in float32 (< 2·10⁻⁶, the float32 resolution of the log).  The log
scores have the same maximiser as EI / PI; the BO maximiser uses them with L-BFGS-B.

``mean``, ``std`` (``σ ≥ 0``, a standard deviation, not a variance), ``best`` and ``xi`` broadcast against each
other.  All three are differentiable in ``(mean, std)`` wherever ``σ > 0`` (the ``σ = 0`` branch is guarded with
the double-``where`` trick, so gradients never see ``0/0``).  Note: EI keeps the ``σ φ(z)`` term (a public
reference implementation drops its ``σ`` factor, which is wrong whenever ``σ ≠ 1``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import erfcx, log_ndtr, ndtr

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


def _log_h(z: Array) -> Array:
    """``log(φ(z) + z Φ(z))`` for any finite ``z`` (see the module docstring for the three pieces)."""
    log_sqrt_2pi = 0.9189385332046727  # ½ log 2π
    # where the series takes over: its truncation error 135135 / z¹² against erfcx's cancellation error eps · z²
    cut = 30.0 if jnp.finfo(z.dtype).eps < 1e-10 else 10.0
    zd = jnp.where(z > -1.0, z, 0.0)  # each branch sees a safe input (double-where: no NaN gradients)
    direct = jnp.log(zd * ndtr(zd) + _INV_SQRT_2PI * jnp.exp(-0.5 * zd**2))
    a = jnp.where((z <= -1.0) & (z > -cut), -z, 2.0)
    mid = -0.5 * a**2 - log_sqrt_2pi + jnp.log1p(-a * 1.2533141373155003 * erfcx(a / 1.4142135623730951))
    t = jnp.where(z <= -cut, -z, 2.0 * cut)
    r = 1.0 / t**2
    series = r * (-3.0 + r * (15.0 + r * (-105.0 + r * (945.0 - 10395.0 * r))))
    tail = -0.5 * t**2 - log_sqrt_2pi - 2.0 * jnp.log(t) + jnp.log1p(series)
    return jnp.where(z > -1.0, direct, jnp.where(z > -cut, mid, tail))


def log_expected_improvement_score(mean: Array, std: Array, best: Array | float, xi: Array | float = 0.0) -> Array:
    """``log EI`` of :func:`expected_improvement_score`, finite for every ``σ > 0`` however deep ``z`` is.

    ``log EI = log σ + log h(z)``, ``h(z) = φ(z) + z Φ(z)``, ``z = (μ − best − ξ)/σ``; ``log max(d, 0)`` where
    ``σ = 0`` (``−inf`` when no improvement is possible).  Shapes broadcast.
    """
    d, std, positive, safe_std, z = _moments(mean, std, best, xi)
    z = jnp.where(positive, z, 0.0)
    safe_d = jnp.where(d > 0, d, 1.0)
    at_zero_std = jnp.where(d > 0, jnp.log(safe_d), -jnp.inf)
    return jnp.where(positive, jnp.log(safe_std) + _log_h(z), at_zero_std)


def log_probability_of_improvement_score(mean: Array, std: Array, best: Array | float,
                                         xi: Array | float = 0.0) -> Array:
    """``log PI = log Φ(z)`` (``jax.scipy.special.log_ndtr``); ``0`` or ``−inf`` where ``σ = 0``.  Shapes broadcast."""
    d, std, positive, safe_std, z = _moments(mean, std, best, xi)
    z = jnp.where(positive, z, 0.0)
    return jnp.where(positive, log_ndtr(z), jnp.where(d > 0, 0.0, -jnp.inf))


__all__ = [
    "expected_improvement_score",
    "log_expected_improvement_score",
    "log_probability_of_improvement_score",
    "probability_of_improvement_score",
    "ucb_score",
]
