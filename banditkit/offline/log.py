"""Logged bandit feedback: the table format, conversion to arrays, and Parquet files.

A log is one row per logged round ``i`` of a past policy π₀: the context it saw, the action ``a_i`` it took, the
reward ``r_i`` it got and, when known, its propensity ``p_i = π₀(a_i | x_i)``.

Columns (a pandas DataFrame or a Parquet file with these names; any other column is kept and passed through):

=====================  =================================================================================
``x0, x1, ..., x{d-1}``  shared context features (float), numbered from 0 without gaps
``a{k}_x{j}``          per-arm features: feature ``j`` of arm ``k`` (``k = 0..K-1``, ``j = 0..F-1``; every arm the
                       same width ``F``).  With per-arm columns the context of row ``i`` is a ``(K, d + F)``
                       matrix whose row ``k`` is ``[x0..x{d-1}, a{k}_x0..a{k}_x{F-1}]`` (the shared features
                       repeated for each arm), the input of a per-arm reward model ``f(x_k) (1,)``.
``action``             the logged arm, an integer in ``[0, K)``
``reward``             the observed reward of that arm (finite float)
``propensity``         optional: ``π₀(a_i | x_i)`` in ``(0, 1]``.  Without it a
                       :class:`~banditkit.offline.checks.MissingPropensityWarning` says that only the direct
                       method applies (IPS / SNIPS / DR / SNDR / Switch-DR refuse such a log).
``available_{k}``      optional 0/1 per arm: the arms the logging system could choose from in that round; the
                       logged action must be one of them.
=====================  =================================================================================

``K`` (the number of arms) is, in order: the ``num_actions`` argument, ``df.attrs["num_actions"]`` (the Parquet
file's metadata, which :func:`write_parquet` stores), the number of per-arm feature blocks or ``available_k``
columns, and else ``max(action) + 1`` (with a warning: arms never logged would be missing).  Inferred that way, an
arm count with a hole (arm ``j`` never logged while rows name arms above ``j``) is refused: those rows are listed
as out of range, since one stray action would otherwise silently widen the bandit; pass ``num_actions`` if the
log really has that many arms.

Validation (:mod:`banditkit.offline.checks`) reports every problem with its row numbers and drops nothing.
A context-free bandit log has one constant column ``x0 = 1``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from banditkit import checkpoint
from banditkit.offline import checks

FORMAT = "banditkit-log/1"
META_KEY = b"banditkit"
ACTION, REWARD, PROPENSITY = "action", "reward", "propensity"
_SHARED = re.compile(r"^x(\d+)$")
_PER_ARM = re.compile(r"^a(\d+)_x(\d+)$")
_AVAILABLE = re.compile(r"^available_(\d+)$")


@dataclasses.dataclass(frozen=True, eq=False)
class LoggedFeedback:
    """A validated log as arrays (build it with :func:`from_frame`, :func:`from_arrays` or :func:`read_parquet`).

    contexts:     ``(n, d)`` float32 shared contexts, or ``(n, K, F)`` per-arm feature matrices
    actions:      ``(n,)`` int64 in ``[0, K)``
    rewards:      ``(n,)`` float64
    propensities: ``(n,)`` float64 in ``(0, 1]``, or ``None`` (not logged)
    num_actions:  ``K``
    available:    ``(n, K)`` bool availability mask, or ``None`` (every arm available)
    shared_width: per-arm logs: how many leading features of each arm row are shared ``x`` columns
    extra:        the table's other columns (same rows), passed through by :meth:`to_frame`
    """

    contexts: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    propensities: np.ndarray | None
    num_actions: int
    available: np.ndarray | None = None
    shared_width: int = 0
    extra: pd.DataFrame | None = None

    def __len__(self) -> int:
        return int(self.actions.shape[0])

    @property
    def n(self) -> int:
        return len(self)

    @property
    def per_arm(self) -> bool:
        """Contexts are ``(K, F)`` feature matrices (a per-arm reward model)."""
        return self.contexts.ndim == 3

    @property
    def has_propensities(self) -> bool:
        return self.propensities is not None

    def subset(self, rows) -> LoggedFeedback:
        """The log restricted to ``rows`` (a boolean mask or integer positions), in that order."""
        idx = np.arange(len(self))[np.asarray(rows)]
        pick = lambda a: None if a is None else a[idx]
        extra = None if self.extra is None else self.extra.iloc[idx].reset_index(drop=True)
        return dataclasses.replace(
            self, contexts=self.contexts[idx], actions=self.actions[idx], rewards=self.rewards[idx],
            propensities=pick(self.propensities), available=pick(self.available), extra=extra,
        )

    def split(self, fraction: float) -> tuple[LoggedFeedback, LoggedFeedback]:
        """``(first ⌊fraction·n⌋ rows, the rest)``, in log order (a time split: train on the past)."""
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
        cut = int(np.floor(fraction * len(self)))
        if cut == 0 or cut == len(self):
            raise ValueError(f"split({fraction}) of a {len(self)}-row log leaves one side empty")
        return self.subset(np.arange(cut)), self.subset(np.arange(cut, len(self)))

    def to_frame(self) -> pd.DataFrame:
        """The table form (the module docstring's columns); ``attrs["num_actions"] = K``."""
        cols: dict[str, np.ndarray] = {}
        if self.per_arm:
            d = self.shared_width
            for j in range(d):
                cols[f"x{j}"] = self.contexts[:, 0, j]
            for k in range(self.num_actions):
                for j in range(self.contexts.shape[2] - d):
                    cols[f"a{k}_x{j}"] = self.contexts[:, k, d + j]
        else:
            for j in range(self.contexts.shape[1]):
                cols[f"x{j}"] = self.contexts[:, j]
        cols[ACTION] = self.actions
        cols[REWARD] = self.rewards
        if self.propensities is not None:
            cols[PROPENSITY] = self.propensities
        if self.available is not None:
            for k in range(self.num_actions):
                cols[f"available_{k}"] = self.available[:, k]
        df = pd.DataFrame(cols)
        if self.extra is not None:
            df = pd.concat([df, self.extra.reset_index(drop=True)], axis=1)
        df.attrs["num_actions"] = self.num_actions
        return df


# ------------------------------------------------------------------------------------------------ arrays
def from_arrays(
    contexts,
    actions,
    rewards,
    propensities=None,
    *,
    num_actions: int | None = None,
    available=None,
    shared_width: int = 0,
    extra: pd.DataFrame | None = None,
    warn: bool = True,
) -> LoggedFeedback:
    """A validated :class:`LoggedFeedback` from arrays (shapes as in its docstring); :class:`~.checks.LogError`
    lists every problem with its rows."""
    problems: list[str] = []
    contexts = np.asarray(contexts)
    actions, rewards = np.asarray(actions).reshape(-1), np.asarray(rewards).reshape(-1)
    lengths = {"contexts": len(contexts), "actions": len(actions), "rewards": len(rewards)}
    if propensities is not None:
        propensities = np.asarray(propensities).reshape(-1)
        lengths["propensities"] = len(propensities)
    if available is not None:
        available = np.asarray(available)
        lengths["available"] = len(available)
    if extra is not None:
        lengths["extra"] = len(extra)
    if not checks.check_lengths(lengths, problems):
        checks.raise_if(problems)
    if len(actions) == 0:
        checks.raise_if(["the log has no rows"])
    if contexts.ndim not in (2, 3):
        checks.raise_if([f"contexts must be (n, d) shared features or (n, K, F) per-arm features, got shape "
                         f"{contexts.shape}"])
    k_arms = int(contexts.shape[1]) if contexts.ndim == 3 else None
    k = _num_actions(num_actions, k_arms, available, actions, problems, warn)
    if available is not None and (available.ndim != 2 or available.shape[1] != k):
        problems.append(f"available must have shape (n, {k}) (one 0/1 flag per arm), got {available.shape}")
        available = None
    checks.raise_if(problems)
    x = checks.check_contexts(contexts, problems)
    a = checks.check_actions(actions, k, problems)
    r = checks.check_rewards(rewards, problems)
    p = checks.check_propensities(propensities, problems) if propensities is not None else None
    m = checks.check_available(available, a, problems) if available is not None else None
    checks.raise_if(problems)
    if propensities is None and warn:
        checks.warn_missing_propensity(stacklevel=3)
    return LoggedFeedback(x, a, r, p, int(k), m, int(shared_width),
                          None if extra is None else extra.reset_index(drop=True))


def _num_actions(given, k_arms, available, actions, problems, warn) -> int:
    """``K`` from the argument, per-arm contexts or mask widths, else ``max(action) + 1``; conflicts are problems."""
    known = {}
    if given is not None:
        if int(given) < 1:
            checks.raise_if([f"num_actions must be >= 1, got {given}"])
        known["num_actions"] = int(given)
    if k_arms is not None:
        known["per-arm feature blocks"] = int(k_arms)
    if available is not None and np.ndim(available) == 2:
        known["available_k columns"] = int(np.shape(available)[1])
    if len(set(known.values())) > 1:
        text = ", ".join(f"{name} says {v}" for name, v in known.items())
        problems.append(f"mismatched number of arms: {text}")
        return max(known.values())
    if known:
        return next(iter(known.values()))
    a = pd.to_numeric(pd.Series(actions), errors="coerce").to_numpy(np.float64)
    arms = np.isfinite(a) & (a >= 0) & (a == np.round(a))  # the rest are check_actions' problems
    present = np.unique(a[arms]).astype(np.int64)
    top = int(present.max()) if present.size else 0
    k = top + 1
    gap = int(np.flatnonzero(np.arange(present.size) != present)[0]) if present.size and top + 1 != present.size \
        else None  # the first arm index never logged below the highest one
    if gap is not None:
        rows = np.flatnonzero(arms & (a > gap))
        problems.append(
            f"action out of range: the log does not say how many arms there are (no num_actions / --num-actions, "
            f"no banditkit Parquet metadata, no a{{k}}_x{{j}} or available_k columns) and arm {gap} was never "
            f"logged, yet {checks.describe_rows(rows, a[rows])} name arms above it (up to {top}); an arm count "
            f"read from max(action) + 1 = {k} would silently widen the bandit.  If the log really has {k} (or more) "
            f"arms, pass num_actions= (--num-actions); otherwise fix or remove those rows"
        )
        return k
    if warn:
        few = np.flatnonzero(arms & (a == top))
        rare = (f"; arm {top}, the highest, is logged only in {checks.describe_rows(few)}: check it is a real arm"
                if 0 < few.size <= checks.SHOW_ROWS and len(a) > 10 * checks.SHOW_ROWS else "")
        warnings.warn(
            f"the number of arms was not given: using max(action) + 1 = {k}; pass num_actions= (write_parquet "
            f"stores it) if some arms were never logged{rare}",
            UserWarning,
            stacklevel=4,
        )
    return max(k, 1)


# ------------------------------------------------------------------------------------------------ tables
def _indexed(columns: Sequence[str], pattern: re.Pattern) -> dict:
    return {c: tuple(int(g) for g in pattern.match(c).groups()) for c in columns if pattern.match(c)}


def _gaps(found: Sequence[int]) -> list[int]:
    top = max(found, default=-1)
    return sorted(set(range(top + 1)) - set(found))


def from_frame(
    df: pd.DataFrame,
    num_actions: int | None = None,
    *,
    context_columns: Sequence[str] | None = None,
    warn: bool = True,
) -> LoggedFeedback:
    """A validated :class:`LoggedFeedback` from a table in the module docstring's layout.

    ``context_columns``: use these columns (in this order) as the shared context features instead of
    ``x0, x1, ...`` (e.g. a log with named features).  Raises :class:`~.checks.LogError` listing every problem
    with its row numbers (0-based positions); nothing is dropped.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"a log must be a pandas DataFrame (or use from_arrays), got {type(df).__name__}")
    problems: list[str] = []
    columns = [str(c) for c in df.columns]
    if len(set(columns)) != len(columns):
        dup = sorted({c for c in columns if columns.count(c) > 1})
        checks.raise_if([f"duplicate column names: {dup}"])
    df = df.set_axis(columns, axis=1)
    for col in (ACTION, REWARD):
        if col not in df.columns:
            problems.append(f"missing column {col!r} (columns present: {columns[:20]})")
    if len(df) == 0:
        problems.append("the log has no rows")
    if context_columns is not None:
        shared = [str(c) for c in context_columns]
        missing = [c for c in shared if c not in df.columns]
        if missing:
            problems.append(f"context_columns not in the table: {missing}")
    else:
        idx = _indexed(columns, _SHARED)
        shared = sorted(idx, key=lambda c: idx[c])
        gaps = _gaps([v[0] for v in idx.values()])
        if gaps:
            problems.append(
                f"mismatched context width: shared feature columns x0..x{max(v[0] for v in idx.values())} are "
                f"numbered with gaps (missing {', '.join(f'x{g}' for g in gaps[:10])})"
            )
    arm_idx = _indexed(columns, _PER_ARM)
    per_arm: dict[int, dict[int, str]] = {}
    for c, (k, j) in arm_idx.items():
        per_arm.setdefault(k, {})[j] = c
    width = 0
    if per_arm:
        missing_arms = _gaps(list(per_arm))
        if missing_arms:
            problems.append(f"mismatched per-arm layout: arms {missing_arms[:10]} have no a{{k}}_x{{j}} columns "
                            f"while arm {max(per_arm)} has")
        widths = {k: len(v) for k, v in per_arm.items()}
        for k, cols in per_arm.items():
            gaps = _gaps(list(cols))
            if gaps:
                problems.append(f"mismatched per-arm width: arm {k} lacks columns "
                                f"{', '.join(f'a{k}_x{g}' for g in gaps[:10])}")
        if len(set(widths.values())) > 1:
            text = ", ".join(f"arm {k}: {w}" for k, w in sorted(widths.items())[:10])
            problems.append(f"mismatched per-arm feature widths (every arm needs the same F): {text}")
        width = max(widths.values())
    if not shared and not per_arm:
        problems.append("no context columns: name them x0, x1, ... (shared) or a{k}_x{j} (per-arm), or pass "
                        "context_columns=; for a context-free bandit add a constant column x0 = 1")
    avail_idx = _indexed(columns, _AVAILABLE)
    avail_cols = sorted(avail_idx, key=lambda c: avail_idx[c])
    if avail_cols and _gaps([v[0] for v in avail_idx.values()]):
        problems.append(f"available_k columns are numbered with gaps: {avail_cols[:10]}")
    checks.raise_if(problems)

    if per_arm:
        context_names = shared + [per_arm[k][j] for k in range(max(per_arm) + 1) for j in range(width)]
    else:
        context_names = list(shared)
    given = num_actions if num_actions is not None else df.attrs.get("num_actions")
    available = df[avail_cols].to_numpy() if avail_cols else None
    k_arms = max(per_arm) + 1 if per_arm else None
    k = _num_actions(given, k_arms, available, df[ACTION].to_numpy(), problems, warn)
    checks.raise_if(problems)
    x = _frame_contexts(df, shared, per_arm, width, problems, context_names)
    a = checks.check_actions(df[ACTION].to_numpy(), k, problems)
    r = checks.check_rewards(df[REWARD].to_numpy(), problems)
    p = checks.check_propensities(df[PROPENSITY].to_numpy(), problems) if PROPENSITY in df.columns else None
    m = checks.check_available(available, a, problems) if available is not None else None
    checks.raise_if(problems)
    if PROPENSITY not in df.columns and warn:
        checks.warn_missing_propensity(stacklevel=3)
    used = set(context_names) | {ACTION, REWARD, PROPENSITY} | set(avail_cols)
    rest = [c for c in df.columns if c not in used]
    extra = df[rest].reset_index(drop=True) if rest else None
    return LoggedFeedback(x, a, r, p, int(k), m, len(shared) if per_arm else 0, extra)


def _frame_contexts(df, shared, per_arm, width, problems, names) -> np.ndarray | None:
    """The contexts, checked column by column so a non-numeric or NaN feature names its column and rows."""
    flat = df[names]
    numeric = []
    for c in names:
        col = flat[c]
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
            conv = pd.to_numeric(col, errors="coerce")
            bad = np.flatnonzero(conv.isna().to_numpy() & col.notna().to_numpy())
            if bad.size:
                problems.append(f"context column {c!r} is not numeric (encode categorical features first): "
                                f"{checks.describe_rows(bad, col.to_numpy()[bad])}")
                continue
            col = conv
        numeric.append(col.to_numpy(np.float64))
    if problems:
        return None
    mat = np.stack(numeric, axis=1)
    x = checks.check_contexts(mat, problems, columns=list(names))
    if x is None:
        return None
    if not per_arm:
        return x
    k_arms, d = max(per_arm) + 1, len(shared)
    arm = x[:, d:].reshape(len(x), k_arms, width)
    if d:
        return np.concatenate([np.repeat(x[:, None, :d], k_arms, axis=1), arm], axis=2)
    return arm


# ------------------------------------------------------------------------------------------------ Parquet
def write_parquet(log: LoggedFeedback | pd.DataFrame, path: str | os.PathLike) -> str:
    """Write a log to a Parquet file atomically (a temporary file moved into place); returns the path.

    A DataFrame is validated first (:func:`from_frame`).  ``K`` and the format name are stored in the file's
    key-value metadata under ``banditkit``, so :func:`read_parquet` recovers arms that were never logged.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(log, pd.DataFrame):
        log = from_frame(log, warn=False)
    if not isinstance(log, LoggedFeedback):
        raise TypeError(f"write_parquet needs a LoggedFeedback or a DataFrame, got {type(log).__name__}")
    table = pa.Table.from_pandas(log.to_frame(), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[META_KEY] = json.dumps(dict(format=FORMAT, num_actions=log.num_actions)).encode()
    table = table.replace_schema_metadata(meta)
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    os.makedirs(folder, exist_ok=True)
    with checkpoint.atomic_file(target, ".parquet") as tmp:
        pq.write_table(table, tmp)
    return target


def read_parquet(path: str | os.PathLike, num_actions: int | None = None, **kwargs) -> LoggedFeedback:
    """Read and validate a Parquet log (``K`` from ``num_actions``, else the file's metadata, else the columns);
    other keyword arguments go to :func:`from_frame`."""
    import pyarrow.parquet as pq

    target = os.fspath(path)
    if not os.path.exists(target):
        raise FileNotFoundError(f"log file {target!r} does not exist")
    table = pq.read_table(target)
    df = table.to_pandas()
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is not None:
        info = json.loads(raw.decode())
        df.attrs["num_actions"] = int(info["num_actions"])
    return from_frame(df, num_actions, **kwargs)


def load(source, num_actions: int | None = None, **kwargs) -> LoggedFeedback:
    """A :class:`LoggedFeedback` from a log, a DataFrame, a ``.parquet`` / ``.csv`` file path, or a decision
    service's store (an SQLite file, recognised by its content: :func:`banditkit.offline.store.read_store`)."""
    if isinstance(source, LoggedFeedback):
        if num_actions is not None and int(num_actions) != source.num_actions:
            raise ValueError(f"num_actions={num_actions} but the log has {source.num_actions} arms")
        return source
    if isinstance(source, pd.DataFrame):
        return from_frame(source, num_actions, **kwargs)
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        from banditkit.offline import store

        if store.is_store(p):
            return store.read_store(p, num_actions)[0]
        if p.lower().endswith(".csv"):
            if not os.path.exists(p):
                raise FileNotFoundError(f"log file {p!r} does not exist")
            return from_frame(pd.read_csv(p), num_actions, **kwargs)
        return read_parquet(p, num_actions, **kwargs)
    raise TypeError(f"cannot read a log from {type(source).__name__}: pass a DataFrame, a LoggedFeedback or a path")
