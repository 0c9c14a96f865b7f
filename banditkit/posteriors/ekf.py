"""Full-covariance extended Kalman filter (seeds 000, 002, 004) in Joseph form.

State: ``mean μ (P,)``, ``cov Σ (P, P)`` — O(P²) memory, meant for small models and as the exact reference.

Model: ``θ_t = γ θ_{t-1} + u_t``, ``u_t ~ N(0, q I)``; ``y_t ~ N(m(f(θ_t, x_t)), R_t)`` linearised at ``μ``.

:predict:  ``μ ← γ μ``;  ``Σ ← γ² Σ + q I``
:update:   ``ŷ = m(f(μ, x))``, ``J = ∂ŷ/∂θ (C, P)``, ``S = J Σ Jᵀ + R (C, C)``, ``K = Σ Jᵀ S⁻¹ (P, C)``
          ``μ ← μ + K (y − ŷ)``;  ``Σ ← (I − K J) Σ (I − K J)ᵀ + K R Kᵀ``   (Joseph form: stays PSD)
          computed multiplied out, ``Σ + X₊X₊ᵀ − X₋X₋ᵀ`` with ``G = ΣJᵀ``, ``X₋ = G U⁻¹``, ``X₊ = K Uᵀ − X₋``
          (``S − R = UᵀU``): one fused pass over ``Σ``, ``O(P² C)``, no ``P × P`` product or transpose, and ``Σ``
          stays exactly symmetric (:func:`linalg.dense_block_update`, shared with HiLoFi's dense last
          layer)
:predictive: ``(ŷ(x), J Σ Jᵀ + R)``;   sample: ``θ = μ + L z``, ``L Lᵀ = Σ`` (Cholesky, eigen square root where
          that fails: :func:`linalg.sample_factor`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, check_common_hyper, flat_obs, linearize
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class EKFState(NamedTuple):
    mean: Array  # (P,)
    cov: Array  # (P, P)
    space: ParamSpace  # the parameter layout (static: no leaves)


def ekf(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *,
    init_cov: float = 1.0, dynamics_cov: float = 0.0, forgetting: float = 1.0,
) -> Posterior:
    """Full-covariance EKF over all parameters (Joseph-form covariance update).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input.
      likelihood: observation model (``Gaussian``, ``Bernoulli`` or ``Categorical``).
      init_cov: prior variance of every parameter (``Σ_0 = init_cov · I``; ``0`` is a point mass that freezes
        the parameters).
      dynamics_cov: ``q``, random-walk variance added per ``predict``.
      forgetting: ``γ``, the mean shrinks as ``θ ← γθ`` per ``predict`` (and ``Σ ← γ²Σ``).
    """
    check_common_hyper("ekf", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting, zero_prior=True)
    hyper_dyn = (forgetting, dynamics_cov)
    static = all(isinstance(v, int | float) for v in hyper_dyn) and hyper_dyn == (1, 0)

    def init(params, example_x=None) -> EKFState:
        space = ParamSpace.of(params)
        mu = space.ravel(params)
        return EKFState(mu, jnp.asarray(init_cov, mu.dtype) * jnp.eye(mu.size, dtype=mu.dtype), space)

    def predict(state: EKFState) -> EKFState:
        if static:  # γ = 1, q = 0: skip a pass over the P × P covariance
            return state
        g = jnp.asarray(forgetting, state.mean.dtype)
        q = jnp.asarray(dynamics_cov, state.mean.dtype)
        cov = g**2 * state.cov + q * jnp.eye(state.mean.size, dtype=state.mean.dtype)
        return state._replace(mean=g * state.mean, cov=cov)

    def update(state: EKFState, x: Array, y: Array) -> EKFState:
        mu, sigma = state.mean, state.cov
        y = as_obs(y, mu.dtype)
        yhat, j, r = linearize(flat_obs(apply_fn, state.space, x), mu, likelihood)
        sj = sigma @ j.T  # (P, C)
        s = j @ sj + r
        mu, sigma = linalg.dense_block_update(mu, sigma, sj, s, jnp.zeros_like(s), y - yhat)
        return state._replace(mean=mu, cov=sigma)

    def predictive(state: EKFState, x: Array) -> tuple[Array, Array]:
        yhat, j, r = linearize(flat_obs(apply_fn, state.space, x), state.mean, likelihood)
        return yhat, linalg.symmetrize(j @ state.cov @ j.T + r)

    def sample(key: Array, state: EKFState):
        z = rng.normal(key, state.mean.shape, state.mean.dtype)
        return state.space.unravel(state.mean + linalg.sample_factor(state.cov) @ z)

    def mean(state: EKFState):
        return state.space.unravel(state.mean)

    hyper = dict(init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    return Posterior(init, predict, update, predictive, sample, mean, name="ekf", hyper=hyper)


register(Backend(name="ekf", factory=ekf, bandit_defaults=dict(init_cov=1.0), bo_defaults=dict(init_cov=1e-2),
                 gaussian_filter=True))
