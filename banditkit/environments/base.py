"""``TableBandit``: the Gymnasium shell around an episode table, shared by every bandit environment.

A subclass implements ``_episode(seed, steps) -> Episode`` (NumPy arrays: contexts pool ``(N, *obs_shape)``,
``index (steps,)``, ``rewards (steps, K)``, ``expected (steps, K)``), built only from
``np.random.SeedSequence(seed)`` streams (see :func:`streams`).  Then

* ``reset(seed=s)`` builds the episode table for ``s`` (``reset()`` without a seed draws a fresh episode seed from
  ``self.np_random``) and returns ``contexts[index[0]]``;
* ``step(a)`` returns ``(next observation, rewards[t, a], False, t + 1 == max_steps, info)`` with
  ``info = {expected_rewards (K,), expected_reward, optimal_reward, optimal_action, regret, round}``;
* ``stream(seed, steps)`` returns what a loop plays (contexts, index, realised rewards) as a
  :class:`~banditkit.environments.functional.BanditStream` of JAX arrays, and ``oracle(seed, steps)`` the expected
  rewards ``(steps, K)`` that only regret is computed from; ``functional(seed, steps)`` returns both as a
  :class:`~banditkit.environments.functional.FunctionalBandit`, so compiled and Gymnasium runs of one agent give the
  same numbers.

Streams are spawned per purpose (order, noise, ...) and every draw is made row by row, so the first ``T`` rounds
of ``functional(seed, steps)`` do not depend on ``steps``.

Context pools: when the whole data set is small (at most ``SHARED_POOL_BYTES``) or an episode uses many of its rows,
the pool is the whole (preprocessed) data set, built once per environment and returned as the *same* array object
for every seed (``functional`` too), so a multi-seed compiled run can keep one copy; otherwise the pool holds only
the rows the episode uses.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from banditkit.environments.functional import BanditStream, FunctionalBandit
from banditkit.validation import check_action


class Episode(NamedTuple):
    """NumPy episode table (see :class:`FunctionalBandit` for the meaning of each field)."""

    contexts: np.ndarray
    index: np.ndarray
    rewards: np.ndarray
    expected: np.ndarray


def streams(seed: int, n: int) -> list[np.random.Generator]:
    """``n`` independent generators spawned from ``SeedSequence(seed)``."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(n)]


def check_seed(seed: Any) -> int:
    """A non-negative integer seed (``TypeError``/``ValueError`` otherwise)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be a non-negative integer, got {type(seed).__name__} {seed!r}")
    if int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    return int(seed)


def check_steps(steps: Any, name: str = "steps") -> int:
    """A positive integer number of rounds."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or int(steps) < 1:
        raise ValueError(f"{name} must be a positive integer number of rounds, got {steps!r}")
    return int(steps)


