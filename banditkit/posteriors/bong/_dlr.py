"""BONG's ``"dlr"`` family: precision ``Λ = diag(υ) + WᵀW`` with ``W (R, P)`` kept as rows (``low_rank``).

Every covariance operation is a kernel of :mod:`banditkit.posteriors.dlr` (shared with LoFi), applied to the tall
factor ``Wᵀ (P, R)``; nothing ``P × P`` is formed.

- bong: the full-covariance natural step with ``G = −BᵀB``, precision ``Λ + BᵀB``, then the best rank-``R`` factor
  and the dropped diagonal into ``υ`` (seed 004 (278–308); :func:`dlr.update` with ``J = A = Bᵀ``, ``R = I``, the
  mean in gain form ``μ + ΣBᵀ(I + BΣBᵀ)⁻¹c`` with ``g = Bᵀc``, which stays finite under a huge ``B``).
  With linear-hessian this is LoFi.
- blr:  ``υ̃ = (1−α)υ + αυ_p``, ``N = [√(1−α)W; √αW_p; √αB]``;  ``μ ← μ + α(υ̃ + NᵀN)⁻¹(Λ_p(μ_p − μ) + g)``
  (Woodbury, :func:`dlr.solve`) with the un-truncated precision, then ``(υ, W) ← truncate(υ̃, N, R)``.
- bbb:  plain gradient steps on ``(μ, υ, W)`` (309–328) with ``D = Λ_p − Λ − G = diag(δ) + Σ_k s_k Z_kᵀZ_k``
  (``δ = υ_p − υ``; ``Z, s``: ``(W_p, +1)``, ``(W, −1)``, ``(B, +1)``; the KL part vanishes for BOG at ``ψ_p``):
  ``μ ← μ + α a``, ``υ ← υ + (α/2) diag(ΣDΣ)``, ``W ← W + α WΣDΣ``; ``υ`` floored at ``min_precision``.
- predict: the exact DLR form of ``γ²Σ + qI`` (:func:`dlr.predict`);  sample: ``μ + Υ^{-1/2} F ε``
  (:func:`dlr.sample`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.posteriors import dlr, linalg
from banditkit.posteriors.base import ParamSpace
from banditkit.posteriors.bong._core import Est, Family

Array = jax.Array


class BongDLRState(NamedTuple):
    mean: Array  # (P,)
    prec_diag: Array  # (P,) υ
    low_rank: Array  # (R, P) W: precision = diag(υ) + WᵀW
    key: Array  # PRNG key for MC estimators
    space: ParamSpace  # the parameter layout (static: no leaves)


def _root(st: BongDLRState) -> dlr.Root:
    return dlr.cov_root(st.prec_diag, st.low_rank.T)


def _prior_term(prior: BongDLRState, mu: Array) -> Array:
    """``Λ_p (μ_p − μ)``."""
    wp, dmu = prior.low_rank.T, prior.mean - mu
    return prior.prec_diag * dmu + wp @ linalg.tall_t_matmul(wp, dmu)


def dlr_family(init_cov: float, rank: int, alpha: float, min_precision: float) -> Family:
    """The diagonal-plus-rank-``rank`` precision family with step size ``α`` for ``blr`` / ``bbb``."""

    def init(mu: Array, key: Array, space: ParamSpace) -> BongDLRState:
        ups = jnp.full(mu.shape, 1.0 / jnp.asarray(init_cov, mu.dtype), mu.dtype)
        return BongDLRState(mu, ups, jnp.zeros((rank, mu.size), mu.dtype), key, space)

    def predict(st: BongDLRState, g: Array, q: Array) -> BongDLRState:
        ups, w = dlr.predict(st.prec_diag, st.low_rank.T, g, q)
        return st._replace(mean=g * st.mean, prec_diag=ups, low_rank=w.T)

    def quad(st: BongDLRState, h: Array) -> Array:
        return dlr.quad(_root(st), h)

    def sample(key: Array, st: BongDLRState) -> Array:
        return st.mean + dlr.sample(_root(st), rng.normal(key, st.mean.shape, st.mean.dtype))

    def bong(st: BongDLRState, est: Est) -> BongDLRState:
        cols = est.factor.T  # Bᵀ (P, K): the precision BᵀB the observation adds
        eye = jnp.eye(cols.shape[1], dtype=cols.dtype)
        mu, ups, w = dlr.update(st.mean, st.prec_diag, st.low_rank.T, _root(st), est.factor, cols, eye, est.coef, rank)
        return st._replace(mean=mu, prec_diag=ups, low_rank=w.T)

    def blr(prior: BongDLRState, st: BongDLRState, est: Est) -> BongDLRState:
        ups_t = (1 - alpha) * st.prec_diag + alpha * prior.prec_diag
        kept = [jnp.sqrt(1 - alpha) * st.low_rank] if alpha < 1 else []
        n = jnp.concatenate(kept + [jnp.sqrt(alpha) * prior.low_rank, jnp.sqrt(alpha) * est.factor], axis=0).T
        mu = st.mean + alpha * dlr.solve(ups_t, n, _prior_term(prior, st.mean) + est.g)
        ups, w = dlr.truncate(ups_t, (n,), linalg.weighted_gram(n), rank)
        return st._replace(mean=mu, prec_diag=ups, low_rank=w.T)

    def bbb(prior: BongDLRState, st: BongDLRState, est: Est) -> BongDLRState:
        """Gradient step on (μ, υ, W): ∇_Λ(E log p − KL) = ½ΣDΣ with D = Λ_p − Λ − G (BOG: D = −G at ψ_p)."""
        ups, w = st.prec_diag, st.low_rank.T
        root = dlr.cov_root(ups, w)
        delta = prior.prec_diag - ups  # diagonal part of D
        # the low-rank part of D, Σ_k s_k Z_k Z_kᵀ, as one signed block Z = [W_p, W, B] (P, 2R + K)
        z = jnp.concatenate([prior.low_rank, st.low_rank, est.factor], axis=0).T
        sign = jnp.concatenate([jnp.ones(rank, ups.dtype), -jnp.ones(rank, ups.dtype),
                                jnp.ones(est.factor.shape[0], ups.dtype)])
        sz = dlr.cov_matmul(root, z)  # ΣZ; its columns R..2R are ΣW
        sw = sz[:, rank : 2 * rank]
        diag_m = dlr.diag_sandwich(root, ups, delta) + (sz * sz) @ sign  # + Σ_k s_k rowsum((ΣZ_k)²)
        wm = dlr.cov_matmul(root, delta[:, None] * sw) + (sz * sign) @ linalg.tall_t_matmul(z, sw)  # ΣDΣW
        ups_i = jnp.maximum(ups + 0.5 * alpha * diag_m, min_precision)
        mu = st.mean + alpha * (est.g + _prior_term(prior, st.mean))
        return st._replace(mean=mu, prec_diag=ups_i, low_rank=(w + alpha * wm).T)

    return Family(init, predict, quad, sample, bong, blr, bbb)
