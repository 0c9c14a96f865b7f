"""MovieLens-100k as a low-rank recommender bandit (the TF-Agents ``MovieLensPyEnvironment`` construction, as used by
seed 002).

1. ``A`` = dense ``943 x 1682`` rating matrix (0 = unrated); keep the first ``num_movies`` movie columns and drop
   the users with no rating among them (737 users remain for ``num_movies=20``);
2. SVD ``A = U S Vᵀ``; keep ``rank`` components;
3. context of user ``i``: ``u_i ⊙ sqrt(s)`` (``rank`` numbers); arms = the ``num_movies`` movies; reward of movie
   ``j`` = ``(U_k S_k V_kᵀ)[i, j]`` (deterministic, expected = realised);
4. users are shown in consecutive random permutations.

**Caveat.** With ``rank == num_movies`` (the seeds' and TF-Agents' default 20/20) the rank-``k`` approximation is
exact: rewards are the raw ratings 1-5 and **0 for an unrated movie** (``env.unwrapped.degenerate`` is True).
Use ``rank < num_movies`` (e.g. ``rank=20, num_movies=50``) for a smoothed, "imputed" reward table.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from banditkit import datasets
from banditkit.environments.base import Episode, TableBandit, data_box, row_order, streams


def rating_matrix(ratings: pd.DataFrame, num_movies: int) -> np.ndarray:
    """Dense ``(users with a rating among movies 1..num_movies, num_movies)`` matrix, 0 for unrated."""
    r = ratings[ratings["movie_id"] <= num_movies]
    n_users = int(ratings["user_id"].max())
    a = np.zeros((n_users, num_movies))
    a[r["user_id"].to_numpy() - 1, r["movie_id"].to_numpy() - 1] = r["rating"].to_numpy()
    return a[(a > 0).any(axis=1)]


def low_rank_tables(a: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """``(contexts (users, rank) = U_k sqrt(S_k), rewards (users, movies) = U_k S_k V_kᵀ)``."""
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    u, s, vt = u[:, :rank], s[:rank], vt[:rank]
    ctx = u * np.sqrt(s)
    return ctx, ctx @ (np.sqrt(s)[:, None] * vt)


class MovieLensBandit(TableBandit):
    """Low-rank MovieLens-100k simulator (see the module docstring).

    Args:
      max_steps: rounds per episode.
      rank: SVD rank ``k`` (context dimension).
      num_movies: number of arms (the first movies by id).
      ratings: a ratings DataFrame (``user_id, movie_id, rating``) to use instead of ``bk.datasets.load("movielens")``
        (which needs ``banditkit data fetch movielens``).
    """

    def __init__(self, max_steps: int = 5000, rank: int = 20, num_movies: int = 20, ratings: Any = None):
        super().__init__(max_steps)
        if not 1 <= int(num_movies) <= 1682:
            raise ValueError(f"num_movies must be in 1..1682, got {num_movies}")
        if not 1 <= int(rank) <= int(num_movies):
            raise ValueError(f"rank must be in 1..num_movies={num_movies}, got {rank}")
        ratings = datasets.load("movielens") if ratings is None else ratings
        self.rank, self.num_movies = int(rank), int(num_movies)
        a = rating_matrix(ratings, self.num_movies)
        self.degenerate = self.rank >= min(a.shape)
        ctx, rew = low_rank_tables(a, self.rank)
        self._ctx, self._rew = ctx.astype(np.float32), rew.astype(np.float32)
        self.num_users = len(a)
        self.num_actions = self.num_movies
        self.observation_space = data_box(self._ctx)
        self.action_space = gym.spaces.Discrete(self.num_actions)

    def _episode(self, seed: int, steps: int) -> Episode:
        (rng,) = streams(seed, 1)
        rows = row_order(rng, self.num_users, steps, replace=False)
        rew = self._rew[rows]
        return self._rows_episode(self._ctx, np.asarray, rows, rew, rew)
