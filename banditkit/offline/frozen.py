"""A frozen agent state evaluated on many logged contexts: its action probabilities and its predicted rewards.

For an agent ``(agent, state)`` that stops learning (its belief fixed at ``state``) and every logged context
``x_i``:

* :func:`agent_probabilities` — ``π(k | x_i)``, ``(n, K)``: the probabilities of the agent's policy
  (``BanditAgent.action_probabilities``: exact for greedy / UCB / EI / PI / ε-greedy and the round-robin warm-up, a
  Monte-Carlo estimate over ``num_draws`` keys for Thompson sampling; the same keys for every row).
* :func:`predicted_rewards` — ``q̂_ik = s · m(f(θ̂, x_i))_k``, ``(n, K)``: the expected reward of every arm under the
  posterior mean ``θ̂`` (``m`` the likelihood's mean link, ``s`` the agent's ``reward_scale``), the reward model
  of the direct and doubly-robust estimators.

Contexts are processed in jitted batches of ``batch`` rows (the last batch padded, so at most one compilation per
function and batch size).  Only the public agent API is used (``action_probabilities``, ``posterior_for``,
``candidates``).
"""

from __future__ import annotations

import weakref

import jax
import jax.numpy as jnp
import numpy as np

from banditkit.policies.propensity import DEFAULT_DRAWS

DEFAULT_BATCH = 1024


def _check_agent(agent, state, contexts: np.ndarray) -> int:
    """``K`` of the agent; the contexts must fit its reward-model shape."""
    if getattr(state, "posterior", None) is None:
        raise TypeError("pass the agent's state (agent.init / warm_start / observe return it), not the agent alone")
    per_arm = bool(getattr(agent, "per_arm", False))
    if per_arm != (contexts.ndim == 3):
        kind = "per-arm (K, F) feature matrices" if contexts.ndim == 3 else "shared (d,) feature vectors"
        raise ValueError(f"the log holds {kind} but the agent's reward model is "
                         f"{'per-arm' if per_arm else 'multi-output'}")
    k = int(contexts.shape[1]) if per_arm else int(agent.num_actions_of(state))
    return k


def _batched(fn, arrays: list[np.ndarray], batch: int) -> np.ndarray:
    n = len(arrays[0])
    size = min(batch, n)
    outs = []
    for start in range(0, n, size):
        chunk = [a[start:start + size] for a in arrays]
        m = len(chunk[0])
        if m < size:  # pad with the last row: one shape, one compilation
            chunk = [np.concatenate([c, np.repeat(c[-1:], size - m, axis=0)]) for c in chunk]
        outs.append(np.asarray(fn(*chunk))[:m])
    return np.concatenate(outs).astype(np.float64)


def agent_probabilities(
    agent,
    state,
    contexts,
    key=None,
    *,
    available=None,
    num_draws: int = DEFAULT_DRAWS,
    batch: int = DEFAULT_BATCH,
) -> np.ndarray:
    """``(n, K)`` action probabilities of the frozen agent for each context (``agent.action_probabilities``, vmapped
    over the rows; module docstring).

    ``available``: ``(n, K)`` availability per row (``None``: all arms) — unavailable arms get probability 0.
    ``key``: the Monte-Carlo keys (default ``PRNGKey(0)``).
    """
    contexts = np.asarray(contexts, np.float32)
    k = _check_agent(agent, state, contexts)
    key = jax.random.PRNGKey(0) if key is None else key
    mask = np.ones((len(contexts), k), bool) if available is None else np.asarray(available, bool)
    probs = _cached(agent, ("probs", available is not None, int(num_draws)), _probs_fn)
    return _batched(lambda xs, ms: probs(state, key, xs, ms), [contexts, mask], batch)


def _probs_fn(agent, use_mask: bool, num_draws: int):
    def probs(st, k_mc, xs, ms):
        one = lambda x, m: agent.action_probabilities(k_mc, st, x, m if use_mask else None, num_draws=num_draws)
        return jax.vmap(one)(xs, ms)

    return probs


def predicted_rewards(agent, state, contexts, *, batch: int = DEFAULT_BATCH) -> np.ndarray:
    """``(n, K)`` expected reward of every arm for each context under the posterior mean (module docstring)."""
    contexts = np.asarray(contexts, np.float32)
    _check_agent(agent, state, contexts)
    rewards = _cached(agent, ("rewards",), _rewards_fn)
    return _batched(lambda xs: rewards(state, xs), [contexts], batch)


def _rewards_fn(agent):
    def scale_of(st):  # the agent's scale in this state (learned from the rewards with reward_scale="auto")
        return agent.scale_of(st) if hasattr(agent, "scale_of") else getattr(agent, "reward_scale", 1.0)

    def rewards(st, xs):
        scale = scale_of(st)
        post = agent.posterior_for(st)
        params = post.mean(st.posterior)

        def one(x):
            reward_fn, _ = agent.candidates(post, x)
            return reward_fn(params)

        return jax.vmap(one)(xs) * jnp.asarray(scale, jnp.float32)

    return rewards


_JITTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _cached(agent, what: tuple, make):
    """``jax.jit(make(agent, *what[1:]))``, made once per agent and ``what`` (kept while the agent lives), so
    evaluating one agent on many logs compiles once per batch shape."""
    table = _JITTED.setdefault(agent, {})
    if what not in table:
        table[what] = jax.jit(make(agent, *what[1:]))
    return table[what]
