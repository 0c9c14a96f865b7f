"""BONG's ``"full"`` family: ``q = N(μ, Σ)`` with a dense ``Σ (P, P)`` — O(P²) memory, small models only.

- bong: with a factor ``G = −BᵀB`` (Woodbury) ``Σ_t = Σ − ΣBᵀ(I + BΣBᵀ)⁻¹BΣ`` (with linear-hessian: the EKF);
  with a dense ``G``: ``Σ_t = (Σ⁻¹ − G)⁻¹``.  ``μ_t = μ + Σ_t g``.
- blr:  ``Ω_i = (1−α)Ω + αΩ_p − αG``, ``μ_i = μ + αΣ_i(Ω_p(μ_p − μ) + g)``.
- bbb:  ``a = g + Ω_p(μ_p − μ)``, ``B = ½(G − Ω_p + Ω)``, ``∇_{ψ2} = 2 sym(Σ a μᵀ) + 2ΣBΣ``;
  ``Ω_i = Ω − 2α∇_{ψ2}``, ``μ_i = Σ_i(Ωμ + αΣa)``.  The precisions are symmetrised only.
- predict: ``Σ ← γ²Σ + qI``;  sample: ``μ + L z``, ``L Lᵀ = Σ`` (:func:`linalg.sample_factor`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ParamSpace
from banditkit.posteriors.bong._core import Est, Family

Array = jax.Array


class BongFullState(NamedTuple):
    mean: Array  # (P,)
    cov: Array  # (P, P)
    key: Array  # PRNG key for MC estimators
    space: ParamSpace  # the parameter layout (static: no leaves)


class _Prior(NamedTuple):
    mean: Array  # (P,) μ_p
    prec: Array  # (P, P) Ω_p = Σ_p⁻¹


def _dense_g(est: Est) -> Array:
    return est.dense if est.dense is not None else -est.factor.T @ est.factor


def full_family(init_cov: float, alpha: float) -> Family:
    """The dense-covariance family with step size ``α`` for ``blr`` / ``bbb``."""

    def init(mu: Array, key: Array, space: ParamSpace) -> BongFullState:
        return BongFullState(mu, jnp.asarray(init_cov, mu.dtype) * jnp.eye(mu.size, dtype=mu.dtype), key, space)

    def predict(st: BongFullState, g: Array, q: Array) -> BongFullState:
        return st._replace(mean=g * st.mean, cov=g**2 * st.cov + q * jnp.eye(st.mean.size, dtype=st.mean.dtype))

    def quad(st: BongFullState, h: Array) -> Array:
        return h @ st.cov @ h.T

    def sample(key: Array, st: BongFullState) -> Array:
        z = rng.normal(key, st.mean.shape, st.mean.dtype)
        return st.mean + linalg.sample_factor(st.cov) @ z

    def bong(st: BongFullState, est: Est) -> BongFullState:
        mu, sigma = st.mean, st.cov
        if est.factor is not None:  # Woodbury with G = −BᵀB: Σ_t = Σ − ΣBᵀ(I + BΣBᵀ)⁻¹BΣ
            b = est.factor
            bs = b @ sigma  # (K, P)
            core = jnp.eye(b.shape[0], dtype=mu.dtype) + bs @ b.T
            u = linalg.chol_upper(linalg.symmetrize(core))
            sigma_t = linalg.symmetrize(sigma - bs.T @ linalg.solve_spd_factor(u, bs))
        else:
            sigma_t = linalg.spd_inverse(linalg.spd_inverse(sigma) - est.dense)
        return st._replace(mean=mu + sigma_t @ est.g, cov=sigma_t)

    def anchor(prior: BongFullState) -> _Prior:
        return _Prior(prior.mean, linalg.spd_inverse(prior.cov))

    def blr(prior: _Prior, st: BongFullState, est: Est) -> BongFullState:
        prec = linalg.spd_inverse(st.cov)
        prec_i = linalg.symmetrize((1 - alpha) * prec + alpha * prior.prec - alpha * _dense_g(est))
        sigma_i = linalg.spd_inverse(prec_i)
        mu_i = st.mean + alpha * sigma_i @ (prior.prec @ (prior.mean - st.mean) + est.g)
        return st._replace(mean=mu_i, cov=sigma_i)

    def bbb(prior: _Prior, st: BongFullState, est: Est) -> BongFullState:
        mu, sigma = st.mean, st.cov
        prec = linalg.spd_inverse(sigma)
        a = est.g + prior.prec @ (prior.mean - mu)  # ∇_μ (E log p − KL)
        bmat = 0.5 * (_dense_g(est) - prior.prec + prec)  # ∇_Σ (E log p − KL)
        sa = sigma @ a
        grad_psi2 = linalg.symmetrize(2.0 * jnp.outer(sa, mu)) + 2.0 * sigma @ bmat @ sigma
        sigma_i = linalg.spd_inverse(linalg.symmetrize(prec - 2.0 * alpha * grad_psi2))
        return st._replace(mean=sigma_i @ (prec @ mu + alpha * sa), cov=sigma_i)

    return Family(init, predict, quad, sample, bong, blr, bbb, anchor=anchor, hessian="dense")
