"""Validation of logged feedback: every problem found, each with the row numbers it concerns, in one error.

A log is never repaired silently: a row with a NaN reward, a propensity outside ``(0, 1]``, an action outside
``[0, K)`` or a non-finite context feature makes :func:`~banditkit.offline.log.from_frame` /
:func:`~banditkit.offline.log.from_arrays` raise :class:`LogError`, whose message lists each problem with the first
offending rows (0-based positions in the table, i.e. line numbers of the Parquet file / DataFrame in order) and
their values.  The caller fixes or drops those rows and tries again.
"""

from __future__ import annotations

import warnings

import numpy as np

SHOW_ROWS = 8  # rows named per problem; the count of the rest follows


class LogError(ValueError):
    """A logged-feedback table failed validation.  ``problems`` holds one message per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        head = f"invalid bandit log ({len(problems)} problem{'s' if len(problems) != 1 else ''}; rows are 0-based)"
        body = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{head}:\n{body}\nNothing was dropped: fix or remove these rows and load the log again.")


class MissingPropensityWarning(UserWarning):
    """The log has no propensity column: only estimators that need no logging probabilities apply (DM)."""


def warn_missing_propensity(stacklevel: int = 3) -> None:
    warnings.warn(
        "the log has no 'propensity' column (the logging policy's probability of each logged action): only the "
        "direct method (DM) can estimate a policy's value from it; IPS, SNIPS, DR, SNDR and Switch-DR need "
        "propensities.  Warm-starting works without them (unweighted).",
        MissingPropensityWarning,
        stacklevel=stacklevel,
    )


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        return repr(float(v)) if np.isfinite(v) else str(float(v))
    if isinstance(v, (np.integer, np.bool_)):
        return str(v.item())
    return repr(v)


def describe_rows(rows: np.ndarray, values: np.ndarray | None = None) -> str:
    """``"rows 3, 9 (values 0.0, 1.5)"`` / ``"rows 3, 9, ... and 12 more (values ...)"`` for the positions ``rows``."""
    rows = np.asarray(rows).ravel()
    shown = rows[:SHOW_ROWS]
    word = "row" if rows.size == 1 else "rows"
    text = f"{word} " + ", ".join(str(int(r)) for r in shown)
    if rows.size > SHOW_ROWS:
        text += f", ... and {rows.size - SHOW_ROWS} more ({rows.size} in all)"
    if values is not None:
        vals = np.asarray(values, dtype=object).ravel()[:SHOW_ROWS]
        text += f" (value{'s' if len(vals) != 1 else ''} " + ", ".join(_fmt(v) for v in vals) + ")"
    return text


def _numeric(name: str, values: np.ndarray, problems: list[str]) -> np.ndarray | None:
    """``values`` as float64, or None (with a problem recorded) when the column is not numeric."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        return arr.astype(np.float64)
    try:
        return arr.astype(np.float64)
    except (TypeError, ValueError):
        bad = []
        for i, v in enumerate(arr.ravel()):
            try:
                float(v)
            except (TypeError, ValueError):
                bad.append(i)
        per_row = max(1, arr.size // max(1, len(arr)))
        rows, first = np.unique(np.asarray(bad) // per_row, return_index=True)
        problems.append(f"{name} must be numeric: {describe_rows(rows, arr.ravel()[np.asarray(bad)[first]])}")
        return None


def check_actions(actions, num_actions: int, problems: list[str]) -> np.ndarray | None:
    """Integer actions in ``[0, num_actions)``; int64 array or None (problems recorded)."""
    a = _numeric("action", actions, problems)
    if a is None:
        return None
    ok = True
    nan = ~np.isfinite(a)
    if nan.any():
        problems.append(f"action is missing or not finite: {describe_rows(np.flatnonzero(nan))}")
        ok = False
    frac = np.isfinite(a) & (a != np.round(a))
    if frac.any():
        rows = np.flatnonzero(frac)
        problems.append(f"action must be an integer arm index: {describe_rows(rows, a[rows])}")
        ok = False
    out = np.isfinite(a) & ((a < 0) | (a >= num_actions))
    if out.any():
        rows = np.flatnonzero(out)
        problems.append(
            f"action out of range [0, {num_actions}) ({num_actions} arms): {describe_rows(rows, a[rows])}"
        )
        ok = False
    return a.astype(np.int64) if ok else None


def check_rewards(rewards, problems: list[str]) -> np.ndarray | None:
    r = _numeric("reward", rewards, problems)
    if r is None:
        return None
    bad = ~np.isfinite(r)
    if bad.any():
        rows = np.flatnonzero(bad)
        problems.append(f"reward is NaN or infinite: {describe_rows(rows, r[rows])}")
        return None
    return r


def check_propensities(propensities, problems: list[str]) -> np.ndarray | None:
    p = _numeric("propensity", propensities, problems)
    if p is None:
        return None
    bad = ~np.isfinite(p) | (p <= 0.0) | (p > 1.0)
    if bad.any():
        rows = np.flatnonzero(bad)
        problems.append(
            f"propensity must lie in (0, 1] (the logging policy's probability of the logged action): "
            f"{describe_rows(rows, p[rows])}"
        )
        return None
    return p


def check_contexts(contexts, problems: list[str], columns: list[str] | None = None) -> np.ndarray | None:
    """Finite numeric features, shape ``(n, d)`` or ``(n, K, F)``; float32 array or None."""
    x = _numeric("context features", contexts, problems)
    if x is None:
        return None
    bad = ~np.isfinite(x)
    if bad.any():
        rows = np.flatnonzero(bad.reshape(len(x), -1).any(axis=1))
        where = ""
        if columns is not None:
            cols = [c for c, hit in zip(columns, bad.reshape(len(x), -1).any(axis=0), strict=True) if hit]
            where = f" in column{'s' if len(cols) != 1 else ''} " + ", ".join(cols[:SHOW_ROWS])
        problems.append(f"context features are NaN or infinite{where}: {describe_rows(rows)}")
        return None
    return x.astype(np.float32)


def check_available(available, actions: np.ndarray | None, problems: list[str]) -> np.ndarray | None:
    """Availability mask ``(n, K)`` of 0/1: every row has an available arm and the logged action is available."""
    m = _numeric("available", available, problems)
    if m is None:
        return None
    bad = ~np.isin(m, (0.0, 1.0))
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        problems.append(f"available_k columns must be 0/1 (or booleans): {describe_rows(rows)}")
        return None
    m = m.astype(bool)
    none = ~m.any(axis=1)
    if none.any():
        problems.append(f"no arm is available: {describe_rows(np.flatnonzero(none))}")
    if actions is not None:
        off = ~m[np.arange(len(m)), actions]
        if off.any():
            rows = np.flatnonzero(off)
            problems.append(f"the logged action is marked unavailable: {describe_rows(rows, actions[rows])}")
    return m


def check_lengths(lengths: dict[str, int], problems: list[str]) -> bool:
    """All arrays have the same number of rows."""
    if len(set(lengths.values())) > 1:
        text = ", ".join(f"{k} has {v}" for k, v in lengths.items())
        problems.append(f"mismatched lengths (one entry per logged round expected): {text}")
        return False
    return True


def raise_if(problems: list[str]) -> None:
    if problems:
        raise LogError(problems)
