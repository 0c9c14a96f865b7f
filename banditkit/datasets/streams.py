"""Non-stationary prequential streams built from a labelled set ``(X, y)`` (seed 000 §4.2, seed 001 §4.2).

Every builder draws ``steps`` examples from ``X (N, ...)`` with labels ``y (N,)`` (integers ``0..K-1``), is
deterministic given ``seed`` (``numpy.random.default_rng``), needs no JAX, and returns a :class:`Stream`::

    xs (T, ...) float32   inputs (``uint8`` images are scaled to [0, 1]; ``flatten=True`` gives (T, D))
    ys (T, C)   float32   one-hot labels (classification) or a (T, 1) target (regression)
    task_ids (T,) int     which task / segment each step belongs to
    boundaries (M,) int   the first step of each task (``boundaries[0] == 0``)
    task                  "classification" | "regression"
    info                  builder-specific metadata (permutations, class pairs, angles, label maps, ...)

The learner never sees ``task_ids`` / ``boundaries`` (seed 000 footnote 1); they are for plotting and metrics.

Builders
--------
``stationary``    i.i.d. draws (without replacement while the pool lasts).
``permuted``      a new fixed random pixel permutation every ``task_len`` steps (seed 000: 300 steps, 10 tasks);
                  the permutation is constant within a task.
``split``         tasks = groups of classes (default pairs (0,1), (2,3), ...), ``steps / n_tasks`` each; labels
                  stay global one-hot over all classes (task-agnostic, class-incremental; seed 001's Split-CIFAR);
                  ``relabel=True`` gives within-task labels instead (domain-incremental, ``C = classes_per_task``).
``rotating``      images rotated by a slowly varying angle ``α_t``.  ``schedule="ou"``: seed 000's
                  Ornstein–Uhlenbeck process ``α_{t+1} = α_t + θ dt (μ − α_t) + σ √(2 θ dt) ε_t``, ``α_0 = μ``,
                  ``dt = 1/steps`` (classification μ = 45, σ = 15; regression μ = 90, σ = 30; θ = 10);
                  ``schedule="linear"``: a monotone sweep from ``angle_range[0]`` to ``angle_range[1]``.
                  ``target="class"`` (one-hot) or ``"angle"`` (regression on the images of ``angle_class``,
                  seed 000 uses class 2; target ``(α − μ)/σ`` standardised, ``info["angle_mean"/"angle_scale"]``
                  convert back to degrees).  Task ids: consecutive windows of ``window`` steps.
``label_switch``  i.i.d. inputs; every ``switch_every`` steps the class labels are remapped by a fresh random
                  permutation of the classes (the first segment uses the identity): the input distribution is
                  fixed, ``p(y | x)`` jumps (seed 001's setting where a learned forgetting γ should beat γ = 1).

``load_xy(name)`` gives ``(X, y)`` for ``"mnist"`` / ``"fashion_mnist"`` from the cache (``banditkit data fetch``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Stream", "stationary", "permuted", "split", "rotating", "label_switch", "load_xy", "BUILDERS"]


@dataclass(frozen=True)
class Stream:
    """A prequential stream: inputs, targets and task metadata (see the module docstring)."""

    xs: np.ndarray
    ys: np.ndarray
    task_ids: np.ndarray
    boundaries: np.ndarray
    task: str
    name: str
    info: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.xs.shape[0])

    @property
    def num_outputs(self) -> int:
        return int(self.ys.shape[1])

    def head(self, steps: int) -> Stream:
        """The first ``steps`` steps (metadata cut to match)."""
        steps = int(steps)
        if not 1 <= steps <= len(self):
            raise ValueError(f"steps must be in 1..{len(self)} for stream {self.name!r}, got {steps}")
        info = {k: (v[:steps] if isinstance(v, np.ndarray) and v.shape[:1] == (len(self),) else v)
                for k, v in self.info.items()}
        return Stream(self.xs[:steps], self.ys[:steps], self.task_ids[:steps],
                      self.boundaries[self.boundaries < steps], self.task, self.name, info)


# ------------------------------------------------------------------------------------------------------ helpers
def _check(x: np.ndarray, y: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray, int]:
    x, y = np.asarray(x), np.asarray(y)
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(f"X and y must have the same non-zero length, got {x.shape} and {y.shape}")
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"y must be a 1-D array of integer class labels, got shape {y.shape} dtype {y.dtype}")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return x, y.astype(np.int64), int(y.max()) + 1


def _draw(rng: np.random.Generator, pool: np.ndarray, n: int) -> np.ndarray:
    """``n`` indices from ``pool``: a random order without replacement, reshuffled each time the pool runs out."""
    pool = np.asarray(pool)
    if pool.size == 0:
        raise ValueError("cannot draw from an empty pool of examples")
    reps = -(-n // pool.size)
    return np.concatenate([rng.permutation(pool) for _ in range(reps)])[:n]


def _inputs(x: np.ndarray, flatten: bool) -> np.ndarray:
    out = x.astype(np.float32) / 255.0 if x.dtype == np.uint8 else x.astype(np.float32)
    return out.reshape(out.shape[0], -1) if flatten else out


def _one_hot(labels: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k, dtype=np.float32)[labels]


def _segments(steps: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    ids = np.arange(steps) // int(length)
    return ids, np.arange(0, steps, int(length))


# ----------------------------------------------------------------------------------------------------- builders
def stationary(x, y, steps: int, *, seed: int = 0, flatten: bool = True) -> Stream:
    """I.i.d. stream of ``steps`` examples (one task)."""
    x, y, k = _check(x, y, steps)
    idx = _draw(np.random.default_rng(seed), np.arange(len(y)), steps)
    return Stream(_inputs(x[idx], flatten), _one_hot(y[idx], k), np.zeros(steps, np.int64), np.array([0]),
                  "classification", "stationary", {"index": idx})


def permuted(x, y, steps: int, *, task_len: int = 300, seed: int = 0, flatten: bool = True) -> Stream:
    """A new random pixel permutation every ``task_len`` steps, fixed within a task (``info["perms"] (M, D)``)."""
    x, y, k = _check(x, y, steps)
    rng = np.random.default_rng(seed)
    idx = _draw(rng, np.arange(len(y)), steps)
    ids, bounds = _segments(steps, task_len)
    d = int(np.prod(x.shape[1:]))
    perms = np.stack([rng.permutation(d) for _ in bounds])
    flat = _inputs(x[idx], True)
    xs = np.take_along_axis(flat, perms[ids], axis=1)
    if not flatten:
        xs = xs.reshape((steps, *x.shape[1:]))
    return Stream(xs, _one_hot(y[idx], k), ids, bounds, "classification", "permuted",
                  {"index": idx, "perms": perms, "task_len": int(task_len)})


def split(
    x, y, steps: int, *, groups: Sequence[Sequence[int]] | None = None, classes_per_task: int = 2,
    relabel: bool = False, seed: int = 0, flatten: bool = True,
) -> Stream:
    """Tasks = class groups (default consecutive pairs), ``steps // n_tasks`` steps each (the last takes the rest)."""
    x, y, k = _check(x, y, steps)
    if groups is None:
        groups = [list(range(i, min(i + classes_per_task, k))) for i in range(0, k, classes_per_task)]
    groups = [list(map(int, g)) for g in groups]
    if relabel and len({len(g) for g in groups}) != 1:
        raise ValueError("relabel=True needs groups of equal size")
    rng = np.random.default_rng(seed)
    n = len(groups)
    lens = [steps // n] * n
    lens[-1] += steps - sum(lens)
    idx_parts, ids = [], []
    for t, (g, length) in enumerate(zip(groups, lens, strict=True)):
        idx_parts.append(_draw(rng, np.flatnonzero(np.isin(y, g)), length))
        ids.append(np.full(length, t, np.int64))
    idx, ids = np.concatenate(idx_parts), np.concatenate(ids)
    bounds = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    if relabel:
        pos = {c: i for g in groups for i, c in enumerate(g)}
        ys = _one_hot(np.array([pos[c] for c in y[idx]]), len(groups[0]))
    else:
        ys = _one_hot(y[idx], k)
    return Stream(_inputs(x[idx], flatten), ys, ids, bounds, "classification", "split",
                  {"index": idx, "groups": groups})


def rotation_angles(steps: int, *, schedule: str = "ou", mean: float = 45.0, std: float = 15.0,
                    theta: float = 10.0, angle_range: tuple[float, float] = (0.0, 180.0),
                    rng: np.random.Generator | None = None) -> np.ndarray:
    """Angles ``(T,)`` in degrees: seed 000's OU process (``dt = 1/T``) or a linear monotone sweep."""
    if schedule == "linear":
        return np.linspace(angle_range[0], angle_range[1], steps)
    if schedule != "ou":
        raise ValueError(f"schedule must be 'ou' or 'linear', got {schedule!r}")
    rng = rng if rng is not None else np.random.default_rng(0)
    dt = 1.0 / steps
    eps = rng.standard_normal(steps)
    out = np.empty(steps)
    a = mean
    for t in range(steps):
        out[t] = a
        a = a + theta * dt * (mean - a) + std * np.sqrt(2 * theta * dt) * eps[t]
    return out


def _rotate(images: np.ndarray, angles: np.ndarray) -> np.ndarray:
    from scipy.ndimage import rotate

    return np.stack([rotate(im, float(a), reshape=False, order=1, mode="constant") for im, a in
                     zip(images, angles, strict=True)])


def rotating(
    x, y, steps: int, *, target: str = "class", schedule: str = "ou", mean: float | None = None,
    std: float | None = None, theta: float = 10.0, angle_range: tuple[float, float] = (0.0, 180.0),
    angle_class: int = 2, window: int = 200, seed: int = 0, flatten: bool = True,
) -> Stream:
    """Images ``X (N, H, W)`` rotated by a slowly varying angle (see the module docstring)."""
    x, y, k = _check(x, y, steps)
    if x.ndim != 3:
        raise ValueError(f"rotating needs images X of shape (N, H, W), got {x.shape}")
    if target not in ("class", "angle"):
        raise ValueError(f"target must be 'class' or 'angle', got {target!r}")
    if mean is None:
        mean = 45.0 if target == "class" else 90.0
    if std is None:
        std = mean / 3.0
    rng = np.random.default_rng(seed)
    pool = np.arange(len(y)) if target == "class" else np.flatnonzero(y == angle_class)
    idx = _draw(rng, pool, steps)
    angles = rotation_angles(steps, schedule=schedule, mean=mean, std=std, theta=theta, angle_range=angle_range,
                             rng=rng)
    xs = _rotate(_inputs(x[idx], False), angles)
    if flatten:
        xs = xs.reshape(steps, -1)
    if schedule == "linear":
        mean, std = float(np.mean(angle_range)), float(np.ptp(angle_range)) / 2 or 1.0
    if target == "class":
        ys, task = _one_hot(y[idx], k), "classification"
    else:
        ys, task = ((angles - mean) / std).astype(np.float32)[:, None], "regression"
    ids, bounds = _segments(steps, window)
    return Stream(xs.astype(np.float32), ys, ids, bounds, task, f"rotating_{target}",
                  {"index": idx, "angles": angles, "angle_mean": float(mean), "angle_scale": float(std)})


def label_switch(x, y, steps: int, *, switch_every: int = 500, seed: int = 0, flatten: bool = True) -> Stream:
    """Fixed inputs, labels remapped by a new random class permutation every ``switch_every`` steps."""
    x, y, k = _check(x, y, steps)
    rng = np.random.default_rng(seed)
    idx = _draw(rng, np.arange(len(y)), steps)
    ids, bounds = _segments(steps, switch_every)
    maps = np.stack([np.arange(k)] + [rng.permutation(k) for _ in bounds[1:]])
    labels = maps[ids, y[idx]]
    return Stream(_inputs(x[idx], flatten), _one_hot(labels, k), ids, bounds, "classification", "label_switch",
                  {"index": idx, "label_maps": maps, "switch_every": int(switch_every)})


BUILDERS = {"stationary": stationary, "permuted": permuted, "split": split, "rotating": rotating,
            "label_switch": label_switch}


def load_xy(name: str, split_name: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """``(X (N, 28, 28) uint8, y (N,) int64)`` of ``"mnist"`` / ``"fashion_mnist"`` from the local cache."""
    from banditkit.datasets.loaders import load

    d = load(name)
    return np.asarray(d[f"X_{split_name}"]), np.asarray(d[f"y_{split_name}"]).astype(np.int64)
