"""KuaiRec as a per-arm-feature recommender bandit (seed 003, Section 5.3).

Per user, blocks of 10 consecutive videos form a round with 10 arms (:func:`banditkit.datasets.kuairec_rounds`):
each arm's features are ``[video index, log1p of yesterday's like, share, play, comment, complete-play, follow,
reply-comment and download counts]`` (9 numbers; the video index feeds ``bk.models.EmbeddingMLP``), and the reward
of an arm is ``log1p(watch_ratio)`` (deterministic).  Rounds stream in time order (``shuffle=True`` permutes them
with the episode seed instead, as the authors' notebook did).

Observation: ``(10, 9)`` float32 matrix of arm features (``env.unwrapped.per_arm_features`` is True);
``env.unwrapped.num_items`` is the number of distinct videos (for the embedding).  Data: your copy of KuaiRec 2.0
(``data_dir`` holding ``small_matrix.csv`` and ``item_daily_features.csv``) or ``synthetic=True``.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np

from banditkit import datasets
from banditkit.environments.base import Episode, TableBandit, announce_synthetic, data_box, row_order, streams


class KuaiRecBandit(TableBandit):
    """KuaiRec rounds of ``block`` videos (see the module docstring); ``max_steps=None`` = all rounds."""

    default_model = "embedding_mlp"
    per_arm_features = True

    def __init__(self, max_steps: int | None = None, *, data_dir: str | os.PathLike | None = None,
                 synthetic: bool = False, block: int = 10, shuffle: bool = False):
        raw = datasets.load("kuairec", data_dir=data_dir, synthetic=synthetic)
        self.rounds = datasets.kuairec_rounds(raw["interactions"], raw["daily"], block=int(block))
        n = len(self.rounds["rewards"])
        if n == 0:
            raise ValueError("the KuaiRec files gave no complete round; check that the dates of small_matrix.csv and "
                             "item_daily_features.csv overlap")
        max_steps = n if max_steps is None else max_steps
        super().__init__(max_steps)
        if synthetic:
            announce_synthetic(self, "KuaiRec")
        self.shuffle = bool(shuffle)
        if self.max_steps > n and not self.shuffle:
            raise ValueError(f"max_steps={self.max_steps} exceeds the {n} rounds in time order; lower it or pass "
                             f"shuffle=True")
        self.num_rounds = n
        self.num_items = int(self.rounds["num_videos"])
        self.num_actions = int(block)
        feats = self.rounds["features"]
        self.observation_space = data_box(feats)
        self.action_space = gym.spaces.Discrete(self.num_actions)

    def _episode(self, seed: int, steps: int) -> Episode:
        if self.shuffle:
            (rng,) = streams(seed, 1)
            rows = row_order(rng, self.num_rounds, steps, replace=False)
        else:
            if steps > self.num_rounds:
                raise ValueError(f"steps={steps} exceeds the {self.num_rounds} KuaiRec rounds (time order)")
            rows = np.arange(steps)
        rew = self.rounds["rewards"][rows]
        return self._rows_episode(self.rounds["features"], np.asarray, rows, rew, rew)
