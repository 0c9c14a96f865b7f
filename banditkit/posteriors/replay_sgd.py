"""Replay-SGD: a point estimate trained by optax on a FIFO replay buffer (SGD-RB of seed 000, AdamW of seed 003).

Not a Bayesian posterior: it is the ε-greedy / greedy baseline of the seeds behind the same contract.

State: flat parameters ``θ (P,)``, the optimiser state, a FIFO buffer of the last ``B = buffer_size``
observations (fixed-size arrays: ``x`` is any pytree, stored with a leading buffer axis) and a PRNG key.

:update(x, y):  push ``(x, y)`` into the buffer (the oldest slot is overwritten once full), then ``n_inner``
               optimiser steps on the buffer loss
               ``L(θ) = −(1/|S|) Σ_{i∈S} log p(y_i | f(θ, x_i))``  (``likelihood.log_prob``)
               where ``S`` is the filled slots (``batch_size=None``) or a minibatch of ``batch_size`` slots drawn
               uniformly with replacement from the filled ones.
:predict:       identity (a point estimate has no dynamics).
:predictive:    ``(m(f(θ, x)), R(f(θ, x)))`` — the plug-in prediction with the likelihood's ALEATORIC covariance
               only (there is no epistemic term).
:sample:        returns the point estimate (the key is ignored), so Thompson sampling degenerates to greedy.

The buffer's shapes come from one example input: pass ``example_x=`` to the factory or to ``init``.  The buffer
(``FifoBuffer``, ``fifo_mask``, ``buffer_nll``) and the optimiser loop live in :mod:`banditkit.posteriors._replay`,
shared with the other buffer backends; import them from there.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import _replay as replay
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, PyTree
from banditkit.posteriors.registry import Backend, register

Array = jax.Array


# ---------------------------------------------------------------------------------------------------------------
# the backend


class ReplaySGDState(NamedTuple):
    params: Array  # (P,) flat point estimate θ
    opt_state: Any  # optax state over θ
    buffer: replay.FifoBuffer
    key: Array  # PRNG key for minibatches
    space: ParamSpace  # layout of θ (static, no leaves)


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
    name = "replay_sgd"
    replay.check_buffer_args(name, buffer_size, batch_size)
    replay.check_int(name, "n_inner", n_inner, 0)
    default_x = example_x

    def init(params, example_x: PyTree | None = None) -> ReplaySGDState:
        space = ParamSpace.of(params)
        theta = space.ravel(params)
        buf = replay.buffer_init(name, apply_fn, params, example_x, default_x, buffer_size, theta.dtype)
        return ReplaySGDState(theta, optimizer.init(theta), buf, replay.as_key(key), space)

    def predict(state: ReplaySGDState) -> ReplaySGDState:
        return state

    def update(state: ReplaySGDState, x, y) -> ReplaySGDState:
        buf = replay.buffer_push(name, state.buffer, x, y, state.params.dtype)
        key, sub = jax.random.split(state.key)
        loss = replay.flat_nll(apply_fn, likelihood, state.space)
        theta, opt_state = replay.fit(loss, optimizer, state.params, state.opt_state, buf, n_inner, key=sub,
                                      batch_size=batch_size)
        return ReplaySGDState(theta, opt_state, buf, key, state.space)

    def predictive(state: ReplaySGDState, x) -> tuple[Array, Array]:
        f = jnp.atleast_1d(apply_fn(state.space.unravel(state.params), x))
        return likelihood.mean(f), likelihood.cov(f)

    def sample(key: Array, state: ReplaySGDState):
        del key
        return state.space.unravel(state.params)

    def mean(state: ReplaySGDState):
        return state.space.unravel(state.params)

    hyper = dict(buffer_size=buffer_size, n_inner=n_inner, batch_size=batch_size, needs_example_x=True)
    return Posterior(init, predict, update, predictive, sample, mean, name=name, hyper=hyper)


register(Backend(name="replay_sgd", factory=replay_sgd))
