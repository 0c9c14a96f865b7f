"""Per-arm ("disjoint") exact Bayesian linear regression: ``linear(..., arms=K)``.

Seed 002 App. A.1 (and Riquelme et al.'s LinTS): "each arm is handled separately, using only the steps at which that
arm was pulled" — arm ``k`` has its own weights ``θ_k`` and covariance ``Σ_k``.  For ``noise="nig"`` the noise
variance is either one ``σ² ~ IG(a, b)`` shared by all arms (``shared_noise=True``: exactly the joint model of
``linear(..., arms=None)``, computed blockwise) or one ``σ_k² ~ IG(a_k, b_k)`` per arm (``shared_noise=False``: the
paper's and Riquelme et al.'s per-arm LinTS).

Block structure (:mod:`banditkit.posteriors.arms`).  Every parameter leaf of the model has last axis ``K`` (a
``K``-output ``Dense`` head: kernel ``(D, K)``, bias ``(K,)``) and output ``k`` depends only on slice ``k`` of every
leaf; ``arm_blocks`` maps the flat parameter vector (``ravel_pytree`` order) to ``K`` blocks ``θ_k (P_k,)``,
``P_k = P / K``.  Observed through the agent's one-hot selection ``f(θ, x)·e_a``
(:func:`banditkit.agents.bandit.selected_output`) the design row ``H (1, P)`` is zero outside block ``a``, so the
joint posterior of :func:`banditkit.posteriors.linear` stays block-diagonal for ever: only the ``K`` diagonal blocks
are kept.

State (:class:`LinearArmsState`): mean ``μ (P,)`` (flat, as ``linear``), square roots ``U (K, P_k, P_k)`` with
``Σ_k = U_kᵀ U_k``, ``a, b`` — ``(K,)`` per arm, ``()`` when shared (carried but unused for known noise) — and
``space``, the parameter layout: the blocks are :func:`arms.arm_index` of it, derived at trace time.

update(x, y), one observation (``C = 1``): ``ŷ = f(μ, x)``, ``H = ∂f/∂θ (1, P)`` → blocks ``H_k (1, P_k)``; the
observed arm ``k* = argmax_k ‖H_k‖`` (the one nonzero block); then ``linear``'s update on block ``k*`` alone::

    e = y − ŷ,  S = H_k Σ_k H_kᵀ + R,  μ_k ← μ_k + Σ_k H_kᵀ S⁻¹ e,  Σ_k ← (I − K H_k) Σ_k (I − K H_k)ᵀ + K R Kᵀ
    nig (R = 1, Σ_k in units of σ_k²):  a_k ← a_k + ½,  b_k ← b_k + ½ e² / S   (a, b themselves when shared)

  (square-root form, :func:`linalg.sqrt_factor_update`), ``O(P_k²)`` against ``O(P²) = O(K² P_k²)`` for
  the joint model.  An observation whose design row is zero in every block (all-zero features and no bias) says
  nothing about any ``θ_k`` and changes nothing — with ``nig`` no ``σ_k²`` is updated either, as the backend cannot
  tell which arm it came from.
predict: per block, ``μ ← γ μ``, ``Σ_k ← γ² Σ_k + q I``.
predictive(x): ``N(ŷ, H_k* Σ_k* H_k*ᵀ + R)``; with ``nig`` the Student-t moments of arm ``k*``:
  ``E[σ_k*²] (H_k* Σ_k* H_k*ᵀ + 1)``, ``E[σ²] = b/(a−1)`` (``b/a`` while ``a ≤ 1``), as in ``linear``.
sample: ``σ_k² ~ IG(a_k, b_k)`` independently per arm (one ``σ² ~ IG(a, b)`` for all arms when shared), then
``θ_k = μ_k + σ_k U_kᵀ z_k``, ``z_k ~ N(0, I)``.

With known noise, or ``nig`` with ``shared_noise=True``, the posterior equals ``linear(..., arms=None)``'s on the same
model exactly (the joint covariance's off-diagonal blocks stay zero; its Thompson draws have the same distribution,
from differently arranged normals).  Memory ``K P_k² = P² / K``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit.likelihoods import Likelihood
from banditkit.posteriors import arms as per_arm
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, linearize

Array = jax.Array


class LinearArmsState(NamedTuple):
    mean: Array  # (P,) μ, flat in ravel_pytree order (arm k's entries: arm_blocks(params, K)[k])
    chol: Array  # (K, P_k, P_k) square roots U_k, Σ_k = U_kᵀ U_k; in units of σ_k for noise="nig"
    a: Array  # (K,) inverse-gamma shapes (nig)
    b: Array  # (K,) inverse-gamma scales (nig); a and b are () when the noise variance is shared
    space: ParamSpace  # the parameter layout (static: no leaves); the blocks are arms.arm_index(space, K)

    @property
    def cov(self) -> Array:
        """The per-arm covariance blocks ``Σ_k = U_kᵀ U_k`` ``(K, P_k, P_k)`` (in units of σ_k² for ``nig``)."""
        return jnp.einsum("kji,kjl->kil", self.chol, self.chol)



def rescale_linear(state, c, cov: bool = True, *, nig: bool):
    """Outputs of a linear model times ``c`` (``Posterior.rescale``, for ``linear`` and ``linear_arms`` states):
    ``μ ← c μ``, ``Σ ← c² Σ`` (``U ← c U``; nig: ``σ² ← c² σ²``, i.e. ``b ← c² b``); ``cov=False``: the mean only."""
    c = jnp.asarray(c, state.mean.dtype)
    if not cov:
        return state._replace(mean=c * state.mean)
    if nig:
        return state._replace(mean=c * state.mean, b=c**2 * state.b)
    return state._replace(mean=c * state.mean, chol=c * state.chol)

def linear_arms(
    f: ApplyFn,
    likelihood: Likelihood,
    *,
    arms: int,
    init_cov: float,
    nig: bool,
    a0: float,
    b0: float,
    dynamics_cov: float,
    forgetting: float,
    shared_noise: bool = True,
) -> Posterior:
    """The per-arm backend behind ``linear(..., arms=K)`` (arguments checked there; see the module docstring)."""

    def init(params, example_x=None) -> LinearArmsState:
        space = ParamSpace.of(params)
        per_arm.arm_index(space, arms, "linear")  # every leaf must have last axis K: a clear error now
        mu = space.ravel(params)
        dt = mu.dtype
        u = jnp.sqrt(jnp.asarray(init_cov, dt)) * per_arm.eye_blocks(arms, mu.size, dt)
        ones = jnp.ones(() if shared_noise else (arms,), dt)
        return LinearArmsState(mu, u, a0 * ones, b0 * ones, space)

    def _design(state: LinearArmsState, x):
        dt = state.mean.dtype
        yhat, h, r = (v.astype(dt) for v in linearize(lambda p: f(p, x), state.space.unravel(state.mean), likelihood))
        per_arm.check_one_output(yhat.shape[0], arms, "linear")
        k, hk, ik, seen = per_arm.observed_block(h[0], per_arm.arm_index(state.space, arms, "linear"))
        if nig:
            r = jnp.ones((1, 1), dt)
        return yhat, hk[None, :], r, k, ik, seen

    def predict(state: LinearArmsState) -> LinearArmsState:
        dt = state.mean.dtype
        g = jnp.asarray(forgetting, dt)
        u = g * state.chol
        if not (isinstance(dynamics_cov, int | float) and dynamics_cov == 0):
            u = jax.vmap(lambda v: linalg.add_isotropic_factor(v, jnp.asarray(dynamics_cov, dt)))(u)
        return state._replace(mean=g * state.mean, chol=u)

    def update(state: LinearArmsState, x, y) -> LinearArmsState:
        mu, chol, a, b = state.mean, state.chol, state.a, state.b
        y = as_obs(y, mu.dtype)
        yhat, hk, r, k, ik, seen = _design(state, x)
        if y.shape != yhat.shape:
            raise ValueError(
                f"linear.update: y has shape {y.shape} but the model predicts {yhat.shape}; pass y as (1,)"
            )
        u = jax.lax.dynamic_index_in_dim(chol, k, keepdims=False)  # (P_k, P_k)
        bu = u @ hk.T  # (P_k, 1)
        s = linalg.symmetrize(bu.T @ bu + r)
        e = y - yhat
        mu_k, u_k = linalg.sqrt_factor_update(mu[ik], u, bu, s, jnp.zeros_like(r), linalg.sqrt_psd(r), e)
        mu = mu.at[ik].set(mu_k)
        chol = jax.lax.dynamic_update_index_in_dim(chol, u_k, k, 0)
        if nig:
            w = seen.astype(mu.dtype)
            da = 0.5 * w
            db = 0.5 * w * e @ linalg.solve_spd_factor(linalg.chol_upper(s), e[:, None])[:, 0]
            a, b = (a + da, b + db) if shared_noise else (a.at[k].add(da), b.at[k].add(db))
        return LinearArmsState(mu, chol, a, b, state.space)

    def predictive(state: LinearArmsState, x) -> tuple[Array, Array]:
        yhat, hk, r, k, _, _ = _design(state, x)
        bu = jax.lax.dynamic_index_in_dim(state.chol, k, keepdims=False) @ hk.T
        cov = linalg.symmetrize(bu.T @ bu + r)
        if nig:
            ak, bk = (state.a, state.b) if shared_noise else (state.a[k], state.b[k])
            cov = cov * jnp.where(ak > 1, bk / jnp.where(ak > 1, ak - 1, 1.0), bk / ak)
        return yhat, cov

    def sample(key: Array, state: LinearArmsState):
        k_sig, k_z = jax.random.split(key)
        dt = state.mean.dtype
        draw = per_arm.sample_blocks(k_z, state.chol)  # U_kᵀ z_k (K, P_k)
        if nig:
            sig2 = state.b / jax.random.gamma(k_sig, state.a, dtype=dt)  # σ_k² ~ IG(a_k, b_k) (K,), or σ² ()
            draw = jnp.sqrt(sig2)[..., None] * draw
        index = per_arm.arm_index(state.space, arms, "linear")
        return state.space.unravel(state.mean + per_arm.scatter_blocks(draw, index, state.mean.size))

    def mean(state: LinearArmsState):
        return state.space.unravel(state.mean)

    hyper = dict(init_cov=init_cov, noise="nig" if nig else "known", a0=a0, b0=b0, dynamics_cov=dynamics_cov,
                 forgetting=forgetting, arms=arms, shared_noise=shared_noise)
    return Posterior(init, predict, update, predictive, sample, mean, name="linear", hyper=hyper,
                     rescale=functools.partial(rescale_linear, nig=nig))
