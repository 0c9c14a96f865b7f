"""The replay buffer and its optimiser loop, shared by the buffer backends (``replay_sgd``, ``neural_linear``,
``last_layer_laplace``, ``vbll`` / ``online_vbll``).

Buffer: :class:`FifoBuffer` keeps the last ``B`` observations in fixed-size arrays (``x`` any pytree, each leaf with a
leading buffer axis ``(B, ...)``; ``y (B, C)``; ``count`` observations pushed so far).  Observation ``t`` (0-based)
lives in slot ``t mod B``; slot ``i`` is filled iff ``i < min(count, B)``.

Fit (:func:`fit`): ``n`` optimiser steps ``θ ← θ + optimizer.update(∇L(θ; S_i))`` on the weighted buffer loss

    ``L(θ; S) = loss(θ, x_S, y_S, w_S)``,

where ``S_i`` is the whole buffer with weights ``w = 1[slot filled]`` (``batch_size=None``) or ``batch_size`` filled
slots drawn uniformly with replacement with key ``fold_in(key, i)`` (weights 1).  The loop is a
``lax.fori_loop(0, n)``, so ``n`` may be traced (a zero-trip loop on the steps that do not train).

Also here: :func:`buffer_nll` (the weighted mean negative log-likelihood), :func:`head_jacobian` (the last-layer
Jacobian the last-layer backends read their features from), :func:`sample_last_layer` (a draw ``ℓ = ℓ̄ + F z`` of the
last layer with the hidden block at its point estimate) and the argument checks the four factories share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from banditkit._xla import flat_random as rng
from banditkit.likelihoods import Likelihood
from banditkit.posteriors.base import ApplyFn, ParamSpace, PyTree, as_obs

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


def fifo_batch(buf: FifoBuffer, key: Array | None, batch_size: int | None) -> tuple[PyTree, Array, Array]:
    """``(x, y, weight)`` to train on: the whole buffer with the fill mask (``batch_size=None``; ``key`` unused), or
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


def buffer_init(name: str, apply_fn: ApplyFn, params: PyTree, example_x, factory_example_x, size: int,
                dtype) -> FifoBuffer:
    """Empty buffer of ``size`` slots for inputs shaped like the example input (``init``'s, else the factory's) and
    observations ``(C,)`` shaped like the model's output ``atleast_1d(apply_fn(params, x))`` (dtype ``dtype``)."""
    x0 = resolve_example_x(name, example_x, factory_example_x)
    out = jax.eval_shape(lambda p, x: jnp.atleast_1d(apply_fn(p, x)), params, x0)
    return fifo_init(x0, jnp.zeros(out.shape, dtype), size)


def buffer_push(name: str, buf: FifoBuffer, x: PyTree, y, dtype) -> FifoBuffer:
    """:func:`fifo_push` of ``(x, y)`` with ``y`` as a ``(C,)`` observation of ``dtype``; a clear error if its shape
    is not the model's output shape."""
    y = as_obs(y, dtype)
    if y.shape != buf.y.shape[1:]:
        raise ValueError(f"{name}.update: y has shape {y.shape}, the model predicts {buf.y.shape[1:]}; pass y as (C,)")
    return fifo_push(buf, x, y)


# ---------------------------------------------------------------------------------------------------------------
# the fit


def buffer_nll(apply_fn: ApplyFn, likelihood: Likelihood, params: PyTree, x: PyTree, y: Array, w: Array) -> Array:
    """Weighted mean negative log-likelihood ``−Σ_i w_i log p(y_i | f(params, x_i)) / max(Σ w, 1)``."""
    logp = jax.vmap(lambda xi, yi: likelihood.log_prob(yi, jnp.atleast_1d(apply_fn(params, xi))))(x, y)
    return -jnp.sum(w * logp) / jnp.maximum(jnp.sum(w), 1.0)


def flat_nll(apply_fn: ApplyFn, likelihood: Likelihood, space: ParamSpace) -> Callable[..., Array]:
    """``loss(θ (P,), x, y, w)``: :func:`buffer_nll` at the flat parameter vector ``θ`` of layout ``space``."""
    return lambda theta, x, y, w: buffer_nll(apply_fn, likelihood, space.unravel(theta), x, y, w)


