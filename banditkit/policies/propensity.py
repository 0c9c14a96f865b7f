"""Action probabilities of a policy: the distribution ``π(· | x)`` its ``choose`` samples from, exact where the rule
allows, else a Monte-Carlo estimate over ``num_draws`` keys.  Off-policy evaluation needs them for the target
policy, and a logged run needs ``π(a_t | x_t)`` (the propensity) of each action it took.

With the candidates' scores ``s`` (``(K,)``, :class:`~banditkit.policies.base.Policy`) and an optional availability
mask ``m ∈ {0, 1}^K`` (unavailable arms score ``-inf``, so ``argmax`` never picks them)::

    greedy, ucb, EI, PI   deterministic: π(k) = 1{k = argmax_j s_j}   (ties: the lowest index, as ``choose``)
    epsilon_greedy(ε)     π(k) = (1 − ε) 1{k = argmax_j g_j} + ε m_k / Σ_j m_j   (g: the greedy scores)
    thompson, others      π̂(k) = (1/M) Σ_{m=1..M} 1{k = argmax_j s_j(key_m)},  key_m = split(key, M)[m]

The Monte-Carlo estimate is unbiased for each ``k`` with standard error ``sqrt(π(k)(1 − π(k)) / M)``; under
``vmap`` over contexts with the same ``key``, the same M keys serve every context (common random numbers: one
parameter draw per key, not one per context and key).  For the propensity of an action that *was* taken,
:func:`taken_propensity` counts the taken draw as one more draw, ``(c + 1) / (M + 1)``, which is never zero.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from banditkit.policies.base import Policy

Array = jax.Array

DETERMINISTIC = ("greedy", "ucb", "expected_improvement", "probability_of_improvement")
EXACT = DETERMINISTIC + ("epsilon_greedy",)
DEFAULT_DRAWS = 256


def is_exact(policy: Policy) -> bool:
    """Whether :func:`action_probabilities` is exact for ``policy`` (else a ``num_draws`` Monte-Carlo estimate)."""
    return policy.name in EXACT


def masked(scores: Array, mask: Array | None) -> Array:
    """``scores`` with the unavailable candidates (``mask`` false) at ``-inf`` (``None``: unchanged)."""
    if mask is None:
        return scores
    return jnp.where(jnp.asarray(mask, bool), scores, -jnp.inf)


def action_probabilities(
    policy: Policy,
    key: Array,
    posterior,
    state,
    reward_fn,
    moments_fn,
    *,
    mask: Array | None = None,
    best=None,
    num_draws: int = DEFAULT_DRAWS,
) -> Array:
    """``π(· | x)`` over the K candidates, ``(K,)`` summing to one (see the module docstring).

    Args:
      policy, key, posterior, state, reward_fn, moments_fn, best: as for ``policy.choose``.
      mask: ``(K,)`` availability (``None``: all available); unavailable candidates get probability 0.
      num_draws: ``M`` for the Monte-Carlo estimate (rules outside :data:`EXACT`; ignored for those in it).
    """
    if policy.name in DETERMINISTIC:
        s = masked(policy.score(key, posterior, state, reward_fn, moments_fn, best), mask)
        return jax.nn.one_hot(jnp.argmax(s), s.shape[0], dtype=s.dtype)
    if policy.name == "epsilon_greedy":
        eps = float(policy.hyper.get("epsilon", 0.0))
        g = masked(reward_fn(posterior.mean(state)), mask)
        k = g.shape[0]
        avail = jnp.ones((k,), g.dtype) if mask is None else jnp.asarray(mask, g.dtype)
        return (1.0 - eps) * jax.nn.one_hot(jnp.argmax(g), k, dtype=g.dtype) + eps * avail / jnp.sum(avail)
    return draw_counts(policy, key, posterior, state, reward_fn, moments_fn, mask=mask, best=best,
                       num_draws=num_draws) / num_draws


def draw_counts(policy, key, posterior, state, reward_fn, moments_fn, *, mask=None, best=None,
                num_draws: int = DEFAULT_DRAWS) -> Array:
    """How often each candidate wins the ``argmax`` over ``num_draws`` keys ``split(key, num_draws)``, ``(K,)``."""
    if num_draws < 1:
        raise ValueError(f"num_draws must be >= 1, got {num_draws}")

    def body(counts, k):
        s = masked(policy.score(k, posterior, state, reward_fn, moments_fn, best), mask)
        return counts + jax.nn.one_hot(jnp.argmax(s), s.shape[0], dtype=counts.dtype), None

    shape = jax.eval_shape(lambda: policy.score(key, posterior, state, reward_fn, moments_fn, best))
    counts, _ = jax.lax.scan(body, jnp.zeros(shape.shape, jnp.float32), jax.random.split(key, num_draws))
    return counts


def taken_propensity(
    policy: Policy,
    key: Array,
    posterior,
    state,
    reward_fn,
    moments_fn,
    action: Array,
    *,
    mask: Array | None = None,
    best=None,
    num_draws: int = DEFAULT_DRAWS,
) -> Array:
    """``π(action | x)`` for an action the policy took (``key`` must be independent of the key that chose it).

    Exact rules: the exact probability.  Monte-Carlo rules: ``(c + 1) / (M + 1)`` with ``c`` the wins of ``action``
    among ``M = num_draws`` fresh draws — the taken draw counted as one more sample from the same distribution, so
    the logged propensity is never 0 (inverse-propensity weights stay finite).
    """
    if policy.name in EXACT:
        probs = action_probabilities(policy, key, posterior, state, reward_fn, moments_fn, mask=mask, best=best)
        return probs[action]
    counts = draw_counts(policy, key, posterior, state, reward_fn, moments_fn, mask=mask, best=best,
                         num_draws=num_draws)
    return (counts[action] + 1.0) / (num_draws + 1.0)
