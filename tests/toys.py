"""Toy environments shared by the tests (imported as ``from toys import ToyBandit``; tests/ is on the path through
its conftest)."""

import os
from typing import NamedTuple

import gymnasium
import numpy as np

#: the tests/ folder (this file stays at its top, beside conftest.py) and the repository root
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS_DIR)


class ToyFunctional(NamedTuple):
    contexts: np.ndarray  # (N, D) or (N, K, D)
    index: np.ndarray  # (steps,)
    rewards: np.ndarray  # (steps, K)
    expected: np.ndarray  # (steps, K)


class ToyBandit(gymnasium.Env):
    """Linear contextual bandit: a fixed pool of N(0, I) contexts, expected reward x·w_a, reward = expected +
    ``noise`` × N(0, 1).  ``reset(seed)`` and ``functional(seed, steps)`` build the same (prefix-consistent) table."""

    metadata = {"render_modes": []}

    def __init__(self, num_actions=3, dim=4, pool=50, max_steps=1000, noise=0.1):
        self.num_actions, self.dim, self.pool, self.max_steps, self.noise = num_actions, dim, pool, max_steps, noise
        self.per_arm_features, self.default_model, self.task = False, "mlp", "bandit"
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (dim,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(num_actions)

    def functional(self, seed, steps):
        rng = np.random.default_rng(seed)
        w = rng.normal(size=(self.dim, self.num_actions)).astype(np.float32)
        contexts = rng.normal(size=(self.pool, self.dim)).astype(np.float32)
        index = rng.integers(0, self.pool, size=self.max_steps).astype(np.int32)[:steps]
        noise = self.noise * rng.normal(size=(self.max_steps, self.num_actions)).astype(np.float32)[:steps]
        expected = contexts[index] @ w
        return ToyFunctional(contexts, index, (expected + noise).astype(np.float32), expected.astype(np.float32))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._fb, self._t = self.functional(0 if seed is None else seed, self.max_steps), 0
        return self._fb.contexts[self._fb.index[0]], {}

    def step(self, action):
        fb, t = self._fb, self._t
        exp = fb.expected[t]
        info = dict(expected_rewards=exp, optimal_reward=float(exp.max()), regret=float(exp.max() - exp[action]))
        self._t += 1
        obs = fb.contexts[fb.index[min(self._t, self.max_steps - 1)]]
        return obs, float(fb.rewards[t, action]), False, self._t >= self.max_steps, info
