"""The reward model ``q̂ (n, K)`` of the direct and doubly-robust estimators, from any banditkit agent or posterior.

:func:`reward_predictions` accepts

* an ``(n, K)`` array of predicted rewards (used as given);
* ``(agent, state)``: a fitted agent, frozen at ``state`` (``q̂`` from its posterior mean,
  :func:`banditkit.offline.frozen.predicted_rewards`);
* an unfitted :class:`~banditkit.agents.BanditAgent`, or a spec string (``"linear"``, ``"hilofi"``,
  ``"neural_linear-greedy"``: :func:`agent_for_log` builds it with the log's shape) — fitted on the log by
  :func:`~banditkit.offline.warmstart.warm_start` (one pass of ``observe``), **cross-fitted** by default
  (``folds = F = 2``): row ``i`` belongs to fold ``i mod F``, and the rows of each fold are predicted by a model
  fitted on the other folds only (so a row's own reward never enters its prediction).  ``folds=1`` fits one model
  on all the rows and predicts those same rows (in-sample: DR's corrections and intervals come out too small).
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np

from banditkit.offline.frozen import predicted_rewards
from banditkit.offline.log import LoggedFeedback
from banditkit.offline.warmstart import warm_start


def log_env(log: LoggedFeedback) -> SimpleNamespace:
    """An environment description of the log for :func:`banditkit.agents.make_agent`: ``num_actions = K``,
    per-arm features when the log has them, the default ``mlp`` reward model, and
    ``reward_scale = max |r_i|`` (1 when all rewards are 0)."""
    scale = float(np.max(np.abs(log.rewards))) if len(log) else 1.0
    return SimpleNamespace(
        num_actions=int(log.num_actions),
        per_arm_features=log.per_arm,
        default_model="mlp",
        reward_scale=scale if scale > 0 else 1.0,
        task="bandit",
    )


def agent_for_log(spec: str, log: LoggedFeedback, **kwargs):
    """``make_agent(spec, log_env(log), **kwargs)``: an agent for the log's arms and context shape."""
    from banditkit.agents import make_agent

    return make_agent(spec, log_env(log), **kwargs)


def _is_agent(obj) -> bool:
    return all(hasattr(obj, m) for m in ("init", "act", "observe"))


def fit_predictions(agent, log: LoggedFeedback, key=None, *, folds: int = 2, **warm_kwargs) -> np.ndarray:
    """``(n, K)`` rewards predicted by ``agent`` fitted on the log (cross-fitted over ``folds``; module docstring)."""
    if folds < 1 or folds > len(log):
        raise ValueError(f"folds must be in [1, {len(log)}], got {folds}")
    key = jax.random.PRNGKey(0) if key is None else key
    if folds == 1:
        state = warm_start(agent, log, key, **warm_kwargs)
        return predicted_rewards(agent, state, log.contexts)
    fold = np.arange(len(log)) % folds
    out = np.zeros((len(log), log.num_actions))
    for f in range(folds):
        state = warm_start(agent, log.subset(fold != f), jax.random.fold_in(key, f), **warm_kwargs)
        out[fold == f] = predicted_rewards(agent, state, log.contexts[fold == f])
    return out


def reward_predictions(reward_model, log: LoggedFeedback, key=None, *, folds: int = 2, **warm_kwargs) -> np.ndarray:
    """``q̂ (n, K)`` from any of the module docstring's forms."""
    if isinstance(reward_model, str):
        reward_model = agent_for_log(reward_model, log)
    if isinstance(reward_model, tuple) and len(reward_model) == 2 and _is_agent(reward_model[0]):
        agent, state = reward_model
        return predicted_rewards(agent, state, log.contexts)
    if _is_agent(reward_model):
        return fit_predictions(reward_model, log, key, folds=folds, **warm_kwargs)
    q = np.asarray(reward_model, np.float64)
    if q.shape != (len(log), log.num_actions):
        raise ValueError(f"a reward model given as an array must have shape (n, K) = ({len(log)}, "
                         f"{log.num_actions}), got {q.shape}")
    if not np.all(np.isfinite(q)):
        bad = np.flatnonzero(~np.isfinite(q).all(axis=1))
        raise ValueError(f"the reward model's predictions are not finite in rows {bad[:8].tolist()}")
    return q