def row_order(rng: np.random.Generator, n: int, steps: int, replace: bool) -> np.ndarray:
    """Row of the data set shown at each round: i.i.d. uniform (``replace``) or consecutive random permutations
    (each row once per pass).  Prefix-consistent in ``steps``."""
    if replace:
        return rng.integers(0, n, size=steps)
    reps = -(-steps // n)
    return np.concatenate([rng.permutation(n) for _ in range(reps)])[:steps]


def pool(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(unique rows, index)`` with ``unique[index] == rows`` (the contexts pool holds each used row once)."""
    uniq, inv = np.unique(rows, return_inverse=True)
    return uniq, inv.astype(np.int32)


def data_box(values: np.ndarray) -> gym.spaces.Box:
    """A float32 ``Box`` whose per-feature bounds are the min and max of ``values (N, *obs_shape)``."""
    v = np.asarray(values, dtype=np.float32)
    return gym.spaces.Box(v.min(axis=0), v.max(axis=0), dtype=np.float32)


SHARED_POOL_BYTES = 64 * 2**20


class SyntheticDataWarning(UserWarning):
    """An environment was made on a generated look-alike of a data set, not on the real data."""


def announce_synthetic(env: TableBandit, dataset: str) -> None:
    """Mark ``env`` as running on a synthetic look-alike of ``dataset`` (``env.synthetic = True``) and warn."""
    env.synthetic = True
    warnings.warn(
        f"{type(env).__name__} runs on a small synthetic look-alike of {dataset} with the official schema, not on the "
        f"real data: its numbers say nothing about {dataset}. Pass data_dir= (your copy of the official files) for "
        f"the real set.", SyntheticDataWarning, stacklevel=3)


class TableBandit(gym.Env):
    """Base class of the bandit environments (see the module docstring).

    Attributes set by subclasses: ``num_actions``, ``observation_space``, ``action_space``; class attributes
    ``task = "bandit"``, ``default_model`` (``"mlp"``, ``"lenet5"``, ``"embedding_mlp"``), ``per_arm_features``,
    ``synthetic`` (True when the rewards come from generated data rather than a real data set: the wheel bandit,
    and every ``synthetic=True`` look-alike, which also warns with :class:`SyntheticDataWarning` when made).
    """

    metadata: dict[str, Any] = {"render_modes": []}
    synthetic = False
    task = "bandit"
    default_model = "mlp"
    per_arm_features = False
    num_actions: int

    def __init__(self, max_steps: int = 5000):
        self.max_steps = check_steps(max_steps, "max_steps")
        self._ep: Episode | None = None
        self._t = 0
        self._pool_np: np.ndarray | None = None
        self._pool_jax: Any = None

    def _rows_episode(self, data: Any, transform: Any, rows: np.ndarray, rewards: np.ndarray,
                      expected: np.ndarray) -> Episode:
        """Episode showing ``transform(data[r])`` at each round: a shared whole-set pool (see the module docstring)
        or the used rows only.  ``transform`` maps raw rows to float32 contexts."""
        n = len(data)
        row_bytes = 4 * int(np.prod(np.shape(data)[1:], dtype=np.int64))
        if n * row_bytes <= SHARED_POOL_BYTES or len(rows) >= n // 4:
            if self._pool_np is None:
                full = np.asarray(transform(data), dtype=np.float32)
                full.setflags(write=False)
                self._pool_np = full
            return Episode(self._pool_np, rows.astype(np.int32), rewards, expected)
        uniq, index = pool(rows)
        return Episode(np.asarray(transform(data[uniq]), dtype=np.float32), index, rewards, expected)

    # -- to implement -------------------------------------------------------------------------------------------
    def _episode(self, seed: int, steps: int) -> Episode:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- functional form ----------------------------------------------------------------------------------------
    def episode(self, seed: int, steps: int | None = None) -> Episode:
        """The NumPy episode table for ``seed`` (``steps`` defaults to ``max_steps``)."""
        steps = self.max_steps if steps is None else check_steps(steps)
        ep = self._episode(check_seed(seed), steps)
        ctx = ep.contexts if ep.contexts is self._pool_np else np.asarray(ep.contexts, np.float32)
        return Episode(ctx, np.asarray(ep.index, np.int32),
                       np.asarray(ep.rewards, np.float32), np.asarray(ep.expected, np.float32))

    def _jax_contexts(self, ep: Episode):
        """``ep``'s contexts as a JAX array: the shared pool converted once per env, other pools per call."""
        import jax.numpy as jnp

        if ep.contexts is self._pool_np and self._pool_np is not None:
            if self._pool_jax is None:
                self._pool_jax = jnp.asarray(self._pool_np)
            return self._pool_jax
        return jnp.asarray(ep.contexts)

    def functional(self, seed: int, steps: int) -> FunctionalBandit:
        """The episode of ``reset(seed=seed)`` as JAX arrays (first ``steps`` rounds)."""
        import jax.numpy as jnp

        ep = self.episode(seed, steps)
        return FunctionalBandit(self._jax_contexts(ep), jnp.asarray(ep.index), jnp.asarray(ep.rewards),
                                jnp.asarray(ep.expected))

    def stream(self, seed: int, steps: int) -> BanditStream:
        """What a loop plays for ``reset(seed=seed)``: the contexts and realised rewards of the first ``steps`` rounds
        (no expected rewards: see :mod:`banditkit.environments.functional`)."""
        import jax.numpy as jnp

        ep = self.episode(seed, steps)
        return BanditStream(self._jax_contexts(ep), jnp.asarray(ep.index), jnp.asarray(ep.rewards))

    def oracle(self, seed: int, steps: int) -> Any:
        """The expected reward of every arm, ``(steps, K)`` JAX array, for regret only (never an agent's input)."""
        import jax.numpy as jnp

        return jnp.asarray(self.episode(seed, steps).expected)

    # -- Gymnasium API ------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        ep_seed = check_seed(seed) if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self._ep = self.episode(ep_seed, self.max_steps)
        self._t = 0
        return self._obs(0), {"episode_seed": ep_seed}

    def _obs(self, t: int) -> np.ndarray:
        assert self._ep is not None
        return self._ep.contexts[self._ep.index[t]].copy()

    def step(self, action: Any):
        if self._ep is None:
            raise RuntimeError("call reset() before step()")
        if self._t >= self.max_steps:
            raise RuntimeError(f"the episode ended after max_steps={self.max_steps} rounds; call reset()")
        a = check_action(action, self.num_actions)
        t = self._t
        exp_t = self._ep.expected[t]
        best = int(np.argmax(exp_t))
        info = {"expected_rewards": exp_t.copy(), "expected_reward": float(exp_t[a]),
                "optimal_reward": float(exp_t[best]), "optimal_action": best,
                "regret": float(exp_t[best]) - float(exp_t[a]), "round": t}
        reward = float(self._ep.rewards[t, a])
        self._t += 1
        truncated = self._t >= self.max_steps
        obs = self._obs(min(self._t, self.max_steps - 1))
        return obs, reward, False, truncated, info

    def __str__(self) -> str:
        return f"<{type(self).__name__} num_actions={self.num_actions} max_steps={self.max_steps}>"
