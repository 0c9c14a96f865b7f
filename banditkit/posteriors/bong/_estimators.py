"""Estimators of ``g = E_q[∇_θ log p(y | θ)]`` and ``G = E_q[∇²_θ log p(y | θ)]`` (seed 004, Table 1).

``linear-hessian``  ``g = Hᵀ R⁻¹ (y − ŷ)``, ``G = −BᵀB`` with ``B = L⁻¹ H (C, P)``, ``R = L Lᵀ`` (linearised at ``μ``).
``linear-ef``       the same ``g``; ``G = −g gᵀ`` (factor ``gᵀ``).
``mc-ef``           ``θ_m ~ q``: ``g = mean ĝ_m``, ``G = −(1/M) Σ ĝ_m ĝ_mᵀ`` (factor ``Ĝ / √M``).
``mc-hessian``      ``g = mean ĝ_m``; ``G = mean ∇² log p(θ_m)``, dense (positive curvature clipped) or its diagonal
                    by Hutchinson (``diag(G) ≈ mean z ⊙ (G z)``, Rademacher ``z``), as the family takes it.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import linearize
from banditkit.posteriors.bong._core import Est, Family, State

Array = jax.Array


def _dense_hessian(logp, thetas: Array, keys: Array, n_probes: int) -> dict:
    """``G = V min(Λ, 0) Vᵀ`` of the mean sampled Hessian: positive curvature clipped, so ``Ω_p − G ≻ 0``."""
    hess = linalg.symmetrize(jnp.mean(jax.vmap(jax.hessian(logp))(thetas), axis=0))
    evals, evecs = linalg.eigh(hess)
    return dict(dense=linalg.symmetrize((evecs * jnp.minimum(evals, 0.0)[None, :]) @ evecs.T))


def _hutchinson_diag(logp, thetas: Array, keys: Array, n_probes: int) -> dict:
    """``diag(G) ≈ mean_k z_k ⊙ (∇² z_k)`` with ``n_probes`` Rademacher ``z`` per sample, clipped at 0."""
    pkeys = jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys)

    def diag_one(theta, pk):
        zs = rng.rademacher(pk, (n_probes, theta.size), theta.dtype)
        hvp = jax.vmap(lambda z: jax.jvp(jax.grad(logp), (theta,), (z,))[1])(zs)
        return jnp.mean(zs * hvp, axis=0)

    return dict(diag=jnp.minimum(jnp.mean(jax.vmap(diag_one)(thetas, pkeys), axis=0), 0.0))


_HESSIAN_FORMS = {"dense": _dense_hessian, "diag": _hutchinson_diag}


def estimator(
    kind: str, likelihood: Likelihood, family: Family, n_samples: int, n_probes: int
) -> Callable[[Array, State, Callable[[Array], Array], Array], Est]:
    """``estimate(key, state, obs, y) -> Est`` for ``obs: θ (P,) -> f (C,)``; ``key`` is read by the MC kinds only."""
    if kind.startswith("linear"):

        def linear(key: Array, st: State, obs, y: Array) -> Est:
            yhat, h, r = linearize(obs, st.mean, likelihood)
            lr = jnp.linalg.cholesky(linalg.symmetrize(r))  # R = L Lᵀ
            # L⁻¹ (C, C) formed explicitly: a triangular solve with P right-hand sides is slow on XLA:CPU
            l_inv = linalg.tri_inverse(lr.T).T
            b = l_inv @ h  # (C, P):  BᵀB = Hᵀ R⁻¹ H
            e = l_inv @ (y - yhat)
            g = b.T @ e
            if kind == "linear-hessian":
                return Est(g, factor=b, coef=e)
            return Est(g, factor=g[None, :], coef=jnp.ones((1,), g.dtype))

        return linear

    def monte_carlo(key: Array, st: State, obs, y: Array) -> Est:
        def logp(t):
            return likelihood.log_prob(y, jnp.atleast_1d(obs(t)))

        keys = jax.random.split(key, n_samples)
        thetas = jax.vmap(lambda k: family.sample(k, st))(keys)  # (M, P)
        grads = jax.vmap(jax.grad(logp))(thetas)  # (M, P)
        g = jnp.mean(grads, axis=0)
        if kind == "mc-ef":
            root_m = jnp.sqrt(jnp.asarray(n_samples, g.dtype))
            return Est(g, factor=grads / root_m, coef=jnp.full((n_samples,), 1.0 / root_m, g.dtype))
        return Est(g, **_HESSIAN_FORMS[family.hessian](logp, thetas, keys, n_probes))

    return monte_carlo
