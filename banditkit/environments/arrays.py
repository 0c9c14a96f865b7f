"""A user's own logged problem as an online bandit: ``from_arrays(contexts, rewards, expected=None)``.

The user has ``T`` contexts ``X (T, *obs_shape)`` and, for each, the reward every arm would have paid,
``R (T, K)`` (a full-information table: a supervised data set turned into a bandit, a simulator's output, or a
randomised trial with every arm measured).  The bandit replays them: seed ``s`` shows the rows in the order of a
random permutation drawn from ``SeedSequence(s)`` (consecutive permutations when ``steps > T``; ``shuffle=False``
keeps the given order for every seed), and at round ``t`` the agent sees ``X[row_t]`` and is paid ``R[row_t, a_t]``
for the arm it chose — and nothing else.

Regret needs the expected rewards: pass ``expected (T, K)`` when you have them (a simulator's means); without them the
env has no oracle (``has_oracle`` is False, ``oracle`` raises), a run reports rewards only and says so, and
``info`` of a Gymnasium step carries no ``expected_rewards``.  Using the realised rewards ``R`` as their own
expectation would count noise as regret: banditkit never does that on its own; pass ``expected=rewards`` to ask for it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from banditkit.environments.base import Episode, TableBandit, data_box, row_order, streams
from banditkit.environments.functional import FunctionalBandit


def _table(name: str, value: Any, shape0: int | None = None, ndim: int | None = None) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype != np.bool_ and not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {arr.shape}")
    if arr.ndim < 1 or arr.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one row, got shape {arr.shape}")
    if shape0 is not None and arr.shape[0] != shape0:
        raise ValueError(f"{name} has {arr.shape[0]} rows but contexts has {shape0}: one row per context")
    arr = arr.astype(np.float32)
    bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)[:8].tolist()
        raise ValueError(f"{name} has NaN or infinite values in rows {rows}: drop or impute those rows first")
    return arr


class ArrayBandit(TableBandit):
    """The bandit of :func:`from_arrays` (see the module docstring).

    Args:
      contexts: ``(T, *obs_shape)`` numeric.
      rewards: ``(T, K)`` numeric, the reward each arm pays at each row.
      expected: optional ``(T, K)`` expected rewards, for regret only.
      max_steps: rounds per episode (default ``T``).
      shuffle: replay the rows in a seed's own random order (default) or in the given order.
    """

    def __init__(self, contexts: Any, rewards: Any, expected: Any = None, *, max_steps: int | None = None,
                 shuffle: bool = True):
        x = _table("contexts", contexts)
        if x.ndim < 2:
            x = x[:, None]
        r = _table("rewards", rewards, x.shape[0], ndim=2)
        if r.shape[1] < 2:
            raise ValueError(f"rewards must have one column per arm and at least 2 arms, got shape {r.shape}")
        e = None if expected is None else _table("expected", expected, x.shape[0], ndim=2)
        if e is not None and e.shape != r.shape:
            raise ValueError(f"expected must have the shape of rewards {r.shape}, got {e.shape}")
        super().__init__(x.shape[0] if max_steps is None else max_steps)
        self._x, self._r, self._e, self.shuffle = x, r, e, bool(shuffle)
        self._x.setflags(write=False)
        self._pool_np = self._x  # every episode shows rows of the whole table: one pool, shared by all seeds
        self.num_actions = int(r.shape[1])
        self.observation_space = data_box(x)
        self.action_space = gym.spaces.Discrete(self.num_actions)

    @property
    def has_oracle(self) -> bool:
        """Whether expected rewards were given (regret can be computed)."""
        return self._e is not None

    def _episode(self, seed: int, steps: int) -> Episode:
        n = self._x.shape[0]
        if self.shuffle:
            (rng,) = streams(seed, 1)
            rows = row_order(rng, n, steps, replace=False)
        else:
            rows = np.arange(steps) % n
        expected = self._e[rows] if self._e is not None else np.full((steps, self.num_actions), np.nan, np.float32)
        return Episode(self._x, rows.astype(np.int32), self._r[rows], expected)

    def oracle(self, seed: int, steps: int):
        if self._e is None:
            raise ValueError("this bandit was made without expected rewards (from_arrays(..., expected=None)): it has "
                             "no regret to compute; pass expected=(T, K) means to get one")
        return super().oracle(seed, steps)

    def functional(self, seed: int, steps: int) -> FunctionalBandit:
        if self._e is None:
            raise ValueError("this bandit has no expected rewards (from_arrays(..., expected=None)): use stream(seed, "
                             "steps) to play it; regret needs expected=")
        return super().functional(seed, steps)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._e is None:  # no oracle: report the round only
            info = {"round": info["round"]}
        return obs, reward, terminated, truncated, info


def from_arrays(contexts: Any, rewards: Any, expected: Any = None, *, max_steps: int | None = None,
                shuffle: bool = True) -> ArrayBandit:
    """An online bandit replaying a user's ``(T, d)`` contexts and ``(T, K)`` rewards, one stream per seed, compiled
    like the shipped envs (``bk.run(spec, env, steps, seeds)``); ``expected (T, K)`` only for regret.  See
    :mod:`banditkit.environments.arrays`."""
    return ArrayBandit(contexts, rewards, expected, max_steps=max_steps, shuffle=shuffle)
