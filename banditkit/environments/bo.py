"""Bayesian-optimisation environments: Ackley(dim), Branin, Hartmann6, DrawNN(dim).

Action: a point ``x`` in ``[0, 1]^dim`` (scaled to the function's domain inside); reward ``= -f(x)`` (+ optional
Gaussian noise ``noise_std``), i.e. the standard minimisation problem NEGATED so that reward is maximised.
Observation: the last queried point (the centre of the cube after ``reset``).  ``info``: ``optimum`` (best
reward ``= -min f``), ``optimal_reward`` (same), ``expected_reward`` (``-f(x)``), ``expected_rewards`` (None: a
continuum of actions), ``regret`` (``optimum - expected_reward``), ``best_reward`` and ``simple_regret`` so far,
``x_domain`` (the scaled point).  The plain functions are in :mod:`banditkit.environments.bo_functions`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from banditkit.environments.base import check_steps
from banditkit.environments.bo_functions import BOFunction, make_function
from banditkit.validation import check_in_bounds


class BOEnv(gym.Env):
    """Maximise ``-f`` over ``[0,1]^dim`` for a :class:`BOFunction` ``f``."""

    metadata: dict[str, Any] = {"render_modes": []}
    task = "bo"
    default_model = "bo_mlp"
    per_arm_features = False

    def __init__(self, function: str | BOFunction = "branin", dim: int | None = None, max_steps: int = 100,
                 noise_std: float = 0.0):
        self.function = function if isinstance(function, BOFunction) else make_function(function, dim)
        self.dim = self.function.dim
        self.max_steps = check_steps(max_steps, "max_steps")
        if not float(noise_std) >= 0.0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        self.noise_std = float(noise_std)
        self.optimum = float(self.function.optimum)
        self._unit = np.tile([0.0, 1.0], (self.dim, 1))
        self.action_space = gym.spaces.Box(0.0, 1.0, shape=(self.dim,), dtype=np.float32)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(self.dim,), dtype=np.float32)
        self._t, self._best, self._last = 0, -np.inf, None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t, self._best = 0, -np.inf
        self._last = np.full(self.dim, 0.5, dtype=np.float32)
        return self._last.copy(), {"optimum": self.optimum}

    def step(self, action: Any):
        if self._last is None:
            raise RuntimeError("call reset() before step()")
        if self._t >= self.max_steps:
            raise RuntimeError(f"the episode ended after max_steps={self.max_steps} queries; call reset()")
        x = check_in_bounds(np.asarray(action, dtype=np.float64).reshape(-1) if np.ndim(action) else action,
                            self._unit, name="action (a point in [0, 1]^dim)", atol=1e-6)
        if x.ndim != 1:
            raise ValueError(f"action must be ONE point of shape ({self.dim},), got shape {x.shape}")
        x = np.clip(x, 0.0, 1.0)
        expected = float(-self.function.value(x))
        reward = expected + (self.noise_std * float(self.np_random.normal()) if self.noise_std > 0 else 0.0)
        self._best = max(self._best, expected)
        self._t += 1
        self._last = x.astype(np.float32)
        info = {"optimum": self.optimum, "optimal_reward": self.optimum, "expected_reward": expected,
                "expected_rewards": None, "regret": self.optimum - expected, "best_reward": self._best,
                "simple_regret": self.optimum - self._best, "x_domain": self.function.to_domain(x),
                "round": self._t - 1}
        return self._last.copy(), reward, False, self._t >= self.max_steps, info


class AckleyEnv(BOEnv):
    """Ackley on ``[-4, 5]^dim`` (default ``dim=2``)."""

    def __init__(self, dim: int = 2, max_steps: int = 100, noise_std: float = 0.0):
        super().__init__("ackley", dim, max_steps, noise_std)


class BraninEnv(BOEnv):
    """Branin on ``[-5, 10] x [0, 15]``."""

    def __init__(self, max_steps: int = 40, noise_std: float = 0.0):
        super().__init__("branin", None, max_steps, noise_std)


class Hartmann6Env(BOEnv):
    """Hartmann-6 on ``[0, 1]^6``."""

    def __init__(self, max_steps: int = 40, noise_std: float = 0.0):
        super().__init__("hartmann6", None, max_steps, noise_std)


class DrawNNEnv(BOEnv):
    """A fixed random ReLU MLP on ``[0, 1]^dim`` (default ``dim=50``); the optimum is a numerical estimate."""

    def __init__(self, dim: int = 50, max_steps: int = 200, noise_std: float = 0.0, seed: int = 3141):
        super().__init__(make_function("drawnn", dim, seed=seed), None, max_steps, noise_std)
