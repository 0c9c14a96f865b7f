"""Last-layer Laplace with a FIFO replay buffer (LLL; seed 003 §9.3, Daxberger et al.'s online last-layer variant).

:update:  push ``(x, y)`` into the buffer, run ``n_inner`` optax steps (AdamW by default) on the masked buffer loss
         ``−(1/n) Σ_i log p(y_i | f(θ, x_i))`` (all parameters, ``likelihood.log_prob``), then fit a GGN Laplace
         approximation to the last layer ``ℓ`` at the trained ``θ* = [h*, ℓ*]`` from the buffer::

             Λ = I / init_cov_last + Σ_{i filled} L̃_iᵀ R_i⁻¹ L̃_i,     Σ_ℓ = Λ⁻¹   (D_ℓ × D_ℓ)

         with ``L̃_i = ∂m(f(θ*, x_i))/∂ℓ (C, D_ℓ)`` and ``R_i = R(f(θ*, x_i))`` from the likelihood (``Gaussian``:
         ``obs_noise``; ``Bernoulli`` / ``Categorical``: the jittered moment-matched covariance).
:predict:    identity (no dynamics: the buffer is the memory).
:predictive: linearised in the last layer: ``(m(f(θ*, x)), L̃ Σ_ℓ L̃ᵀ + R)``.
:sample:     hidden layers at ``h*``, ``ℓ = ℓ* + L z`` with ``L Lᵀ = Σ_ℓ`` (``linalg.sample_factor``: Cholesky,
            eigen square root where that fails).

Deviation from the seed's reference code (erratum §14.2.10): that code builds ``F = mean_i g_i g_iᵀ + 10⁻⁴ I`` from
*unit-normalised* per-sample gradients and uses ``F`` itself as the covariance.  Here the curvature is the standard
generalised Gauss–Newton of the buffer likelihood plus the prior precision, and it is *inverted* (a proper Laplace
posterior: more data → smaller variance).

Defaults (seed 003 App. G.3): buffer 20, 50 inner steps, AdamW lr 1e-4, last-layer prior variance 1.
Needs the shape of one input for the buffer: ``example_x=`` to the factory or ``init(params, example_x)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import _replay as replay
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, PyTree
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


class LaplaceState(NamedTuple):
    params: Array  # (P,) θ* (MAP of the buffer loss)
    cov_last: Array  # (D_ℓ, D_ℓ) Laplace covariance of the last layer
    opt_state: Any
    buffer: replay.FifoBuffer
    space: ParamSpace  # layout of θ and its last-layer block (static, no leaves)


def last_layer_laplace(
    apply_fn: ApplyFn, likelihood: Likelihood = Gaussian(1.0), *, last_layer: str = "head",
    buffer_size: int = 20, n_inner: int = 50, learning_rate: float = 1e-4, init_cov_last: float = 1.0,
    optimizer: optax.GradientTransformation | None = None, example_x: PyTree | None = None,
) -> Posterior:
    """Last-layer GGN Laplace on a FIFO buffer, network trained by optax (see module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)``.
      likelihood: training loss (``log_prob``) and the GGN's ``R`` (``cov``).
      last_layer: path name of the last layer (``"head"`` in ``bk.models``).
      buffer_size, n_inner, learning_rate: FIFO length, optimiser steps per update, AdamW learning rate.
      init_cov_last: prior variance of each last-layer weight (the Laplace prior precision is its inverse).
      optimizer: optional optax transformation replacing ``adamw(learning_rate)``.
      example_x: one model input, to shape the buffer (or pass it to ``init``).
    """
    name = "last_layer_laplace"
    opt = replay.check_fit_args(name, buffer_size, n_inner, learning_rate, optimizer, init_cov_last=init_cov_last)
    default_x = example_x

    def _last_jac(space: ParamSpace, theta: Array, x):
        """``(ŷ, L̃ (C, D_ℓ), R)`` — Jacobian w.r.t. the last layer only (one jacrev over ℓ)."""
        f, jac = replay.head_jacobian(apply_fn, space, *space.split(space.unravel(theta)), x, link=likelihood.mean)
        return likelihood.mean(f), jac, likelihood.cov(f)

    def _fit_cov(space: ParamSpace, theta: Array, buf: replay.FifoBuffer) -> Array:
        w = replay.fifo_mask(buf)

        def one(x):
            _, lj, r = _last_jac(space, theta, x)
            b = linalg.solve_spd_factor(linalg.chol_upper(linalg.symmetrize(r)), lj)  # R⁻¹ L̃
            return lj.T @ b  # L̃ᵀ R⁻¹ L̃

        ggn = jnp.einsum("b,bij->ij", w, jax.vmap(one)(buf.x))
        d = ggn.shape[0]
        prec = linalg.symmetrize(ggn) + jnp.eye(d, dtype=ggn.dtype) / jnp.asarray(init_cov_last, ggn.dtype)
        return linalg.spd_inverse(prec)

    def init(params, example_x: PyTree | None = None) -> LaplaceState:
        space = ParamSpace.of(params, last_layer)
        theta = space.ravel(params)
        buf = replay.buffer_init(name, apply_fn, params, example_x, default_x, buffer_size, theta.dtype)
        d = space.size_last
        cov = jnp.asarray(init_cov_last, theta.dtype) * jnp.eye(d, dtype=theta.dtype)
        return LaplaceState(theta, cov, opt.init(theta), buf, space)

    def update(state: LaplaceState, x, y) -> LaplaceState:
        space = state.space
        buf = replay.buffer_push(name, state.buffer, x, y, state.params.dtype)
        loss = replay.flat_nll(apply_fn, likelihood, space)
        theta, o = replay.fit(loss, opt, state.params, state.opt_state, buf, n_inner)
        return LaplaceState(theta, _fit_cov(space, theta, buf), o, buf, space)

    def predict(state: LaplaceState) -> LaplaceState:
        return state

    def predictive(state: LaplaceState, x) -> tuple[Array, Array]:
        yhat, lj, r = _last_jac(state.space, state.params, x)
        return yhat, linalg.symmetrize(lj @ state.cov_last @ lj.T + r)

    def sample(key: Array, state: LaplaceState):
        return replay.sample_last_layer(key, state.space, state.params, linalg.sample_factor(state.cov_last))

    def mean(state: LaplaceState):
        return state.space.unravel(state.params)

    hyper = dict(last_layer=last_layer, buffer_size=buffer_size, n_inner=n_inner, learning_rate=learning_rate,
                 init_cov_last=init_cov_last, needs_example_x=True)
    return Posterior(init, predict, update, predictive, sample, mean, name=name, hyper=hyper)


register(Backend(name="last_layer_laplace", factory=last_layer_laplace))
