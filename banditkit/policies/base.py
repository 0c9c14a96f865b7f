"""The policy interface: a pure scoring rule over K candidates (bandit arms or BO candidate points).

A policy never sees the model or the environment.  It sees the posterior, its state and two functions that
describe the K candidates, and returns one score per candidate; the decision is the ``argmax``::

    scores = policy.score(key, posterior, state, reward_fn, moments_fn, best=None)   # (K,)
    index = policy.choose(key, posterior, state, reward_fn, moments_fn, best=None)   # int32 = argmax(scores)

``reward_fn(params) -> (K,)``
    expected reward of every candidate under one parameter pytree (the likelihood's mean link applied),
    used with a posterior draw (parameter Thompson sampling) or the posterior mean (greedy, ε-greedy).
``moments_fn(state) -> (mean (K,), var (K,))``
    predictive mean and variance of every candidate's reward (``posterior.predictive``: epistemic + aleatoric),
    used by UCB, EI, PI and predictive Thompson sampling.
``best``
    incumbent for EI / PI (BO: best value observed so far); ``None`` uses the largest predictive mean.
``reward_fn.draw(key, state) -> (K,)`` (optional: a :class:`Rewards`)
    a posterior draw of the K expected rewards, ``E[r_k | θ̃]`` with ``θ̃ ~ q(θ)``, taken without a full parameter draw
    (``posterior.sample_outputs``: the head's outputs drawn given the other parameters' draw); parameter Thompson
    sampling uses it where present.  :func:`point_candidates` / :func:`output_candidates` attach it with
    ``affine_head=True`` when the posterior declares ``sample_outputs``.

Both functions are called lazily inside the policy, so a policy that needs only one of them never traces the
other (e.g. greedy costs one forward pass).  Everything is a pure function of ``key``: a policy can be
``jit``-ed, ``vmap``-ed over seeds and run inside ``lax.scan``.  Build the two functions with
:func:`point_candidates` (one input per candidate: BO points, per-arm features) or
:func:`output_candidates` (one multi-output network whose K outputs are the arms).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from banditkit.likelihoods import Gaussian
from banditkit.posteriors.base import Posterior

Array = jax.Array
PyTree = Any
RewardFn = Callable[[PyTree], Array]
MomentsFn = Callable[[Any], tuple[Array, Array]]


class Policy(NamedTuple):
    """A decision rule: ``score(key, posterior, state, reward_fn, moments_fn, best=None) -> (K,)``.

    ``name`` and ``hyper`` record the rule and its hyper-parameters.  :meth:`choose` is the ``argmax`` of the
    scores (ties go to the lowest index).
    """

    score: Callable[..., Array]
    name: str = ""
    hyper: dict = {}

    def choose(
        self,
        key: Array,
        posterior: Posterior,
        state: Any,
        reward_fn: RewardFn,
        moments_fn: MomentsFn,
        best: Array | float | None = None,
    ) -> Array:
        """Index (int32 scalar) of the candidate with the highest score."""
        return jnp.argmax(self.score(key, posterior, state, reward_fn, moments_fn, best)).astype(jnp.int32)


def _link(likelihood):
    return (likelihood if likelihood is not None else Gaussian()).mean


class Rewards:
    """``reward_fn`` with a cheaper Thompson draw: ``Rewards(fn, draw)(params) = fn(params)``, and ``.draw(key, state)
    -> (K,)`` has the law of ``fn(posterior.sample(key, state))`` (see the module docstring)."""

    __slots__ = ("fn", "draw")

    def __init__(self, fn: RewardFn, draw: Callable[[Array, Any], Array]):
        self.fn, self.draw = fn, draw

    def __call__(self, params) -> Array:
        return self.fn(params)


def _with_draw(reward_fn: RewardFn, posterior: Posterior, outputs: Callable, link, affine_head: bool) -> RewardFn:
    """``reward_fn`` as :class:`Rewards` with ``draw = link(posterior.sample_outputs(key, state, outputs))`` when the
    outputs are affine in the posterior's last layer (``affine_head``) and the posterior declares the hook."""
    if not affine_head or getattr(posterior, "sample_outputs", None) is None:
        return reward_fn
    return Rewards(reward_fn, lambda key, state: link(posterior.sample_outputs(key, state, outputs)))


def point_candidates(
    posterior: Posterior, apply_fn: Callable, inputs: PyTree, likelihood=None, *, affine_head: bool = False
) -> tuple[RewardFn, MomentsFn]:
    """``(reward_fn, moments_fn)`` for K candidates that are K inputs of a scalar-output model.

    Args:
      posterior: the posterior whose ``apply_fn`` is ``apply_fn``.
      apply_fn: ``apply_fn(params, x) -> (1,)`` for one candidate input.
      inputs: pytree whose leaves have a leading axis K (BO points ``(K, D)``, per-arm features ``(K, F)``).
      likelihood: its ``mean`` maps the model output to the expected reward (``None``: identity).
      affine_head: ``apply_fn`` is affine in the posterior's last layer (a ``Dense`` head, as every
        ``banditkit.models`` net): ``reward_fn`` gets the posterior's ``sample_outputs`` draw, if it declares one.

    ``reward_fn(params) = m(f(params, x_k))_k`` and ``moments_fn(state) = (ŷ_k, S_k[0, 0])_k`` from
    ``posterior.predictive`` (vmapped over the candidates).
    """
    link = _link(likelihood)

    def outputs(params):
        return jax.vmap(lambda x: jnp.atleast_1d(apply_fn(params, x))[0])(inputs)

    def link_each(f):  # each candidate's own (1,) output through the link
        return jax.vmap(lambda v: link(v[None])[0])(f)

    def reward_fn(params):
        return jax.vmap(lambda x: link(jnp.atleast_1d(apply_fn(params, x)))[0])(inputs)

    def moments_fn(state):
        mean, cov = jax.vmap(lambda x: posterior.predictive(state, x))(inputs)
        return mean[:, 0], cov[:, 0, 0]

    return _with_draw(reward_fn, posterior, outputs, link_each, affine_head), moments_fn


def output_candidates(
    posterior: Posterior, model_fn: Callable, context: PyTree, num_outputs: int, likelihood=None, *,
    affine_head: bool = False
) -> tuple[RewardFn, MomentsFn]:
    """``(reward_fn, moments_fn)`` for K arms that are the K outputs of one network ``f(params, context) (K,)``.

    The posterior must have been built on the selected-output model
    ``apply_fn(params, (context, one_hot(a))) = f(params, context) · one_hot(a)  (1,)`` (see
    ``banditkit.agents``); ``model_fn(params, context) -> (K,)`` is ``f`` itself.

    ``reward_fn(params) = m(f(params, context))`` (one forward pass) and ``moments_fn`` calls
    ``posterior.predictive(state, (context, e_k))`` for every arm ``k``.  ``affine_head``: as
    :func:`point_candidates` (``f`` affine in the posterior's last layer).
    """
    link = _link(likelihood)

    def outputs(params):
        return model_fn(params, context)

    def reward_fn(params):
        return link(outputs(params))

    def moments_fn(state):
        eye = jnp.eye(num_outputs, dtype=jnp.result_type(float))
        mean, cov = jax.vmap(lambda e: posterior.predictive(state, (context, e)))(eye)
        return mean[:, 0], cov[:, 0, 0]

    return _with_draw(reward_fn, posterior, outputs, link, affine_head), moments_fn
