"""The functional JAX form of a bandit environment, for compiled runs (``lax.scan`` over time, ``vmap`` over seeds).

``env.unwrapped.functional(seed, steps)`` returns a :class:`FunctionalBandit` holding the whole episode as arrays
(contexts pool, the index of the context shown at each round, realised and expected rewards of every arm with the
noise pre-drawn).  :func:`step` and :func:`observation` are pure functions of it, so::

    fb = env.unwrapped.functional(seed=0, steps=T)
    def body(carry, t):
        x = observation(fb, t)
        a = choose(carry, x)
        r, r_exp, r_opt = step(fb, t, a)
        return update(carry, x, a, r), r_opt - r_exp
    _, regret = jax.lax.scan(body, init, jnp.arange(T))

gives exactly the numbers of the Gymnasium loop ``reset(seed=seed)`` + ``T`` calls of ``step`` (same tables).
Per-arm-feature environments (KuaiRec) have ``contexts (N, K, F)``; the observation is then the ``(K, F)`` matrix
of arm features.

**Play and evaluation are two interfaces.**  An agent's loop needs only what a deployed agent sees: the contexts and
the reward of the arm it chose — a :class:`BanditStream` (``env.unwrapped.stream(seed, steps)``).  The expected
reward of every arm (``env.unwrapped.oracle(seed, steps)``, ``(steps, K)``) is the simulator's answer: only regret is
computed from it, after the agent has chosen, and nothing on the agent's side (``make_agent``, the agents, the
policies, the serving agent) ever reads it.  :class:`FunctionalBandit` is the two together
(``FunctionalBandit.stream`` gives the play part back).
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jax import Array


class BanditStream(NamedTuple):
    """What a bandit loop plays: the contexts shown and every arm's realised reward, of which the loop hands the
    agent only the chosen arm's.

    contexts: ``(N, *obs_shape)`` float32 pool of contexts (``N`` may be < steps; rows are indexed).
    index:    ``(steps,)`` int32: ``contexts[index[t]]`` is the observation at round ``t``.
    rewards:  ``(steps, K)`` float32: realised reward of each arm at round ``t`` (noise pre-drawn).
    """

    contexts: Array
    index: Array
    rewards: Array


class FunctionalBandit(NamedTuple):
    """One episode of a bandit environment as arrays.

    contexts: ``(N, *obs_shape)`` float32 pool of contexts (``N`` may be < steps; rows are indexed).
    index:    ``(steps,)`` int32: ``contexts[index[t]]`` is the observation at round ``t``.
    rewards:  ``(steps, K)`` float32: realised reward of each arm at round ``t`` (noise pre-drawn).
    expected: ``(steps, K)`` float32: expected reward of each arm at round ``t``.
    """

    contexts: Array
    index: Array
    rewards: Array
    expected: Array

    @property
    def stream(self) -> BanditStream:
        """The play part (contexts, index, rewards), without the expected rewards."""
        return BanditStream(self.contexts, self.index, self.rewards)


def observation(fb: FunctionalBandit | BanditStream, t: Array | int) -> Array:
    """The context shown at round ``t``: ``contexts[index[t]]``."""
    return fb.contexts[fb.index[t]]


def step(fb: FunctionalBandit, t: Array | int, action: Array | int) -> tuple[Array, Array, Array]:
    """``(reward, expected reward of action, optimal expected reward)`` at round ``t``.

    Regret at ``t`` is ``optimal - expected``; ``action`` must lie in ``[0, K)`` (not checked inside ``jit``).
    """
    exp_t = fb.expected[t]
    return fb.rewards[t, action], exp_t[action], jnp.max(exp_t)


def num_steps(fb: FunctionalBandit | BanditStream) -> int:
    """Number of rounds in the episode."""
    return int(fb.index.shape[0])
