"""Learning from logs: start any agent from logged feedback, then continue online.

``warm_start(agent, log, key)`` makes one pass of the agent's own ``observe`` over the logged rows, in log order::

    state = agent.init(k_init, x_0)                       # unless a state is given
    for i in rows:  state = agent.observe(state, x_i, a_i, r_i)

(one jitted ``lax.scan`` of ``agent.observe``, which accepts traced inputs; a backend with a warm-up refit, e.g.
``subspace_ekf``, gets it at round ``τ = agent.warmup_rounds`` exactly as ``act`` would do it online, with the key
``agent.warmup_key(k)`` of a key ``k`` split from ``key``).  The returned state is the prior of the next online
round: continue with ``agent.act`` / ``agent.observe`` as usual.

Importance weighting (``weighting="resample"``): the logged ``(x, a)`` pairs follow the logging policy, so arms
it favoured dominate the fit.  Resampling ``n`` rows with replacement with probabilities ``∝ ω_i`` (default
``ω_i = 1 / p_i``, which makes the resampled design look as if actions had been chosen uniformly; or the caller's
``weights``) and observing them in their original order gives an unweighted pass over an importance-resampled log —
the only weighting that works through ``observe`` alone.  (A Gaussian filter would weight row i exactly by
observing it with noise variance ``R / ω_i``; the posterior contract has no weighted update, so that is not used.)
"""

from __future__ import annotations

import weakref

import jax
import numpy as np

from banditkit._xla.conv import canonical_convs
from banditkit.agents.bandit import WARMUP_KEY
from banditkit.offline.log import LoggedFeedback, load


def resample_rows(log: LoggedFeedback, seed: int = 0, weights=None) -> np.ndarray:
    """``n`` row positions drawn with replacement with probabilities ``∝ weights`` (default ``1 / propensity``),
    sorted (log order kept)."""
    if weights is None:
        if log.propensities is None:
            raise ValueError("weighting='resample' needs propensities (or pass weights=): this log has none")
        weights = 1.0 / log.propensities
    w = np.asarray(weights, np.float64).reshape(-1)
    if w.shape[0] != len(log) or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise ValueError(f"weights must be {len(log)} finite non-negative numbers, not all zero")
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(len(log), size=len(log), replace=True, p=w / w.sum()))


_OBSERVERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _observer(agent):
    """``fn(state, contexts, actions, rewards)``: ``agent.observe`` over the rows in order, one jitted scan (one per
    agent, kept while the agent lives, so repeated warm starts of one agent compile once per log length)."""
    fn = _OBSERVERS.get(agent)
    if fn is None:

        def scan(st, xs, as_, rs):
            body = lambda s, row: (agent.observe(s, *row), None)
            return jax.lax.scan(body, st, (xs, as_, rs))[0]

        fn = _OBSERVERS[agent] = jax.jit(canonical_convs(scan))
    return fn


def warm_start(
    agent,
    log,
    key=None,
    *,
    state=None,
    weighting: str | None = None,
    weights=None,
    seed: int = 0,
):
    """The agent's state after observing the log once (module docstring).

    Args:
      agent: a :class:`~banditkit.agents.BanditAgent` (any object with ``init(key, context)`` and a traceable
        ``observe(state, context, action, reward)``).
      log: a :class:`~banditkit.offline.log.LoggedFeedback`, a DataFrame or a Parquet path.
      key: PRNG key for ``agent.init`` and the warm-up fit (default ``PRNGKey(0)``).
      state: continue from this state instead of ``agent.init``.
      weighting: ``None`` (every row once) or ``"resample"`` (importance resampling, module docstring).
      weights: resampling weights ``(n,)`` (default ``1 / propensity``).
      seed: the resampling seed.
    """
    log = load(log)
    key = jax.random.PRNGKey(0) if key is None else key
    if weighting not in (None, "none", "resample"):
        raise ValueError(f"weighting must be None or 'resample', got {weighting!r}")
    if weights is not None and weighting != "resample":
        raise ValueError("weights= is used by weighting='resample'; pass both")
    rows = resample_rows(log, seed, weights) if weighting == "resample" else np.arange(len(log))
    contexts = np.asarray(log.contexts[rows], np.float32)
    actions = np.asarray(log.actions[rows], np.int32)
    rewards = np.asarray(log.rewards[rows], np.float32)
    k_init, k_warm = jax.random.split(key)
    if state is None:
        state = agent.init(k_init, contexts[0])
    tau = int(getattr(agent, "warmup_rounds", getattr(agent, "warmup_steps", 0)) or 0)  # the round of the refit
    step0 = int(getattr(state, "step", 0))

    run = _observer(agent)
    cut = tau - step0 if 0 <= tau - step0 < len(rows) and tau > 0 else None
    if cut is None:
        return run(state, contexts, actions, rewards) if len(rows) else state
    if cut > 0:
        state = run(state, contexts[:cut], actions[:cut], rewards[:cut])
    state = agent.warmup(jax.random.fold_in(k_warm, WARMUP_KEY), state)  # agent.warmup_key(k_warm), as act does
    return run(state, contexts[cut:], actions[cut:], rewards[cut:])
