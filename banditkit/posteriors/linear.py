"""Exact Bayesian linear regression / Kalman filter for models *linear in their parameters* (seed 002 §2.1–2.2).

The LinTS / LinUCB baseline.  For a model ``f(θ, x) = H(x) θ + c(x)`` the design rows ``H(x) (C, P)`` are the
Jacobian of ``apply_fn`` with respect to the parameters (one reverse pass per output, at the current mean — any
point gives the same ``H`` for a linear model), so every update is the exact conjugate update.  A Flax
``MLP(features=(), out=K)`` is such a model; with ``apply_fn=None`` the parameters are a weight array ``w`` of
shape ``(D,)`` or ``(D, C)`` and ``f = xᵀ w``.  (For a non-linear ``apply_fn`` the same equations are an EKF.)

State: ``mean μ (P,)``, a square root ``U (P, P)`` of the covariance (``Σ = UᵀU``; ``state.cov`` forms ``Σ``
for inspection), for ``noise="nig"`` the inverse-gamma parameters ``a, b`` (carried but unused for known
noise), and ``space``, the parameter layout (static).  The square root makes a Thompson draw ``μ + Uᵀz`` cost
``O(P²)`` (no factorisation per draw) and the update ``O(P² C)`` (Potter-type square-root Joseph update,
:func:`linalg.sqrt_factor_update`); the time update with ``q > 0`` refactors ``γ²UᵀU + qI`` (``O(P³)``, only when
``dynamics_cov > 0``).

``noise="known"`` (seed 002 §2.1; any likelihood, exact for ``Gaussian``):

    :prior: ``θ ~ N(θ_0, init_cov · I)``
    :predict:  ``μ ← γ μ``;  ``Σ ← γ² Σ + q I``
    :update:   ``e = y − f(μ, x)``, ``S = H Σ Hᵀ + R``, ``K = Σ Hᵀ S⁻¹``, ``μ ← μ + K e``,
             ``Σ ← (I − K H) Σ (I − K H)ᵀ + K R Kᵀ``  (Joseph form; equals ``(Σ⁻¹ + Hᵀ R⁻¹ H)⁻¹``)
    :predictive: ``N(f(μ, x), H Σ Hᵀ + R)``.

``noise="nig"`` (seed 002 §2.2, West & Harrison §4.6; ``Gaussian`` only — its ``obs_noise`` is ignored because
σ² is inferred):

    :prior: ``σ² ~ IG(a0, b0)``, ``θ | σ² ~ N(θ_0, σ² · init_cov · I)``; ``Σ`` is the covariance *in units of σ²*
    :predict:  ``μ ← γ μ``;  ``Σ ← γ² Σ + q I``   (``q`` also in units of σ²; ``a, b`` are not discounted)
    :update:   ``e = y − f(μ, x)``, ``S* = H Σ Hᵀ + I_C``, ``K = Σ Hᵀ S*⁻¹``, ``μ ← μ + K e``,
             ``Σ ← Σ − K S* Kᵀ``, ``a ← a + C/2``, ``b ← b + ½ eᵀ S*⁻¹ e``
             (equal to the batch NIG posterior of seed 002 eqs. 17–20 with ``Σ_0 = init_cov · I``)
    :predictive: the marginal of ``y`` is a multivariate Student-t with ``2a`` degrees of freedom, location
             ``f(μ, x)`` and scale ``(b/a)(H Σ Hᵀ + I)``.  Returned: its mean and its covariance
             ``b/(a − 1) · (H Σ Hᵀ + I)``, which exists for ``a > 1``; for ``a ≤ 1`` (infinite variance) the scale
             matrix ``(b/a)(H Σ Hᵀ + I)`` is returned instead.  Use ``a0 > 1`` (default 6, seed 002's reference).
    :sample: ``σ² ~ IG(a, b)`` then ``θ ~ N(μ, σ² Σ)`` (two-level Thompson draw).

``mean(state)`` is ``μ`` in both modes.

``arms=K`` (seed 002 App. A.1, Riquelme et al.'s per-arm LinTS): for a ``K``-output linear model observed one arm at
a time, one regression per arm — its own ``μ_k, Σ_k`` — in ``O(P²/K²)`` per update and ``P²/K`` memory
(:mod:`banditkit.posteriors.linear_arms`); under ``noise="nig"`` the arms share one ``σ²`` (``shared_noise=True``,
then the posterior is the joint one's exactly) or each has its own (``shared_noise=False``, the paper's LinTS).
``arms=None`` (default): one joint regression over all ``P`` parameters, one ``σ²`` shared by all outputs.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.arms import check_arms
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, as_obs, check_common_hyper, linearize
from banditkit.posteriors.linear_arms import linear_arms, rescale_linear
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class LinearState(NamedTuple):
    mean: Array  # (P,)
    chol: Array  # (P, P) square root U, Σ = UᵀU; in units of σ for noise="nig"
    a: Array  # () inverse-gamma shape (nig)
    b: Array  # () inverse-gamma scale (nig)
    space: ParamSpace  # the parameter layout (static: no leaves)

    @property
    def cov(self) -> Array:
        """``Σ = UᵀU (P, P)`` (formed on demand; in units of σ² for ``noise="nig"``)."""
        return self.chol.T @ self.chol


def _dot_apply(w, x):
    """Default linear model ``f = xᵀ w`` for ``w (D,)`` or ``(D, C)``."""
    return jnp.atleast_1d(jnp.ravel(jnp.asarray(x)) @ w)


def linear(
    apply_fn: ApplyFn | None = None,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    init_cov: float = 1.0,
    noise: str = "known",
    a0: float = 6.0,
    b0: float = 6.0,
    dynamics_cov: float = 0.0,
    forgetting: float = 1.0,
    arms: int | None = None,
    shared_noise: bool = True,
) -> Posterior:
    """Exact Bayesian linear regression / Kalman filter (see the module docstring for the equations).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` linear in ``params``; ``None`` for ``f = xᵀ w``.
      likelihood: ``Gaussian(obs_noise)`` (``obs_noise`` = known σ²; ignored for ``noise="nig"``). With
        ``noise="known"`` the moment-matched ``Bernoulli`` / ``Categorical`` are accepted too (then an EKF).
      init_cov: prior variance of every parameter (``noise="nig"``: prior covariance ``σ² · init_cov · I``).
      noise: ``"known"`` (σ² from the likelihood) or ``"nig"`` (Normal-Inverse-Gamma, σ² learned).
      a0, b0: inverse-gamma prior ``σ² ~ IG(a0, b0)`` for ``noise="nig"`` (defaults: seed 002's reference 6, 6).
      dynamics_cov: ``q``, random-walk variance added per ``predict``.
      forgetting: ``γ``, the mean shrinks as ``θ ← γθ`` per ``predict``.
      arms: ``K`` for one independent regression per output of a ``K``-output linear model (every parameter leaf
        has last axis ``K``; observations of one output at a time, as a multi-output bandit agent makes), each with
        its own covariance; ``None`` for one joint regression (see the module docstring).
      shared_noise: with ``arms`` and ``noise="nig"``: one noise variance for all arms (``True``: the joint model's
        posterior exactly, at ``O(P²/K²)`` per update) or one per arm (``False``: Riquelme et al.'s per-arm LinTS).
    """
    check_common_hyper("linear", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if noise not in ("known", "nig"):
        raise ValueError(f"linear: noise={noise!r} must be 'known' (sigma^2 given) or 'nig' (sigma^2 learned)")
    if noise == "nig":
        if not isinstance(likelihood, Gaussian):
            raise TypeError(
                f"linear(noise='nig') is the Normal-Inverse-Gamma regression and needs a Gaussian likelihood, "
                f"got {type(likelihood).__name__}; use noise='known' for a moment-matched classification filter"
            )
        for nm, v in (("a0", a0), ("b0", b0)):
            if not isinstance(v, jax.core.Tracer) and not float(v) > 0:
                raise ValueError(f"linear: {nm} must be > 0, got {v!r}")
    f = _dot_apply if apply_fn is None else apply_fn
    nig = noise == "nig"
    if arms is not None:
        check_arms(arms, "linear")
        return linear_arms(f, likelihood, arms=arms, init_cov=init_cov, nig=nig, a0=a0, b0=b0,
                           dynamics_cov=dynamics_cov, forgetting=forgetting, shared_noise=bool(shared_noise))

    def init(params, example_x=None) -> LinearState:
        space = ParamSpace.of(params)
        mu = space.ravel(params)
        dt = mu.dtype
        u = jnp.sqrt(jnp.asarray(init_cov, dt)) * jnp.eye(mu.size, dtype=dt)
        return LinearState(mu, u, jnp.asarray(a0, dt), jnp.asarray(b0, dt), space)

    def _design(state: LinearState, x):
        yhat, h, r = linearize(lambda p: f(p, x), state.space.unravel(state.mean), likelihood)
        if nig:
            r = jnp.eye(yhat.shape[0], dtype=yhat.dtype)
        return yhat, h, r

    def predict(state: LinearState) -> LinearState:
        dt = state.mean.dtype
        g = jnp.asarray(forgetting, dt)
        u = g * state.chol
        if not (isinstance(dynamics_cov, int | float) and dynamics_cov == 0):  # static: no refactorisation when q = 0
            u = linalg.add_isotropic_factor(u, jnp.asarray(dynamics_cov, dt))
        return state._replace(mean=g * state.mean, chol=u)

    def update(state: LinearState, x, y) -> LinearState:
        mu, u, a, b = state.mean, state.chol, state.a, state.b
        y = as_obs(y, mu.dtype)
        yhat, h, r = _design(state, x)
        bu = u @ h.T  # B = U Hᵀ (P, C)
        s = linalg.symmetrize(bu.T @ bu + r)  # S = H Σ Hᵀ + R
        e = y - yhat
        zero = jnp.zeros_like(r)
        mu_new, u = linalg.sqrt_factor_update(mu, u, bu, s, zero, linalg.sqrt_psd(r), e)
        if nig:
            a = a + 0.5 * e.shape[0]
            b = b + 0.5 * e @ linalg.solve_spd_factor(linalg.chol_upper(s), e[:, None])[:, 0]
        return LinearState(mu_new, u, a, b, state.space)

    def predictive(state: LinearState, x) -> tuple[Array, Array]:
        yhat, h, r = _design(state, x)
        bu = state.chol @ h.T
        cov = linalg.symmetrize(bu.T @ bu + r)
        if nig:
            a, b = state.a, state.b
            cov = cov * jnp.where(a > 1, b / jnp.where(a > 1, a - 1, 1.0), b / a)
        return yhat, cov

    def sample(key: Array, state: LinearState):
        k_sig, k_z = jax.random.split(key)
        z = rng.normal(k_z, state.mean.shape, state.mean.dtype)
        draw = state.chol.T @ z  # Cov = UᵀU
        if nig:
            sig2 = state.b / jax.random.gamma(k_sig, state.a, dtype=state.mean.dtype)
            draw = jnp.sqrt(sig2) * draw
        return state.space.unravel(state.mean + draw)

    def mean(state: LinearState):
        return state.space.unravel(state.mean)

    hyper = dict(init_cov=init_cov, noise=noise, a0=a0, b0=b0, dynamics_cov=dynamics_cov, forgetting=forgetting)
    return Posterior(init, predict, update, predictive, sample, mean, name="linear", hyper=hyper,
                     rescale=functools.partial(rescale_linear, nig=nig))


register(Backend(
    name="linear", factory=linear,
    bandit_defaults=dict(init_cov=1.0, noise="nig"),
    learns_own_noise=True, arm_blocks=True, linear_model=True,
))
