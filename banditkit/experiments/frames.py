"""The rows of a run: the tidy frame's columns, the ``record`` / ``propensities`` columns, where finished chunks go
(a CSV, a callback) and the progress bar.

One row per (agent, seed, step): ``agent, seed, step, action, reward, expected_reward, optimal_reward, regret,
cumulative_regret, synthetic`` (:data:`COLUMNS`), with ``regret = optimal_reward − expected_reward`` and
``cumulative_regret`` its running sum over the seed's rounds; then the ``record`` columns, and ``propensity`` when
asked for (:mod:`banditkit.experiments.runner`).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
import pandas as pd

COLUMNS = [
    "agent",
    "seed",
    "step",
    "action",
    "reward",
    "expected_reward",
    "optimal_reward",
    "regret",
    "cumulative_regret",
    "synthetic",
]



def is_synthetic(env) -> bool:
    """Whether ``env`` runs on generated data rather than a real data set (``env.unwrapped.synthetic``: the wheel
    bandit and every ``synthetic=True`` look-alike; ``False`` for an env that does not say)."""
    return bool(getattr(getattr(env, "unwrapped", env), "synthetic", False))



def _frame(name, seeds, actions, rewards, expected, optimal, offsets=None, start=0, recorded=None,
           synthetic: bool = False) -> pd.DataFrame:
    """Long frame from ``(S, T)`` arrays; ``offsets (S,)`` = cumulative regret before ``start``; ``synthetic``: the
    env's :func:`is_synthetic`, repeated in every row; ``recorded``: ``{column: (S, T)}`` appended after the standard
    columns (``run(record=...)``)."""
    actions, rewards, expected, optimal = (np.asarray(a) for a in (actions, rewards, expected, optimal))
    s, t = actions.shape
    regret = optimal.astype(np.float64) - expected.astype(np.float64)
    cum = np.cumsum(regret, axis=1) + (0.0 if offsets is None else np.asarray(offsets)[:, None])
    extra = {k: np.asarray(v, np.float64).reshape(s * t) for k, v in (recorded or {}).items()}
    return pd.DataFrame(
        {
            "agent": np.repeat(np.array([name], dtype=object), s * t),
            "seed": np.repeat(np.asarray(seeds, np.int64), t),
            "step": np.tile(np.arange(start, start + t, dtype=np.int64), s),
            "action": actions.astype(np.int64).ravel(),
            "reward": rewards.astype(np.float64).ravel(),
            "expected_reward": expected.astype(np.float64).ravel(),
            "optimal_reward": optimal.astype(np.float64).ravel(),
            "regret": regret.ravel(),
            "cumulative_regret": cum.ravel(),
            "synthetic": np.full(s * t, bool(synthetic)),
        }
        | extra
    )



def _check_record(record) -> dict[str, Callable]:
    """``run(record=...)``: ``{column: fn(agent_state) -> scalar}``, checked; ``{}`` for ``None``."""
    if record is None:
        return {}
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict {{column: fn(agent_state) -> number}}, got {type(record).__name__}")
    for k, fn in record.items():
        if not isinstance(k, str) or not k or k in COLUMNS:
            raise ValueError(f"record: column name {k!r} must be a non-empty string other than {COLUMNS}")
        if not callable(fn):
            raise TypeError(f"record[{k!r}] must be a function of the agent state, got {type(fn).__name__}")
    return dict(record)



PROPENSITY = "propensity"  # the column of run(propensities=...)
DEFAULT_PROPENSITY_DRAWS = 256



def _propensity_draws(propensities, agent, record: dict) -> int:
    """``run(propensities=...)`` as a number of Monte-Carlo draws (0: off; ``True``: 256), checked."""
    if propensities is False or propensities is None or propensities == 0:
        return 0
    draws = DEFAULT_PROPENSITY_DRAWS if propensities is True else propensities
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
        raise ValueError(f"propensities must be True/False or a number of Monte-Carlo draws >= 1, got {propensities!r}")
    if not hasattr(agent, "propensity"):
        raise TypeError(f"propensities=True needs an agent with a propensity method (a BanditAgent), got {agent!r}")
    if PROPENSITY in record:
        raise ValueError(f"record has a column {PROPENSITY!r}, which propensities=True writes; rename it")
    return int(draws)



def _recorded(record: dict[str, Callable], state) -> tuple:
    """The ``record`` functions of the agent state after a round's ``observe``: one scalar each (NaN where a function
    returns ``None``: it does not apply to this agent)."""
    out = []
    for k, fn in record.items():
        v = fn(state)
        v = jnp.asarray(jnp.nan if v is None else v)
        if v.size != 1:
            raise ValueError(f"record[{k!r}] must return one number per round, got an array of shape {v.shape}")
        out.append(v.reshape(()))
    return tuple(out)



class _Sink:
    """Collects chunk frames; appends them to ``csv_path`` and calls ``on_chunk`` as they finish."""

    def __init__(self, csv_path, on_chunk):
        self.frames: list[pd.DataFrame] = []
        self.csv_path = os.fspath(csv_path) if csv_path is not None else None
        self.on_chunk = on_chunk
        self._header = self.csv_path is None or not os.path.exists(self.csv_path)

    def add(self, df: pd.DataFrame):
        self.frames.append(df)
        if self.csv_path is not None:
            df.to_csv(self.csv_path, mode="a", header=self._header, index=False)
            self._header = False
        if self.on_chunk is not None:
            self.on_chunk(df)

    def frame(self) -> pd.DataFrame:
        if not self.frames:
            return pd.DataFrame(columns=COLUMNS)
        df = pd.concat(self.frames, ignore_index=True)
        return df.sort_values(["seed", "step"], kind="stable").reset_index(drop=True)



def _progress(total, desc, enabled):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False)