def fit(
    loss: Callable[..., Array],
    optimizer: optax.GradientTransformation,
    params: PyTree,
    opt_state: Any,
    buf: FifoBuffer,
    n_steps,
    *,
    key: Array | None = None,
    batch_size: int | None = None,
) -> tuple[PyTree, Any]:
    """``(params, opt_state)`` after ``n_steps`` optimiser steps on ``loss(params, x, y, w)`` over the buffer.

    Step ``i`` takes the batch :func:`fifo_batch` ``(buf, fold_in(key, i), batch_size)`` (the whole buffer with its
    fill mask when ``batch_size=None``, then ``key`` may be ``None``), its gradient ``g = ∇loss``, and
    ``params ← apply_updates(params, optimizer.update(g, opt_state, params))``.  ``params`` may be any pytree;
    ``n_steps`` may be traced (``lax.fori_loop``).
    """
    if batch_size is not None and key is None:
        raise ValueError("fit: minibatches (batch_size=int) need a PRNG key")

    def body(i, carry):
        params, opt_state = carry
        sub = None if key is None else jax.random.fold_in(key, i)
        xb, yb, wb = fifo_batch(buf, sub, batch_size)
        grads = jax.grad(loss)(params, xb, yb, wb)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return jax.lax.fori_loop(0, n_steps, body, (params, opt_state))


# ---------------------------------------------------------------------------------------------------------------
# last-layer features


def head_jacobian(apply_fn: ApplyFn, space: ParamSpace, h: Array, ell: Array, x,
                  link: Callable[[Array], Array] | None = None) -> tuple[Array, Array]:
    """``(f (C,), J (C, D_ℓ))``: the output ``f = f(merge(h, ℓ), x)`` and ``J = ∂g(f)/∂ℓ`` with ``g = link``
    (the identity by default, then ``J = Φ`` the last-layer features).  One reverse pass over ``ℓ`` only; the
    forward pass it shares with ``f`` is merged by XLA."""

    def out(e):
        return jnp.atleast_1d(apply_fn(space.merge(h, e), x))

    return out(ell), jax.jacrev(out if link is None else lambda e: link(out(e)))(ell)


def sample_last_layer(key: Array, space: ParamSpace, theta: Array, factor: Array) -> PyTree:
    """One draw as a parameter pytree: the hidden block ``h`` at its value in ``θ (P,)`` and the last layer
    ``ℓ = ℓ̄ + F z``, ``z ~ N(0, I_{D_ℓ})``, with ``ℓ̄`` the last-layer block of ``θ`` and ``F (D_ℓ, D_ℓ)`` a factor of
    the last layer's covariance (``F Fᵀ = Σ_ℓ``)."""
    h, ell = space.split(space.unravel(theta))
    z = rng.normal(key, ell.shape, ell.dtype)
    return space.merge(h, ell + factor @ z)


# ---------------------------------------------------------------------------------------------------------------
# arguments


def check_int(name: str, what: str, value, minimum: int) -> None:
    """``ValueError`` unless ``value`` is an int ``≥ minimum`` (``bool`` refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}: {what} must be an integer >= {minimum}, got {value!r}")


def check_buffer_args(name: str, buffer_size: int, batch_size: int | None) -> None:
    """Clear errors for bad buffer arguments of the buffer-based backends."""
    check_int(name, "buffer_size", buffer_size, 1)
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise ValueError(f"{name}: batch_size must be None (whole buffer) or an integer >= 1, got {batch_size!r}")


def check_fit_args(name: str, buffer_size: int, n_inner: int, learning_rate: float,
                   optimizer: optax.GradientTransformation | None, **positive: float) -> optax.GradientTransformation:
    """Clear errors for the arguments of the backends trained by optax on the whole buffer (``last_layer_laplace``,
    ``vbll``): ``buffer_size ≥ 1`` and ``n_inner ≥ 0`` integers, ``learning_rate`` and every ``positive`` value
    ``> 0``.  Returns the optimiser they train with: ``optimizer``, or ``adamw(learning_rate)`` when it is ``None``."""
    check_buffer_args(name, buffer_size, None)
    check_int(name, "n_inner", n_inner, 0)
    for what, v in dict(**positive, learning_rate=learning_rate).items():
        if not v > 0:
            raise ValueError(f"{name}: {what} must be > 0, got {v!r}")
    return optax.adamw(learning_rate) if optimizer is None else optimizer


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
