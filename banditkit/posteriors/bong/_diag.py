"""BONG's ``"diag"`` family: ``q = N(μ, diag(υ)⁻¹)``; every rule acts on ``d = diag(G)`` elementwise.

- bong: ``υ_t = υ − d``, ``μ_t = μ + g / υ_t``  (with linear-hessian: the variational diagonal EKF, VD-EKF).
- blr:  ``υ_i = (1−α)υ + αυ_p − αd``, ``μ_i = μ + α(υ_p(μ_p − μ) + g) / υ_i``.
- bbb:  ``a = g + υ_p(μ_p − μ)``, ``∇_{ψ2} = 2 υ⁻¹ a μ + υ⁻²(d − υ_p + υ)``, ``υ_i = υ − 2α∇_{ψ2}``,
  ``μ_i = (υμ + α υ⁻¹ a) / υ_i``.
  ``blr`` and ``bbb`` floor ``υ_i`` at ``min_precision`` (a gradient step can make it indefinite).
- predict: ``υ ← 1 / (γ²/υ + q)``;  sample: ``μ + z / √υ``.

The precision stays positive under bong / blr with a linearised or EF ``G`` (``d ≤ 0``), but that does not bound the
mean step: in the linearised model bong moves the prediction at the observed input by
``κ = Σ_j H_j² / (R υ_j + H_j²)`` times the residual (blr: ``α Σ_j H_j² / (R υ_j + α H_j²)``), which ignores the
correlations between parameters and grows towards ``P`` when ``H_j² ≫ R υ_j``; for ``κ > 2`` the residual grows step
after step (not finite within a few steps).  :func:`banditkit.posteriors.bong.check_step` measures it; a smaller
``init_cov`` (``≈ R / ‖H‖²``) or the DLR family keeps it below 1.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.posteriors.base import ParamSpace
from banditkit.posteriors.bong._core import Est, Family

Array = jax.Array


class BongDiagState(NamedTuple):
    mean: Array  # (P,)
    prec: Array  # (P,) diagonal precision υ
    key: Array  # PRNG key for MC estimators
    space: ParamSpace  # the parameter layout (static: no leaves)


def _diag_g(est: Est) -> Array:
    if est.diag is not None:
        return est.diag
    if est.dense is not None:
        return jnp.diag(est.dense)
    return -jnp.sum(est.factor**2, axis=0)


def _natural(prior: BongDiagState, st: BongDiagState, est: Est, a: float, floor: float | None) -> BongDiagState:
    prec_i = (1 - a) * st.prec + a * prior.prec - a * _diag_g(est)
    if floor is not None:
        prec_i = jnp.maximum(prec_i, floor)
    mu_i = st.mean + a * (prior.prec * (prior.mean - st.mean) + est.g) / prec_i
    return st._replace(mean=mu_i, prec=prec_i)


def diag_family(init_cov: float, alpha: float, min_precision: float) -> Family:
    """The diagonal-precision family with step size ``α`` for ``blr`` / ``bbb``."""

    def init(mu: Array, key: Array, space: ParamSpace) -> BongDiagState:
        return BongDiagState(mu, jnp.full(mu.shape, 1.0 / jnp.asarray(init_cov, mu.dtype), mu.dtype), key, space)

    def predict(st: BongDiagState, g: Array, q: Array) -> BongDiagState:
        return st._replace(mean=g * st.mean, prec=1.0 / (g**2 / st.prec + q))

    def quad(st: BongDiagState, h: Array) -> Array:
        return (h / st.prec[None, :]) @ h.T

    def sample(key: Array, st: BongDiagState) -> Array:
        return st.mean + rng.normal(key, st.mean.shape, st.mean.dtype) / jnp.sqrt(st.prec)

    def bong(st: BongDiagState, est: Est) -> BongDiagState:
        return _natural(st, st, est, 1.0, None)

    def blr(prior: BongDiagState, st: BongDiagState, est: Est) -> BongDiagState:
        return _natural(prior, st, est, alpha, min_precision)

    def bbb(prior: BongDiagState, st: BongDiagState, est: Est) -> BongDiagState:
        d = _diag_g(est)
        var = 1.0 / st.prec
        a = est.g + prior.prec * (prior.mean - st.mean)
        grad_psi2 = 2.0 * var * a * st.mean + var**2 * (d - prior.prec + st.prec)
        prec_i = jnp.maximum(st.prec - 2.0 * alpha * grad_psi2, min_precision)
        return st._replace(mean=(st.prec * st.mean + alpha * var * a) / prec_i, prec=prec_i)

    return Family(init, predict, quad, sample, bong, blr, bbb, hessian="diag")
