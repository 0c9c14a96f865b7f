"""The Deep Bayesian Bandit Showdown's non-classification bandits (Riquelme et al. 2018), with its reward rules.

* :class:`MushroomBandit` — 2 arms (0 = don't eat, 1 = eat).  Don't eat: 0.  Eat an edible mushroom: +5.  Eat a
  poisonous one: +5 with probability 1/2, else -35 (expected -15).  Rows drawn i.i.d. (with replacement), as in
  the showdown; context = 117-d one-hot.
* :class:`JesterBandit` — 8 arms.  Per episode the 40 joke columns are permuted (the showdown's
  ``shuffle_cols``): the first 32 ratings are the context, the last 8 the (deterministic) rewards in [-10, 10].
* :class:`FinancialBandit` — 8 arms (portfolios).  Context = the 21 stocks' daily open-close differences;
  per episode ``β ~ U(-1, 1)^{21×8}`` with unit-norm columns, expected reward ``x·β_a`` and realised reward
  ``x·β_a + N(0, σ_a²)``, ``σ_a = 0.01 (a + 1)``.
* :class:`WheelBandit` — 5 arms, ``x`` uniform in the unit disc; arms 0-3 ``N(1.0, 0.05²)``, arm 4
  ``N(1.2, 0.05²)``; if ``|x| >= δ`` the arm of ``x``'s quadrant (0: x>0,y>0; 1: x>0,y<=0; 2: x<=0,y>0;
  3: x<=0,y<=0) pays ``N(50, 0.01²)`` instead.
"""

from __future__ import annotations

import functools
import os

import gymnasium as gym
import numpy as np

from banditkit import datasets
from banditkit.environments import preprocess
from banditkit.environments.base import Episode, TableBandit, announce_synthetic, data_box, pool, row_order, streams

MUSHROOM_REWARDS = {"no_eat": 0.0, "eat_edible": 5.0, "eat_poisonous_good": 5.0, "eat_poisonous_bad": -35.0,
                    "p_bad": 0.5}


@functools.lru_cache(maxsize=1)
def _mushroom_arrays() -> tuple[np.ndarray, np.ndarray]:
    X, poisonous = preprocess.mushroom(datasets.load("mushroom"))
    X.setflags(write=False)
    poisonous.setflags(write=False)
    return X, poisonous


