"""Diagonal extended Kalman filter (seed 000 §2.6 "VD-EKF", seed 002 §5.3 "EKF-Orig-Diag").

State: ``mean μ (P,)`` and ``prec υ (P,)``, the diagonal of the posterior *precision* (``Σ = diag(1/υ)``).
O(P) memory and O(P·C²) work per step beyond the Jacobian, so it scales to any network.

Model: ``θ_t = γ θ_{t-1} + u_t``, ``u_t ~ N(0, q I)``; ``y_t ~ N(m(f(θ_t, x_t)), R_t)`` linearised at ``μ``.

:predict (exact on the diagonal):  ``μ ← γ μ``;  ``υ ← 1 / (γ²/υ + q)``
:update, ``method="variational"`` (default; VD-EKF, seed 000 App. A.4 = zero-rank LoFi):
          ``ŷ = m(f(μ, x))``, ``J = ∂ŷ/∂θ (C, P)``, ``S = J diag(1/υ) Jᵀ + R (C, C)``
          ``μ ← μ + diag(1/υ) Jᵀ S⁻¹ (y − ŷ)``
          ``υ ← υ + diag(Jᵀ R⁻¹ J)``                (precision matched on the diagonal)
:update, ``method="decoupled"`` (fully decoupled EKF, seed 002 §5.3): same mean step, and the variance
          ``p = 1/υ`` takes the diagonal of the exact covariance update,
          ``p ← p − p² ⊙ diag(Jᵀ S⁻¹ J)``       (floored at a tiny fraction of the old ``p``)
:predictive: ``(ŷ(x), J diag(1/υ) Jᵀ + R)``;   sample: ``θ = μ + z / √υ``,  ``z ~ N(0, I)``.

The variational update never decreases the precision, so ``υ > 0`` holds for ever; the decoupled update can
drive a variance to zero in float32 and is kept for comparison with seed 002's baseline.
When every observation's Jacobian touches disjoint parameters the exact posterior stays diagonal and both
updates are exact (tested).
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

_METHODS = ("variational", "decoupled")


class DiagEKFState(NamedTuple):
    mean: Array  # (P,)
    prec: Array  # (P,) diagonal of the posterior precision, > 0
    space: ParamSpace  # the parameter layout (static: no leaves)


def diag_ekf(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *,
    init_cov: float = 1.0, dynamics_cov: float = 0.0, forgetting: float = 1.0, method: str = "variational",
) -> Posterior:
    """Diagonal EKF over all parameters (see the module docstring for the equations).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` may be any pytree).
      likelihood: observation model (``Gaussian``, ``Bernoulli`` or ``Categorical``).
      init_cov: prior variance of every parameter (``υ_0 = 1/init_cov``).
      dynamics_cov: ``q``, random-walk variance added per ``predict``.
      forgetting: ``γ``, the mean shrinks as ``θ ← γθ`` per ``predict`` (and the variance as ``γ²``).
      method: ``"variational"`` (VD-EKF, precision update; default) or ``"decoupled"`` (variance update).
    """
    check_common_hyper("diag_ekf", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if method not in _METHODS:
        raise ValueError(f"diag_ekf: method={method!r} is not one of {_METHODS}")

    def init(params, example_x=None) -> DiagEKFState:
        space = ParamSpace.of(params)
        mu = space.ravel(params)
        return DiagEKFState(mu, jnp.full_like(mu, 1.0 / jnp.asarray(init_cov, mu.dtype)), space)

    def predict(state: DiagEKFState) -> DiagEKFState:
        dt = state.mean.dtype
        g = jnp.asarray(forgetting, dt)
        q = jnp.asarray(dynamics_cov, dt)
        return state._replace(mean=g * state.mean, prec=1.0 / (g**2 / state.prec + q))

    def update(state: DiagEKFState, x, y) -> DiagEKFState:
        mu, prec = state.mean, state.prec
        y = as_obs(y, mu.dtype)
        yhat, j, r = linearize(flat_obs(apply_fn, state.space, x), mu, likelihood)
        var = 1.0 / prec
        jv = j * var[None, :]  # (C, P) = J diag(1/υ)
        s = linalg.symmetrize(jv @ j.T + r)
        s_chol = linalg.chol_upper(s)
        mu = mu + jv.T @ linalg.solve_spd_factor(s_chol, (y - yhat)[:, None])[:, 0]
        if method == "variational":
            rinv_j = linalg.solve_spd_factor(linalg.chol_upper(linalg.symmetrize(r)), j)  # R⁻¹ J (C, P)
            prec = prec + jnp.sum(j * rinv_j, axis=0)
        else:
            sinv_j = linalg.solve_spd_factor(s_chol, j)  # S⁻¹ J
            new_var = var - var**2 * jnp.sum(j * sinv_j, axis=0)
            floor = jnp.finfo(mu.dtype).eps * var
            prec = 1.0 / jnp.maximum(new_var, floor)
        return state._replace(mean=mu, prec=prec)

    def predictive(state: DiagEKFState, x) -> tuple[Array, Array]:
        yhat, j, r = linearize(flat_obs(apply_fn, state.space, x), state.mean, likelihood)
        return yhat, linalg.symmetrize((j / state.prec[None, :]) @ j.T + r)

    def sample(key: Array, state: DiagEKFState):
        z = rng.normal(key, state.mean.shape, state.mean.dtype)
        return state.space.unravel(state.mean + z / jnp.sqrt(state.prec))

    def mean(state: DiagEKFState):
        return state.space.unravel(state.mean)

    hyper = dict(init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting, method=method)
    return Posterior(init, predict, update, predictive, sample, mean, name="diag_ekf", hyper=hyper)


register(Backend(name="diag_ekf", factory=diag_ekf, bandit_defaults=dict(init_cov=0.01),
                 bo_defaults=dict(init_cov=1e-2), gaussian_filter=True))
