"""Classification bandits: the context is a labelled example, the arms are the classes, and the reward is 1 for the
true class and 0 otherwise (deterministic; expected = realised).  Regret = number of mistakes.

* :class:`ClassificationBandit` ``(X, y)`` turns any labelled set into a bandit (z-scored contexts by default, as
  the showdown's ``classification_to_bandit_problem``).
* ``MNIST`` / ``FashionMNIST``: 784 pixels / 255 (``split`` = ``"train"`` 60k, ``"test"`` 10k, ``"all"`` 70k),
  10 arms (seed 002: reward 1/0; seed 003's bsuite bandit ±1 is the affine image ``2r - 1``).
* ``Shuttle`` (7 arms), ``Adult`` (14 occupations), ``Covertype`` (7), ``Census`` (9): the showdown's data sets and
  preprocessing (:mod:`banditkit.environments.preprocess`).

Rows are shown in consecutive random permutations (each row once per pass; ``replace=True`` draws i.i.d.).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import gymnasium as gym
import numpy as np

from banditkit import datasets
from banditkit.environments import preprocess
from banditkit.environments.base import Episode, TableBandit, announce_synthetic, row_order, streams


@functools.lru_cache(maxsize=4)
def _table_arrays(name: str) -> tuple:
    """Preprocessed committed tables, computed once per process (arrays are read-only)."""
    out = getattr(preprocess, name)(datasets.load(name))
    for a in out:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return tuple(out)


class ClassificationBandit(TableBandit):
    """Any labelled data set as a ``K``-armed contextual bandit.

    Args:
      X: ``(N, ...)`` numeric features (any dtype; converted to float32 per episode).
      y: ``(N,)`` integer labels in ``[0, num_actions)``.
      num_actions: number of arms (default ``max(y) + 1``).
      max_steps: rounds per episode.
      replace: draw rows i.i.d. instead of in permutations.
      standardize: z-score the columns of ``X`` (once, over the whole set).
      scale: multiply ``X`` by this instead (e.g. ``1/255`` for images); exclusive with ``standardize``.
    """

    def __init__(self, X: Any, y: Any, *, num_actions: int | None = None, max_steps: int = 5000,
                 replace: bool = False, standardize: bool = True, scale: float | None = None):
        super().__init__(max_steps)
        X = np.asarray(X)
        y = np.asarray(y)
        if X.ndim < 2 or not np.issubdtype(X.dtype, np.number):
            raise ValueError(f"X must be a numeric array (N, features...), got dtype {X.dtype} shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            if np.issubdtype(y.dtype, np.floating) and np.all(y == np.round(y)):
                y = y.astype(np.int64)
            else:
                raise TypeError(f"y must hold integer class labels, got dtype {y.dtype}")
        k = int(y.max()) + 1 if num_actions is None else int(num_actions)
        if y.min() < 0 or y.max() >= k:
            raise ValueError(f"labels must lie in [0, {k}), got range [{y.min()}, {y.max()}]")
        if standardize and scale is not None:
            raise ValueError("pass standardize=True or scale=..., not both")
        if standardize:
            flat = preprocess.zscore(X.reshape(len(X), -1))
            X = flat.reshape(X.shape)
        self._X, self._y, self._scale, self.replace = X, y.astype(np.int64), scale, bool(replace)
        self.num_actions = k
        lo, hi = X.min(axis=0).astype(np.float32), X.max(axis=0).astype(np.float32)
        if scale is not None:
            lo, hi = np.minimum(lo, 0) * np.float32(scale), hi * np.float32(scale)
        self.observation_space = gym.spaces.Box(lo, hi, dtype=np.float32)
        self.action_space = gym.spaces.Discrete(k)

    @property
    def num_rows(self) -> int:
        return int(self._X.shape[0])

    def _episode(self, seed: int, steps: int) -> Episode:
        (rng,) = streams(seed, 1)
        rows = row_order(rng, self.num_rows, steps, self.replace)
        onehot = np.eye(self.num_actions, dtype=np.float32)[self._y[rows]]
        return self._rows_episode(self._X, self._transform, rows, onehot, onehot)

    def _transform(self, x: np.ndarray) -> np.ndarray:
        ctx = x.astype(np.float32)
        return ctx * np.float32(self._scale) if self._scale is not None else ctx


class _ImageBandit(ClassificationBandit):
    default_model = "lenet5"
    dataset = "mnist"

    def __init__(self, max_steps: int = 5000, split: str = "train", replace: bool = False):
        if split not in ("train", "test", "all"):
            raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
        d = datasets.load(self.dataset)
        if split == "train":
            X, y = d["X_train"], d["y_train"]
        elif split == "test":
            X, y = d["X_test"], d["y_test"]
        else:
            X, y = np.concatenate([d["X_train"], d["X_test"]]), np.concatenate([d["y_train"], d["y_test"]])
        super().__init__(X.reshape(len(X), 784), y, num_actions=10, max_steps=max_steps, replace=replace,
                         standardize=False, scale=1.0 / 255.0)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(784,), dtype=np.float32)


class MNISTBandit(_ImageBandit):
    """MNIST digits (``bk.datasets.load("mnist")``; run ``banditkit data fetch mnist`` first), 10 arms."""

    dataset = "mnist"


class FashionMNISTBandit(_ImageBandit):
    """Fashion-MNIST (``banditkit data fetch fashion_mnist`` first), 10 arms."""

    dataset = "fashion_mnist"


class ShuttleBandit(ClassificationBandit):
    """Statlog Shuttle (committed table, 58,000 rows), 7 arms, z-scored 9-d contexts."""

    def __init__(self, max_steps: int = 5000, replace: bool = False):
        X, y = _table_arrays("shuttle")
        super().__init__(X, y, num_actions=7, max_steps=max_steps, replace=replace, standardize=False)


class AdultBandit(ClassificationBandit):
    """UCI Adult (committed table): 14 arms = occupations, 92-d showdown context."""

    def __init__(self, max_steps: int = 5000, replace: bool = False):
        X, y, names = _table_arrays("adult")
        self.class_names = list(names)
        super().__init__(X, y, num_actions=14, max_steps=max_steps, replace=replace, standardize=False)


class CovertypeBandit(ClassificationBandit):
    """UCI Covertype, 7 arms: your copy (``data_dir`` with ``covtype.data.gz``) or ``synthetic=True``."""

    def __init__(self, max_steps: int = 5000, *, data_dir: str | os.PathLike | None = None, synthetic: bool = False,
                 replace: bool = False):
        X, y = preprocess.covertype(datasets.load("covertype", data_dir=data_dir, synthetic=synthetic))
        super().__init__(X, y, num_actions=7, max_steps=max_steps, replace=replace, standardize=False)
        if synthetic:
            announce_synthetic(self, "UCI Covertype")


class CensusBandit(ClassificationBandit):
    """US Census 1990, 9 arms (``dOccup``): your copy (``data_dir``) or ``synthetic=True``."""

    def __init__(self, max_steps: int = 5000, *, data_dir: str | os.PathLike | None = None, synthetic: bool = False,
                 replace: bool = False, max_rows: int = 150_000):
        X, y = preprocess.census(datasets.load("census", data_dir=data_dir, synthetic=synthetic), max_rows=max_rows)
        super().__init__(X, y, num_actions=9, max_steps=max_steps, replace=replace, standardize=False)
        if synthetic:
            announce_synthetic(self, "US Census 1990")
