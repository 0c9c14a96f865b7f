"""Neural-linear (Riquelme et al. 2018, as used in seed 002 §3): Normal-Inverse-Gamma Bayesian linear
regression on the last layer, the body a point estimate retrained periodically on a bounded FIFO buffer.

Parameters split by path into the body ``h (D_h,)`` and the last layer ``ℓ (D_ℓ,)`` (``last_layer="head"``).
Design rows: ``Φ(x) = ∂f(h, ℓ; x)/∂ℓ (C, D_ℓ)`` and offset ``o(x) = f(h, 0; x) (C,)``, so that
``f = o + Φ ℓ`` exactly whenever the output is affine in ``ℓ`` — true for a ``Dense`` head, where ``Φ`` places
the features ``φ(x)`` in the block of each output (plus a 1 for its bias), and for a multi-output head observed
through a one-hot selection ``f(x)·e_a`` (then ``Φ`` touches only arm ``a``'s block: Riquelme's per-arm
regressions, here with one noise variance ``σ²`` shared by all arms).  A non-affine head is linearised at ``ℓ=0``.

Model: ``y | ℓ, σ² ~ N(o + Φ ℓ, σ² I_C)``, ``ℓ | σ² ~ N(0, σ² Σ_0)``, ``σ² ~ IG(a_0, b_0)``, ``Σ_0 = init_cov·I``
(``init_cov = 1/λ``).  Sufficient statistics over the observations ``i`` currently represented
(``r_i = y_i − o_i``):
    ``Λ = Σ_0⁻¹ + Σ_i Φ_iᵀ Φ_i``,  ``ψ = Σ_i Φ_iᵀ r_i``,  ``s = Σ_i ‖r_i‖²``,  ``n = C · #obs``
Posterior (seed 002 eqs. 17–20 with ``μ_0 = 0``):
    ``Σ = Λ⁻¹``,  ``μ = Λ⁻¹ ψ``,  ``a = a_0 + n/2``,  ``b = b_0 + ½ (s − ψᵀ μ)``
computed with one Cholesky ``Λ = UᵀU`` per update.

update(x, y): push ``(x, y)`` into the FIFO buffer (``buffer_size`` slots); ``step ← step + 1``; then
  * if ``step % train_every ≠ 0``: add the observation to ``(Λ, ψ, s, n)`` (exact rank-C conjugate update);
  * else RETRAIN: ``n_train_steps`` optax steps on the buffer loss ``−mean log p(y_i | f(h, ℓ_sgd; x_i))`` over the
    body and an SGD copy of the head ``ℓ_sgd`` (warm-started, optimiser state kept), then RECOMPUTE the
    statistics from scratch from the buffer with the new features (Riquelme's Alg. 3, with limited memory:
    observations that have left the buffer are forgotten at this point; ``buffer_size ≥ T`` gives the
    unlimited-memory version).
  The branch is chosen with dynamic trip counts (``lax.fori_loop(0, n, …)`` with ``n = n_train_steps`` or 0,
  and a 0/1-iteration loop for the recomputation) instead of ``lax.cond``: under ``vmap`` over seeds a
  ``cond`` becomes a ``select`` that would pay for the retraining at every step.
predict: identity (no dynamics).
predictive: ``mean = o + Φ μ``; ``cov = E[σ²] (Φ Σ Φᵀ + I_C)`` with ``E[σ²] = b/(a−1)`` (the covariance of the
  Student-t predictive; ``b/a`` while ``a ≤ 1``) — epistemic + aleatoric.
sample: ``σ̃² ~ IG(a, b)``, then ``ℓ̃ ~ N(μ, σ̃² Σ)`` (``ℓ̃ = μ + σ̃ U⁻¹ z``); the body at its point estimate.
mean: body point estimate with ``ℓ = μ``.

The buffer's shapes come from one example input: pass ``example_x=`` to the factory or to ``init``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.scipy.linalg import solve_triangular

from banditkit import linalg
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors.base import ApplyFn, Posterior, PyTree, SpaceCell, as_obs
from banditkit.posteriors.replay_sgd import (
    FifoBuffer,
    as_key,
    buffer_nll,
    check_buffer_args,
    fifo_batch,
    fifo_init,
    fifo_mask,
    fifo_push,
    resolve_example_x,
)

Array = jax.Array


class NIGStats(NamedTuple):
    prec: Array  # (D_ℓ, D_ℓ) Λ = Σ_0⁻¹ + Σ ΦᵀΦ
    shift: Array  # (D_ℓ,) ψ = Σ Φᵀ r
    sq: Array  # () s = Σ ‖r‖²
    count: Array  # () n, number of scalar observations


class NeuralLinearState(NamedTuple):
    hidden: Array  # (D_h,) body point estimate h
    head_sgd: Array  # (D_ℓ,) SGD copy of the head (trained with the body)
    opt_state: Any  # optax state over (h, ℓ_sgd)
    stats: NIGStats
    mean_last: Array  # (D_ℓ,) μ
    chol: Array  # (D_ℓ, D_ℓ) upper U with Λ = UᵀU
    a: Array  # () IG shape
    b: Array  # () IG scale
    buffer: FifoBuffer
    step: Array  # () int32, updates so far
    key: Array


def neural_linear(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    last_layer: str = "head",
    buffer_size: int = 1024,
    train_every: int = 100,
    n_train_steps: int = 100,
    optimizer: optax.GradientTransformation = optax.adam(1e-3),
    batch_size: int | None = None,
    a0: float = 6.0,
    b0: float = 6.0,
    init_cov: float = 4.0,
    key: Array | int = 0,
    example_x: PyTree | None = None,
) -> Posterior:
    """Neural-linear: NIG Bayesian linear regression on the last layer, body retrained on a FIFO buffer.

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: must be ``Gaussian`` (the NIG model learns the noise variance itself; ``obs_noise`` only
        scales the retraining loss).
      last_layer: path name of the last-layer submodule (the Bayesian block).
      buffer_size: FIFO capacity (seed 002 reference code: 20/50 "limited", ~5000 "unlimited").
      train_every: retrain the body every this many updates (``T_u = 100`` in the reference code).
      n_train_steps: optimiser steps per retraining (100 in the reference code).
      optimizer: optax transformation for the body + SGD head.
      batch_size: ``None`` = full (masked) buffer per step, else minibatches of that size.
      a0, b0: Inverse-Gamma prior of ``σ²`` (6, 6 in the reference code).
      init_cov: ``Σ_0 = init_cov·I``, i.e. ``1/λ`` (``λ = 0.25`` in the reference code).
      key: PRNG key or int seed for minibatches.
      example_x: one model input, to shape the buffer (or pass it to ``init``).
    """
    if not isinstance(likelihood, Gaussian):
        raise TypeError(
            f"neural_linear is a Normal-Inverse-Gamma regression and needs a Gaussian likelihood, got "
            f"{type(likelihood).__name__}; use e.g. lofi/hilofi for Bernoulli or Categorical observations."
        )
    check_buffer_args("neural_linear", buffer_size, batch_size)
    for name, v in (("train_every", train_every), ("n_train_steps", n_train_steps)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"neural_linear: {name} must be an integer >= 1, got {v!r}")
    for name, v in (("a0", a0), ("b0", b0), ("init_cov", init_cov)):
        if isinstance(v, (int, float)) and not v > 0:
            raise ValueError(f"neural_linear: {name} must be > 0, got {v}")
    cell = SpaceCell(last_layer)
    default_x = example_x

    # ---- the last-layer regression ------------------------------------------------------------------------
    def design(h: Array, x) -> tuple[Array, Array]:
        """``(Φ (C, D_ℓ), o (C,))`` at ``ℓ = 0``."""
        s = cell.space
        f = lambda ell: jnp.atleast_1d(apply_fn(s.merge(h, ell), x))
        zero = jnp.zeros((s.size_last,), h.dtype)
        return jax.jacrev(f)(zero), f(zero)

    def prior_stats(dtype) -> NIGStats:
        d = cell.space.size_last
        return NIGStats(jnp.eye(d, dtype=dtype) / jnp.asarray(init_cov, dtype), jnp.zeros((d,), dtype),
                        jnp.zeros((), dtype), jnp.zeros((), dtype))

    def add_obs(st: NIGStats, phi: Array, resid: Array, w: Array | float = 1.0) -> NIGStats:
        return NIGStats(st.prec + w * phi.T @ phi, st.shift + w * phi.T @ resid,
                        st.sq + w * jnp.sum(resid**2), st.count + w * resid.shape[0])

    def stats_from_buffer(h: Array, buf: FifoBuffer) -> NIGStats:
        phi, off = jax.vmap(lambda x: design(h, x))(buf.x)  # (B, C, D_ℓ), (B, C)
        resid = buf.y - off
        m = fifo_mask(buf)
        st = prior_stats(h.dtype)
        return NIGStats(st.prec + jnp.einsum("b,bci,bcj->ij", m, phi, phi), jnp.einsum("b,bci,bc->i", m, phi, resid),
                        jnp.sum(m[:, None] * resid**2), jnp.sum(m) * resid.shape[1])

    def nig_posterior(st: NIGStats):
        u = linalg.chol_upper(linalg.symmetrize(st.prec))
        mu = linalg.solve_spd_factor(u, st.shift[:, None])[:, 0]
        a = jnp.asarray(a0, mu.dtype) + 0.5 * st.count
        b0_ = jnp.asarray(b0, mu.dtype)
        b = jnp.maximum(b0_ + 0.5 * (st.sq - st.shift @ mu), b0_)  # ≥ b0 exactly; guard roundoff
        return mu, u, a, b

    # ---- the body ---------------------------------------------------------------------------------------------
    def loss(hl, x, y, w):
        return buffer_nll(apply_fn, likelihood, cell.space.merge(*hl), x, y, w)

    def train(h, ell, opt_state, buf, key, n_steps):
        def body(i, carry):
            hl, opt_state = carry
            xb, yb, wb = fifo_batch(buf, jax.random.fold_in(key, i), batch_size)
            grads = jax.grad(loss)(hl, xb, yb, wb)
            updates, opt_state = optimizer.update(grads, opt_state, hl)
            return optax.apply_updates(hl, updates), opt_state

        (h, ell), opt_state = jax.lax.fori_loop(0, n_steps, body, ((h, ell), opt_state))
        return h, ell, opt_state

    # ---- the contract -----------------------------------------------------------------------------------------
    def init(params, example_x: PyTree | None = None) -> NeuralLinearState:
        space = cell.set(params)
        h, ell = space.split(params)
        x0 = resolve_example_x("neural_linear", example_x, default_x)
        out = jax.eval_shape(apply_fn, params, x0)
        y0 = jnp.zeros(out.shape if out.shape else (1,), h.dtype)
        st = prior_stats(h.dtype)
        d = space.size_last
        # prior posterior in closed form (no factorisation): μ = 0, U = I/√init_cov, a = a0, b = b0
        mu, u = jnp.zeros((d,), h.dtype), jnp.eye(d, dtype=h.dtype) / jnp.sqrt(jnp.asarray(init_cov, h.dtype))
        a, b = jnp.asarray(a0, h.dtype), jnp.asarray(b0, h.dtype)
        return NeuralLinearState(h, ell, optimizer.init((h, ell)), st, mu, u, a, b,
                                 fifo_init(x0, y0, buffer_size), jnp.zeros((), jnp.int32), as_key(key))

    def predict(state: NeuralLinearState) -> NeuralLinearState:
        return state

    def update(state: NeuralLinearState, x, y) -> NeuralLinearState:
        dt = state.hidden.dtype
        y = as_obs(y, dt)
        if y.shape != state.buffer.y.shape[1:]:
            raise ValueError(f"neural_linear.update: y has shape {y.shape}, the model predicts "
                             f"{state.buffer.y.shape[1:]}; pass y as (C,)")
        buf = fifo_push(state.buffer, x, y)
        step = state.step + 1
        retrain = step % train_every == 0
        key, sub = jax.random.split(state.key)
        n_sgd = jnp.where(retrain, n_train_steps, 0)
        h, ell, opt_state = train(state.hidden, state.head_sgd, state.opt_state, buf, sub, n_sgd)
        # retraining step: statistics recomputed from the buffer (0 or 1 iteration: no cost on other steps)
        refit = jax.lax.fori_loop(0, retrain.astype(jnp.int32), lambda _, st: stats_from_buffer(h, buf),
                                  state.stats)
        phi, off = design(h, x)
        incremental = add_obs(state.stats, phi, y - off)
        st = jax.tree_util.tree_map(lambda r, i: jnp.where(retrain, r, i), refit, incremental)
        mu, u, a, b = nig_posterior(st)
        return NeuralLinearState(h, ell, opt_state, st, mu, u, a, b, buf, step, key)

    def predictive(state: NeuralLinearState, x) -> tuple[Array, Array]:
        phi, off = design(state.hidden, x)
        z = solve_triangular(state.chol, phi.T, trans="T", lower=False)  # U⁻ᵀ Φᵀ (D_ℓ, C)
        var = jnp.where(state.a > 1, state.b / (state.a - 1), state.b / state.a)
        eye = jnp.eye(phi.shape[0], dtype=phi.dtype)
        return off + phi @ state.mean_last, linalg.symmetrize(var * (z.T @ z + eye))

    def sample(key: Array, state: NeuralLinearState):
        k1, k2 = jax.random.split(key)
        dt = state.mean_last.dtype
        sigma2 = state.b / jax.random.gamma(k1, state.a, dtype=dt)
        z = jax.random.normal(k2, state.mean_last.shape, dt)
        ell = state.mean_last + jnp.sqrt(sigma2) * solve_triangular(state.chol, z, lower=False)
        return cell.space.merge(state.hidden, ell)

    def mean(state: NeuralLinearState):
        return cell.space.merge(state.hidden, state.mean_last)

    hyper = dict(last_layer=last_layer, buffer_size=buffer_size, train_every=train_every,
                 n_train_steps=n_train_steps, batch_size=batch_size, a0=a0, b0=b0, init_cov=init_cov,
                 needs_example_x=True)
    return Posterior(init, predict, update, predictive, sample, mean, name="neural_linear", hyper=hyper)