def mushroom_rewards(poisonous: np.ndarray, bad_draw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(realised (n, 2), expected (n, 2))`` for rows with ``poisonous`` flags; ``bad_draw`` (n,) True where
    eating a poisonous mushroom turns out bad (probability ``p_bad``)."""
    r = MUSHROOM_REWARDS
    eat_poison = np.where(bad_draw, r["eat_poisonous_bad"], r["eat_poisonous_good"])
    eat = np.where(poisonous, eat_poison, r["eat_edible"])
    eat_mean = np.where(poisonous, r["p_bad"] * r["eat_poisonous_bad"] + (1 - r["p_bad"]) * r["eat_poisonous_good"],
                        r["eat_edible"])
    noeat = np.full(len(poisonous), r["no_eat"])
    return np.stack([noeat, eat], 1), np.stack([noeat, eat_mean], 1)


class MushroomBandit(TableBandit):
    """UCI Mushroom as the showdown's eat / don't-eat bandit (see the module docstring)."""

    def __init__(self, max_steps: int = 5000, replace: bool = True):
        super().__init__(max_steps)
        self._X, self._poisonous = _mushroom_arrays()
        self.replace = bool(replace)
        self.num_actions = 2
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(self._X.shape[1],), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _episode(self, seed: int, steps: int) -> Episode:
        rng_rows, rng_noise = streams(seed, 2)
        rows = row_order(rng_rows, len(self._X), steps, self.replace)
        bad = rng_noise.random(steps) < MUSHROOM_REWARDS["p_bad"]
        realised, expected = mushroom_rewards(self._poisonous[rows], bad)
        return self._rows_episode(self._X, np.asarray, rows, realised, expected)


class JesterBandit(TableBandit):
    """Jester jokes, 8 arms: your ``data_dir`` (``jester_data_40jokes_19181users.npy``) or ``synthetic=True``."""

    def __init__(self, max_steps: int = 5000, *, data_dir: str | os.PathLike | None = None, synthetic: bool = False,
                 shuffle_cols: bool = True):
        super().__init__(max_steps)
        self._R = np.asarray(datasets.load("jester", data_dir=data_dir, synthetic=synthetic), dtype=np.float32)
        if synthetic:
            announce_synthetic(self, "Jester")
        self.shuffle_cols = bool(shuffle_cols)
        self.num_actions = 8
        self.observation_space = gym.spaces.Box(-10.0, 10.0, shape=(32,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(8)

    def _episode(self, seed: int, steps: int) -> Episode:
        rng_cols, rng_rows = streams(seed, 2)
        cols = rng_cols.permutation(40) if self.shuffle_cols else np.arange(40)
        rows = row_order(rng_rows, len(self._R), steps, replace=False)
        uniq, index = pool(rows)
        data = np.clip(self._R[:, cols], -10.0, 10.0)
        rewards = data[rows, 32:]
        return Episode(data[uniq, :32], index, rewards, rewards)


class FinancialBandit(TableBandit):
    """The showdown's stock bandit, 8 linear arms: your ``data_dir`` (``raw_stock_contexts``) or ``synthetic=True``."""

    def __init__(self, max_steps: int = 3713, *, data_dir: str | os.PathLike | None = None, synthetic: bool = False,
                 num_actions: int = 8):
        super().__init__(max_steps)
        self._X = np.asarray(datasets.load("financial", data_dir=data_dir, synthetic=synthetic), dtype=np.float32)
        if synthetic:
            announce_synthetic(self, "the showdown stock data (Financial)")
        self.num_actions = int(num_actions)
        self.noise_std = 0.01 * (np.arange(self.num_actions) + 1)
        self.observation_space = data_box(self._X)
        self.action_space = gym.spaces.Discrete(self.num_actions)

    def _episode(self, seed: int, steps: int) -> Episode:
        rng_beta, rng_rows, rng_noise = streams(seed, 3)
        beta = rng_beta.uniform(-1.0, 1.0, (self._X.shape[1], self.num_actions))
        beta /= np.linalg.norm(beta, axis=0)
        rows = row_order(rng_rows, len(self._X), steps, replace=False)
        expected = self._X[rows].astype(np.float64) @ beta
        realised = expected + rng_noise.normal(size=expected.shape) * self.noise_std
        return self._rows_episode(self._X, np.asarray, rows, realised, expected)


class WheelBandit(TableBandit):
    """The synthetic wheel bandit (exploration difficulty grows with ``delta``)."""

    synthetic = True  # a generated problem by design (not a look-alike of a data set)

    mean_v = (1.0, 1.0, 1.0, 1.0, 1.2)
    std_v = (0.05, 0.05, 0.05, 0.05, 0.05)
    mu_large, std_large = 50.0, 0.01

    def __init__(self, max_steps: int = 5000, delta: float = 0.95):
        super().__init__(max_steps)
        if not 0.0 <= float(delta) <= 1.0:
            raise ValueError(f"delta must lie in [0, 1], got {delta}")
        self.delta = float(delta)
        self.num_actions = 5
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(5)

    def _episode(self, seed: int, steps: int) -> Episode:
        rng_ctx, rng_noise = streams(seed, 2)
        u = rng_ctx.random((steps, 2))
        radius, angle = np.sqrt(u[:, 0]), 2 * np.pi * u[:, 1]
        x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1).astype(np.float32)
        expected, realised = wheel_rewards(x, self.delta, rng_noise.normal(size=(steps, 6)),
                                           self.mean_v, self.std_v, self.mu_large, self.std_large)
        return Episode(x, np.arange(steps, dtype=np.int32), realised, expected)


def wheel_rewards(x: np.ndarray, delta: float, z: np.ndarray, mean_v=WheelBandit.mean_v, std_v=WheelBandit.std_v,
                  mu_large: float = 50.0, std_large: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """``(expected (n, 5), realised (n, 5))`` of the wheel bandit for contexts ``x (n, 2)`` and standard-normal
    draws ``z (n, 6)`` (5 per-arm noises + 1 for the large reward)."""
    x = np.asarray(x, dtype=np.float64)
    expected = np.tile(np.asarray(mean_v, dtype=np.float64), (len(x), 1))
    realised = expected + z[:, :5] * np.asarray(std_v)
    outer = np.linalg.norm(x, axis=1) >= delta
    quadrant = np.where(x[:, 0] > 0, np.where(x[:, 1] > 0, 0, 1), np.where(x[:, 1] > 0, 2, 3))
    rows = np.flatnonzero(outer)
    expected[rows, quadrant[rows]] = mu_large
    realised[rows, quadrant[rows]] = mu_large + std_large * z[rows, 5]
    return expected, realised
