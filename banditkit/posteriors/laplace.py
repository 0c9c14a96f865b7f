"""Last-layer Laplace with a FIFO replay buffer (LLL; seed 003 §9.3, Daxberger et al.'s online last-layer variant).

update:  push ``(x, y)`` into the buffer, run ``n_inner`` optax steps (AdamW by default) on the masked buffer loss
         ``−(1/n) Σ_i log p(y_i | f(θ, x_i))`` (all parameters, ``likelihood.log_prob``), then fit a GGN Laplace
         approximation to the last layer ``ℓ`` at the trained ``θ* = [h*, ℓ*]`` from the buffer:

             Λ = I / init_cov_last + Σ_{i filled} L̃_iᵀ R_i⁻¹ L̃_i,     Σ_ℓ = Λ⁻¹   (D_ℓ × D_ℓ)

         with ``L̃_i = ∂m(f(θ*, x_i))/∂ℓ (C, D_ℓ)`` and ``R_i = R(f(θ*, x_i))`` from the likelihood (``Gaussian``:
         ``obs_noise``; ``Bernoulli`` / ``Categorical``: the jittered moment-matched covariance).
predict:    identity (no dynamics: the buffer is the memory).
predictive: linearised in the last layer: ``(m(f(θ*, x)), L̃ Σ_ℓ L̃ᵀ + R)``.
sample:     hidden layers at ``h*``, ``ℓ = ℓ* + chol(Σ_ℓ) z``.

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

from banditkit import rng
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, Posterior, PyTree, SpaceCell, as_obs
from banditkit.posteriors.replay_sgd import (
    FifoBuffer,
    buffer_nll,
    check_buffer_args,
    fifo_init,
    fifo_mask,
    fifo_push,
    resolve_example_x,
)

Array = jax.Array


class LaplaceState(NamedTuple):
    params: Array  # (P,) θ* (MAP of the buffer loss)
    cov_last: Array  # (D_ℓ, D_ℓ) Laplace covariance of the last layer
    opt_state: Any
    buffer: FifoBuffer


def last_layer_laplace(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    last_layer: str = "head",
    buffer_size: int = 20,
    n_inner: int = 50,
    learning_rate: float = 1e-4,
    init_cov_last: float = 1.0,
    optimizer: optax.GradientTransformation | None = None,
    example_x: PyTree | None = None,
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
    check_buffer_args(name, buffer_size, None)
    if not isinstance(n_inner, int) or isinstance(n_inner, bool) or n_inner < 0:
        raise ValueError(f"{name}: n_inner must be an integer >= 0, got {n_inner!r}")
    if not init_cov_last > 0 or not learning_rate > 0:
        raise ValueError(f"{name}: init_cov_last and learning_rate must be > 0, got {init_cov_last!r}, "
                         f"{learning_rate!r}")
    opt = optax.adamw(learning_rate) if optimizer is None else optimizer
    cell = SpaceCell(last_layer)
    default_x = example_x

    def _last_jac(theta: Array, x):
        """``(ŷ, L̃ (C, D_ℓ), R)`` — Jacobian w.r.t. the last layer only (one jacrev over ℓ)."""
        space = cell.space
        h, ell = space.split(space.unravel(theta))

        def mean_and_aux(ll):
            f = jnp.atleast_1d(apply_fn(space.merge(h, ll), x))
            return likelihood.mean(f), f

        jac, f = jax.jacrev(mean_and_aux, has_aux=True)(ell)
        return likelihood.mean(f), jac, likelihood.cov(f)

    def _fit_cov(theta: Array, buf: FifoBuffer) -> Array:
        w = fifo_mask(buf)

        def one(x):
            _, lj, r = _last_jac(theta, x)
            b = linalg.solve_spd_factor(linalg.chol_upper(linalg.symmetrize(r)), lj)  # R⁻¹ L̃
            return lj.T @ b  # L̃ᵀ R⁻¹ L̃

        ggn = jnp.einsum("b,bij->ij", w, jax.vmap(one)(buf.x))
        d = ggn.shape[0]
        prec = linalg.symmetrize(ggn) + jnp.eye(d, dtype=ggn.dtype) / jnp.asarray(init_cov_last, ggn.dtype)
        u = linalg.chol_upper(prec)
        return linalg.symmetrize(linalg.solve_spd_factor(u, jnp.eye(d, dtype=ggn.dtype)))

    def init(params, example_x: PyTree | None = None) -> LaplaceState:
        space = cell.set(params)
        theta = space.ravel(params)
        x0 = resolve_example_x(name, example_x, default_x)
        c = jax.eval_shape(lambda q, xx: jnp.atleast_1d(apply_fn(q, xx)), params, x0).shape[0]
        d = space.size_last
        cov = jnp.asarray(init_cov_last, theta.dtype) * jnp.eye(d, dtype=theta.dtype)
        return LaplaceState(theta, cov, opt.init(theta), fifo_init(x0, jnp.zeros((c,), theta.dtype), buffer_size))

    def update(state: LaplaceState, x, y) -> LaplaceState:
        y = as_obs(y, state.params.dtype)
        if y.shape != state.buffer.y.shape[1:]:
            raise ValueError(f"{name}.update: y has shape {y.shape}, the model predicts {state.buffer.y.shape[1:]}; "
                             f"pass y as (C,)")
        buf = fifo_push(state.buffer, x, y)
        mask = fifo_mask(buf)

        def loss(theta):
            return buffer_nll(apply_fn, likelihood, cell.space.unravel(theta), buf.x, buf.y, mask)

        def body(i, carry):
            theta, o = carry
            upd, o = opt.update(jax.grad(loss)(theta), o, theta)
            return optax.apply_updates(theta, upd), o

        theta, o = jax.lax.fori_loop(0, n_inner, body, (state.params, state.opt_state))
        return LaplaceState(theta, _fit_cov(theta, buf), o, buf)

    def predict(state: LaplaceState) -> LaplaceState:
        return state

    def predictive(state: LaplaceState, x) -> tuple[Array, Array]:
        yhat, lj, r = _last_jac(state.params, x)
        return yhat, linalg.symmetrize(lj @ state.cov_last @ lj.T + r)

    def sample(key: Array, state: LaplaceState):
        space = cell.space
        h, ell = space.split(space.unravel(state.params))
        evals, evecs = jnp.linalg.eigh(state.cov_last)
        z = rng.normal(key, ell.shape, ell.dtype)
        return space.merge(h, ell + evecs @ (jnp.sqrt(jnp.maximum(evals, 0.0)) * z))

    def mean(state: LaplaceState):
        return cell.space.unravel(state.params)

    hyper = dict(last_layer=last_layer, buffer_size=buffer_size, n_inner=n_inner, learning_rate=learning_rate,
                 init_cov_last=init_cov_last, needs_example_x=True)
    return Posterior(init, predict, update, predictive, sample, mean, name=name, hyper=hyper)
