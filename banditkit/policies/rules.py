"""The decision rules.  Each factory returns a :class:`~banditkit.policies.base.Policy` whose ``score`` is

``thompson("parameter")``   ``θ̃ ~ q(θ)`` (``posterior.sample``);  ``s_k = E[r_k | θ̃]``  (seeds 000, 002, 004); the
                            draw of ``reward_fn.draw`` where the candidates have one (same law, no full ``θ̃``)
``thompson("predictive")``  ``s_k = μ_k + σ_k ε_k``, ``ε_k ~ N(0, 1)`` independent: a draw of each candidate's
                            predictive reward (seed 003 §3.1)
``ucb(beta)``               ``s_k = μ_k + β σ_k``                 (``σ_k²`` the predictive variance)
``greedy()``                ``s_k = E[r_k | θ̂]``, ``θ̂ = posterior.mean(state)``
``epsilon_greedy(ε)``       greedy scores; with probability ε they are replaced by i.i.d. U(0, 1) scores, so the
                            argmax is a uniformly random candidate
``expected_improvement(ξ)`` ``s_k = EI(μ_k, σ_k; best, ξ)``  (``best = None``: the largest ``μ_k``)
``probability_of_improvement(ξ)`` ``s_k = PI(μ_k, σ_k; best, ξ)``

``(μ_k, σ_k²)`` come from ``moments_fn(state)``.  All rules are for maximisation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from banditkit._xla import flat_random as rng
from banditkit.policies.acquisition import (
    expected_improvement_score,
    probability_of_improvement_score,
    ucb_score,
)
from banditkit.policies.base import Policy


def _std(var):
    return jnp.sqrt(jnp.maximum(var, 0.0))


def thompson(variant: str = "parameter") -> Policy:
    """Thompson sampling.

    Args:
      variant: ``"parameter"`` draws one parameter vector from the posterior and scores every candidate with it
        (one consistent function draw; the seeds' default); ``"predictive"`` draws each candidate's reward from
        its own predictive ``N(μ_k, σ_k²)`` (independent across candidates; seed 003's bandit variant).
    """
    if variant not in ("parameter", "predictive"):
        raise ValueError(f"thompson(variant={variant!r}): choose 'parameter' or 'predictive'")

    if variant == "parameter":

        def score(key, posterior, state, reward_fn, moments_fn, best=None):
            draw = getattr(reward_fn, "draw", None)  # policies.base.Rewards: the outputs drawn given the body's draw
            return draw(key, state) if draw is not None else reward_fn(posterior.sample(key, state))

    else:

        def score(key, posterior, state, reward_fn, moments_fn, best=None):
            mean, var = moments_fn(state)
            return mean + _std(var) * rng.normal(key, mean.shape, mean.dtype)

    return Policy(score, name="thompson", hyper=dict(variant=variant))


def ucb(beta: float = 1.0) -> Policy:
    """Upper confidence bound ``μ_k + β σ_k`` on the predictive moments (``β = 0`` is greedy on ``μ``)."""
    if not isinstance(beta, jax.core.Tracer) and not beta >= 0:  # a traced β (bk.sweep) is checked by its caller
        raise ValueError(f"ucb(beta={beta!r}): beta must be a number >= 0")

    def score(key, posterior, state, reward_fn, moments_fn, best=None):
        mean, var = moments_fn(state)
        return ucb_score(mean, _std(var), beta)

    return Policy(score, name="ucb", hyper=dict(beta=beta))


def greedy() -> Policy:
    """Greedy on the posterior mean: ``argmax_k E[r_k | θ̂]`` (one forward pass)."""

    def score(key, posterior, state, reward_fn, moments_fn, best=None):
        return reward_fn(posterior.mean(state))

    return Policy(score, name="greedy", hyper={})


def epsilon_greedy(epsilon: float = 0.1) -> Policy:
    """Greedy on the posterior mean, a uniformly random candidate with probability ``epsilon``."""
    if not isinstance(epsilon, jax.core.Tracer) and not 0.0 <= epsilon <= 1.0:  # traced (bk.sweep): checked there
        raise ValueError(f"epsilon_greedy(epsilon={epsilon!r}): epsilon must be in [0, 1]")

    def score(key, posterior, state, reward_fn, moments_fn, best=None):
        k_explore, k_arm = jax.random.split(key)
        greedy_scores = reward_fn(posterior.mean(state))
        explore = rng.uniform(k_explore) < epsilon
        random_scores = rng.uniform(k_arm, greedy_scores.shape, greedy_scores.dtype)
        return jnp.where(explore, random_scores, greedy_scores)

    return Policy(score, name="epsilon_greedy", hyper=dict(epsilon=epsilon))


def _incumbent(mean, best):
    return jnp.max(mean) if best is None else jnp.asarray(best, mean.dtype)


def expected_improvement(xi: float = 0.01) -> Policy:
    """Expected improvement over ``best + ξ`` (``best=None``: the largest predictive mean among the candidates)."""

    def score(key, posterior, state, reward_fn, moments_fn, best=None):
        mean, var = moments_fn(state)
        return expected_improvement_score(mean, _std(var), _incumbent(mean, best), xi)

    return Policy(score, name="expected_improvement", hyper=dict(xi=xi))


def probability_of_improvement(xi: float = 0.01) -> Policy:
    """Probability of improving on ``best + ξ`` (``best=None``: the largest predictive mean)."""

    def score(key, posterior, state, reward_fn, moments_fn, best=None):
        mean, var = moments_fn(state)
        return probability_of_improvement_score(mean, _std(var), _incumbent(mean, best), xi)

    return Policy(score, name="probability_of_improvement", hyper=dict(xi=xi))


POLICIES = {
    "thompson": thompson,
    "ucb": ucb,
    "greedy": greedy,
    "epsilon_greedy": epsilon_greedy,
    "expected_improvement": expected_improvement,
    "probability_of_improvement": probability_of_improvement,
}

ALIASES = {
    "ts": "thompson",
    "thompson_sampling": "thompson",
    "pts": "thompson_predictive",
    "thompson_predictive": "thompson_predictive",
    "eps_greedy": "epsilon_greedy",
    "egreedy": "epsilon_greedy",
    "e_greedy": "epsilon_greedy",
    "epsgreedy": "epsilon_greedy",
    "ei": "expected_improvement",
    "pi": "probability_of_improvement",
}


def get(name: str | Policy, **hyper) -> Policy:
    """The policy called ``name`` (aliases: ``ts``, ``eps_greedy``, ``ei``, ``pi``, ...), built with ``hyper``.

    A :class:`Policy` is returned unchanged.  An unknown name raises ``ValueError`` listing the valid ones.
    """
    if isinstance(name, Policy):
        return name
    if not isinstance(name, str):
        raise TypeError(f"policy must be a name or a Policy, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    key = ALIASES.get(key, key)
    if key == "thompson_predictive":
        return thompson(variant="predictive", **hyper)
    if key not in POLICIES:
        valid = sorted(POLICIES) + sorted(ALIASES)
        raise ValueError(f"unknown policy {name!r}; choose one of {valid}")
    return POLICIES[key](**hyper)
