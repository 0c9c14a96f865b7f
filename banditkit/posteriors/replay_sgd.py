"""Replay-SGD: a point estimate trained by optax on a FIFO replay buffer (SGD-RB of seed 000, AdamW of seed 003).

Not a Bayesian posterior: it is the ε-greedy / greedy baseline of the seeds behind the same contract.

State: flat parameters ``θ (P,)``, the optimiser state, a FIFO buffer of the last ``B = buffer_size``
observations (fixed-size arrays: ``x`` is any pytree, stored with a leading buffer axis) and a PRNG key.

update(x, y):  push ``(x, y)`` into the buffer (the oldest slot is overwritten once full), then ``n_inner``
               optimiser steps on the buffer loss
               ``L(θ) = −(1/|S|) Σ_{i∈S} log p(y_i | f(θ, x_i))``  (``likelihood.log_prob``)
               where ``S`` is the filled slots (``batch_size=None``) or a minibatch of ``batch_size`` slots drawn
               uniformly with replacement from the filled ones.
predict:       identity (a point estimate has no dynamics).
predictive:    ``(m(f(θ, x)), R(f(θ, x)))`` — the plug-in prediction with the likelihood's ALEATORIC covariance
               only (there is no epistemic term).
sample:        returns the point estimate (the key is ignored), so Thompson sampling degenerates to greedy.

The buffer's shapes come from one example input: pass ``example_x=`` to the factory or to ``init``.
The FIFO helpers here (:class:`FifoBuffer`, :func:`fifo_init`, :func:`fifo_push`, :func:`fifo_mask`,
:func:`fifo_batch`) are shared with ``neural_linear``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors.base import ApplyFn, Posterior, PyTree, SpaceCell, as_obs

Array = jax.Array


# ---------------------------------------------------------------------------------------------------------------
# FIFO buffer of fixed-size arrays


class FifoBuffer(NamedTuple):
    x: PyTree  # every leaf (B, ...): the inputs, leading buffer axis
    y: Array  # (B, C)
    count: Array  # () int32, observations pushed so far; the next slot is count % B


def fifo_init(example_x: PyTree, example_y: Array, size: int) -> FifoBuffer:
    """Empty buffer of ``size`` slots shaped like ``example_x`` (any pytree) and ``example_y (C,)``."""
    zeros = lambda a: jnp.zeros((size, *jnp.shape(a)), jnp.result_type(a))
    return FifoBuffer(jax.tree_util.tree_map(zeros, example_x), zeros(example_y), jnp.zeros((), jnp.int32))


def fifo_push(buf: FifoBuffer, x: PyTree, y: Array) -> FifoBuffer:
    """Write ``(x, y)`` into slot ``count % B`` (overwriting the oldest once the buffer is full)."""
    size = buf.y.shape[0]
    i = buf.count % size
    put = lambda b, v: b.at[i].set(jnp.asarray(v, b.dtype).reshape(b.shape[1:]))
    return FifoBuffer(jax.tree_util.tree_map(put, buf.x, x), put(buf.y, y), buf.count + 1)


def fifo_mask(buf: FifoBuffer) -> Array:
    """``(B,)`` 1.0 on filled slots, 0.0 on empty ones (dtype of ``y``)."""
    size = buf.y.shape[0]
    return (jnp.arange(size) < jnp.minimum(buf.count, size)).astype(buf.y.dtype)


def fifo_batch(buf: FifoBuffer, key: Array, batch_size: int | None) -> tuple[PyTree, Array, Array]:
    """``(x, y, weight)`` to train on: the whole buffer with the fill mask (``batch_size=None``), or
    ``batch_size`` filled slots drawn uniformly with replacement (weights 1; all-zero weights if empty)."""
    mask = fifo_mask(buf)
    if batch_size is None:
        return buf.x, buf.y, mask
    size = buf.y.shape[0]
    filled = jnp.minimum(buf.count, size)
    idx = jax.random.randint(key, (batch_size,), 0, jnp.maximum(filled, 1))
    take = lambda a: a[idx]
    weight = jnp.full((batch_size,), 1.0, buf.y.dtype) * (filled > 0)
    return jax.tree_util.tree_map(take, buf.x), buf.y[idx], weight


def buffer_nll(apply_fn: ApplyFn, likelihood: Likelihood, params: PyTree, x: PyTree, y: Array, w: Array) -> Array:
    """Weighted mean negative log-likelihood ``−Σ_i w_i log p(y_i | f(params, x_i)) / max(Σ w, 1)``."""
    logp = jax.vmap(lambda xi, yi: likelihood.log_prob(yi, jnp.atleast_1d(apply_fn(params, xi))))(x, y)
    return -jnp.sum(w * logp) / jnp.maximum(jnp.sum(w), 1.0)


def check_buffer_args(name: str, buffer_size: int, batch_size: int | None) -> None:
    """Clear errors for bad buffer arguments of the buffer-based backends."""
    if not isinstance(buffer_size, int) or isinstance(buffer_size, bool) or buffer_size < 1:
        raise ValueError(f"{name}: buffer_size must be an integer >= 1, got {buffer_size!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"{name}: batch_size must be None (whole buffer) or an integer >= 1, got {batch_size!r}")


def resolve_example_x(name: str, example_x, factory_example_x):
    """The example input given to ``init`` (preferred) or to the factory; a clear error if neither."""
    x = factory_example_x if example_x is None else example_x
    if x is None:
        raise ValueError(
            f"{name} keeps a fixed-size replay buffer and needs the shape of one model input x to allocate it: "
            f"pass example_x=<one input, e.g. (context, one_hot_action)> to the factory or call "
            f"post.init(params, example_x)."
        )
    return jax.tree_util.tree_map(jnp.asarray, x)


def as_key(key) -> Array:
    """A PRNG key from a key array or an int seed."""
    if isinstance(key, int):
        return jax.random.PRNGKey(key)
    return jnp.asarray(key)


# ---------------------------------------------------------------------------------------------------------------
# the backend


class ReplaySGDState(NamedTuple):
    params: Array  # (P,) flat point estimate θ
    opt_state: Any  # optax state over θ
    buffer: FifoBuffer
    key: Array  # PRNG key for minibatches


def replay_sgd(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    buffer_size: int = 20,
    n_inner: int = 5,
    optimizer: optax.GradientTransformation = optax.adam(1e-3),
    batch_size: int | None = None,
    key: Array | int = 0,
    example_x: PyTree | None = None,
) -> Posterior:
    """Point estimate trained by ``optimizer`` on a FIFO buffer (see module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input (``x`` any pytree).
      likelihood: its ``log_prob`` is the training loss; its ``mean``/``cov`` give the plug-in predictive.
      buffer_size: ``B``, number of most recent observations kept (seed 000 sweeps 1–50, seed 003 uses 20).
      n_inner: optimiser steps per ``update`` (seed 000 reference code: 1; seed 003: 50).
      optimizer: any optax ``GradientTransformation`` (acts on the flat parameter vector).
      batch_size: ``None`` = the whole (masked) buffer per step, else a minibatch of that many filled slots.
      key: PRNG key or int seed for minibatch sampling.
      example_x: one model input, to shape the buffer (or pass it to ``init``).
    """
    check_buffer_args("replay_sgd", buffer_size, batch_size)
    if not isinstance(n_inner, int) or isinstance(n_inner, bool) or n_inner < 0:
        raise ValueError(f"replay_sgd: n_inner must be an integer >= 0, got {n_inner!r}")
    cell = SpaceCell()
    default_x = example_x

    def init(params, example_x: PyTree | None = None) -> ReplaySGDState:
        space = cell.set(params)
        theta = space.ravel(params)
        x0 = resolve_example_x("replay_sgd", example_x, default_x)
        out = jax.eval_shape(apply_fn, params, x0)
        y0 = jnp.zeros(out.shape if out.shape else (1,), theta.dtype)
        return ReplaySGDState(theta, optimizer.init(theta), fifo_init(x0, y0, buffer_size), as_key(key))

    def loss(theta: Array, x, y, w) -> Array:
        return buffer_nll(apply_fn, likelihood, cell.space.unravel(theta), x, y, w)

    def train(theta, opt_state, buf: FifoBuffer, key: Array, n_steps):
        """``n_steps`` optimiser steps on the buffer loss (``lax.fori_loop``; ``n_steps`` may be traced)."""

        def body(i, carry):
            theta, opt_state = carry
            xb, yb, wb = fifo_batch(buf, jax.random.fold_in(key, i), batch_size)
            grads = jax.grad(loss)(theta, xb, yb, wb)
            updates, opt_state = optimizer.update(grads, opt_state, theta)
            return optax.apply_updates(theta, updates), opt_state

        return jax.lax.fori_loop(0, n_steps, body, (theta, opt_state))

    def predict(state: ReplaySGDState) -> ReplaySGDState:
        return state

    def update(state: ReplaySGDState, x, y) -> ReplaySGDState:
        y = as_obs(y, state.params.dtype)
        if y.shape != state.buffer.y.shape[1:]:
            raise ValueError(f"replay_sgd.update: y has shape {y.shape}, the model predicts "
                             f"{state.buffer.y.shape[1:]}; pass y as (C,)")
        buf = fifo_push(state.buffer, x, y)
        key, sub = jax.random.split(state.key)
        theta, opt_state = train(state.params, state.opt_state, buf, sub, n_inner)
        return ReplaySGDState(theta, opt_state, buf, key)

    def predictive(state: ReplaySGDState, x) -> tuple[Array, Array]:
        f = jnp.atleast_1d(apply_fn(cell.space.unravel(state.params), x))
        return likelihood.mean(f), likelihood.cov(f)

    def sample(key: Array, state: ReplaySGDState):
        del key
        return cell.space.unravel(state.params)

    def mean(state: ReplaySGDState):
        return cell.space.unravel(state.params)

    hyper = dict(buffer_size=buffer_size, n_inner=n_inner, batch_size=batch_size, needs_example_x=True)
    return Posterior(init, predict, update, predictive, sample, mean, name="replay_sgd", hyper=hyper)
