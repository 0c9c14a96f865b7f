"""Observation models: the model output ``f (C,)`` mapped to the observation mean ``m(f)`` and covariance
``R(f)`` used by every moment-matched (Gaussian-linearised) filter.

``Gaussian(obs_noise)``   ``m = f``,          ``R = obs_noise · I``  (``obs_noise`` is a *variance*).
``Bernoulli(jitter)``     ``m = σ(f)``,       ``R = diag(m(1 − m)) + jitter · I``.
``Categorical(jitter)``   ``m = softmax(f)``, ``R = diag(m) − m mᵀ + jitter · I``.

The multinomial covariance ``diag(m) − m mᵀ`` is singular (its rows sum to zero) and vanishes for
near-certain predictions; the documented ``jitter`` (seed 003 uses ``ε = 10⁻⁴``) keeps ``R ≻ 0`` so the
innovation covariance ``S = J Σ Jᵀ + R`` always has a Cholesky factor.  Observations ``y`` are ``(C,)``:
a one-hot vector for ``Categorical``, 0/1 per output for ``Bernoulli``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


def _times_eye(v, f: Array) -> Array:
    """``v · I`` of the size ``C`` of ``f (C,)``, in ``f``'s dtype (``v`` a scalar, possibly traced)."""
    return jnp.asarray(v, f.dtype) * jnp.eye(f.shape[-1], dtype=f.dtype)


class _GaussianFields(NamedTuple):
    obs_noise: float = 1.0
    name: str = "gaussian"


class Gaussian(_GaussianFields):
    """``y ~ N(f, obs_noise · I)``; ``obs_noise`` is the observation-noise variance (must be finite and > 0).

    A zero variance would make every filter's innovation covariance singular for a model whose Jacobian
    vanishes along some direction (e.g. a repeated input), so it is refused here, once, for every backend.
    """

    __slots__ = ()

    def __new__(cls, obs_noise: float = 1.0, name: str = "gaussian"):
        if not isinstance(obs_noise, jax.core.Tracer):
            try:
                v = np.asarray(obs_noise, dtype=float)
                ok = bool(np.all(np.isfinite(v))) and bool(np.all(v > 0))
            except (TypeError, ValueError) as e:
                raise TypeError(f"Gaussian: obs_noise must be a positive float (a variance), got {obs_noise!r}") from e
            if not ok:
                raise ValueError(
                    f"Gaussian: obs_noise={obs_noise!r} must be a finite variance > 0; use a small positive value "
                    "(e.g. 1e-4) for nearly noise-free observations"
                )
        return super().__new__(cls, obs_noise, name)

    def mean(self, f: Array) -> Array:
        return f

    def cov(self, f: Array) -> Array:
        return _times_eye(self.obs_noise, f)

    def log_prob(self, y: Array, f: Array) -> Array:
        """``log N(y | f, obs_noise I)``."""
        r = jnp.asarray(self.obs_noise, f.dtype)
        return -0.5 * jnp.sum((y - f) ** 2 / r + jnp.log(2 * jnp.pi * r))


class Bernoulli(NamedTuple):
    """Moment-matched Bernoulli: ``m = σ(f)``, ``R = diag(m(1−m)) + jitter · I``."""

    jitter: float = 1e-4
    name: str = "bernoulli"

    def mean(self, f: Array) -> Array:
        return jax.nn.sigmoid(f)

    def cov(self, f: Array) -> Array:
        m = jax.nn.sigmoid(f)
        return jnp.diag(m * (1 - m)) + _times_eye(self.jitter, f)

    def log_prob(self, y: Array, f: Array) -> Array:
        """Exact Bernoulli log-likelihood of ``y ∈ {0, 1}^C`` under logits ``f``."""
        return jnp.sum(y * jax.nn.log_sigmoid(f) + (1 - y) * jax.nn.log_sigmoid(-f))


class Categorical(NamedTuple):
    """Moment-matched categorical: ``m = softmax(f)``, ``R = diag(m) − m mᵀ + jitter · I``."""

    jitter: float = 1e-4
    name: str = "categorical"

    def mean(self, f: Array) -> Array:
        return jax.nn.softmax(f)

    def cov(self, f: Array) -> Array:
        m = jax.nn.softmax(f)
        r = jnp.diag(m) - jnp.outer(m, m)
        return 0.5 * (r + r.T) + _times_eye(self.jitter, f)

    def log_prob(self, y: Array, f: Array) -> Array:
        """Exact categorical log-likelihood of a one-hot ``y`` under logits ``f``."""
        return jnp.sum(y * jax.nn.log_softmax(f))


Likelihood = Gaussian | Bernoulli | Categorical
