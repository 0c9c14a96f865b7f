"""Logs from banditkit's simulators, with the ground truth that off-policy evaluation is measured against.

A bandit environment's functional form (``env.unwrapped.functional(seed, steps)``) holds the contexts shown at
rounds ``t = 0..T-1`` and every arm's realised and expected reward, so

* :func:`simulate_log` draws a log from any logging policy given as action probabilities ``π₀ (T, K)`` (or
  ``"uniform"``, or a function of the contexts): ``a_t ~ π₀(· | x_t)``, ``r_t = rewards[t, a_t]``,
  ``p_t = π₀(a_t | x_t)`` (exact);
* :func:`true_value` is a target's value on the same contexts, ``(1/T) Σ_t Σ_k π(k | x_t) E[r | x_t, k]``, from the
  simulator's expected rewards — what an estimator on that log should find;
* :func:`log_from_run` turns the rows of a ``bk.run(..., propensities=...)`` of one seed into a log (the runner
  records each action's propensity; the contexts come from the env's functional form for that seed).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from banditkit.offline.log import LoggedFeedback, from_arrays


class SimulatedLog(NamedTuple):
    """A log and, per logged round, every arm's expected reward ``expected (n, K)`` (the simulator's truth)."""

    log: LoggedFeedback
    expected: np.ndarray


def _env(env, **kwargs):
    if isinstance(env, str):
        import gymnasium

        import banditkit.environments  # noqa: F401  (registers the ids)

        return gymnasium.make(env, **kwargs)
    return env


def episode(env, seed: int, steps: int):
    """``(contexts (T, ...), rewards (T, K), expected (T, K))`` of the env's functional form for ``seed``."""
    u = getattr(env, "unwrapped", env)
    if not hasattr(u, "functional"):
        raise ValueError(f"{type(u).__name__} has no functional form (env.unwrapped.functional), so its contexts and "
                         "expected rewards cannot be replayed")
    fb = u.functional(int(seed), int(steps))
    index = np.asarray(fb.index)[:steps]
    return (np.asarray(fb.contexts)[index], np.asarray(fb.rewards)[:steps].astype(np.float64),
            np.asarray(fb.expected)[:steps].astype(np.float64))


def uniform(contexts, num_actions: int) -> np.ndarray:
    """The uniform logging policy ``π₀(k | x) = 1 / K``."""
    return np.full((len(contexts), num_actions), 1.0 / num_actions)


def epsilon_greedy(scores: np.ndarray, epsilon: float) -> np.ndarray:
    """``(1 − ε) 1{k = argmax_j s_j} + ε / K`` per row of ``scores (n, K)`` (ties: the lowest index)."""
    s = np.asarray(scores, np.float64)
    k = s.shape[1]
    return (1.0 - epsilon) * np.eye(k)[np.argmax(s, axis=1)] + epsilon / k


def simulate_log(env, steps: int, seed: int = 0, logging="uniform", **env_kwargs) -> SimulatedLog:
    """A log of ``steps`` rounds of ``env`` (a banditkit env or id) under ``logging`` (module docstring).

    ``logging``: ``"uniform"``, an array ``(steps, K)`` of action probabilities, or ``fn(contexts) -> (steps, K)``.
    The actions are drawn with ``numpy.random.default_rng(seed)``.
    """
    env = _env(env, **env_kwargs)
    contexts, rewards, expected = episode(env, seed, steps)
    k = expected.shape[1]
    if isinstance(logging, str):
        if logging != "uniform":
            raise ValueError(f"logging must be 'uniform', an array (steps, K) or a function, got {logging!r}")
        probs = uniform(contexts, k)
    elif callable(logging):
        probs = np.asarray(logging(contexts), np.float64)
    else:
        probs = np.asarray(logging, np.float64)
    if probs.shape != (len(contexts), k) or np.any(probs < 0) or not np.allclose(probs.sum(1), 1.0, atol=1e-6):
        raise ValueError(f"the logging probabilities must be ({len(contexts)}, {k}) rows of a distribution")
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=(len(probs), 1))
    actions = np.minimum((u > np.cumsum(probs, axis=1)).sum(axis=1), k - 1)
    rows = np.arange(len(actions))
    log = from_arrays(contexts, actions, rewards[rows, actions], probs[rows, actions], num_actions=k)
    return SimulatedLog(log, expected)


def true_value(target_probs, expected) -> float:
    """``(1/T) Σ_t Σ_k π_tk q_tk`` with the simulator's expected rewards ``q``."""
    return float(np.mean(np.sum(np.asarray(target_probs) * np.asarray(expected), axis=1)))


def log_from_run(df, env, seed: int | None = None, **env_kwargs) -> LoggedFeedback:
    """The rows of one seed of a ``bk.run`` DataFrame with a ``propensity`` column, as a log (module docstring)."""
    if "propensity" not in df.columns:
        raise ValueError("the run has no 'propensity' column: run it with bk.run(..., propensities=True)")
    seeds = sorted(df["seed"].unique())
    if seed is None:
        if len(seeds) != 1:
            raise ValueError(f"the run has seeds {seeds}: pass seed=")
        seed = int(seeds[0])
    rows = df[df["seed"] == seed].sort_values("step")
    if not len(rows):
        raise ValueError(f"the run has no rows for seed {seed}")
    steps = int(rows["step"].max()) + 1
    env = _env(env, **env_kwargs)
    contexts, _, expected = episode(env, seed, steps)
    t = rows["step"].to_numpy()
    extra = rows[["step"]].reset_index(drop=True)
    return from_arrays(contexts[t], rows["action"].to_numpy(), rows["reward"].to_numpy(),
                       rows["propensity"].to_numpy(), num_actions=expected.shape[1], extra=extra)
