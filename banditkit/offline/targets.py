"""Target policies for off-policy evaluation, as action probabilities ``π (n, K)`` over the logged rows.

:func:`target_probabilities` accepts

* ``(n,)`` integer actions — a deterministic target (``π_ik = 1{k = a_i}``);
* ``(n, K)`` probabilities — a stochastic target (rows non-negative, summing to 1 within ``1e-4``; zero on arms
  the log marks unavailable);
* ``(agent, state)`` — a banditkit agent frozen at ``state``: its policy's probabilities for each logged context
  (:func:`banditkit.offline.frozen.agent_probabilities`; exact, or Monte-Carlo over ``num_draws`` keys for
  Thompson sampling).

Every problem is a ``ValueError`` naming the rows (0-based) it concerns.
"""

from __future__ import annotations

import numpy as np

from banditkit.offline.checks import describe_rows
from banditkit.offline.frozen import agent_probabilities
from banditkit.offline.log import LoggedFeedback
from banditkit.policies.propensity import DEFAULT_DRAWS

SUM_TOL = 1e-4


def one_hot(actions, num_actions: int) -> np.ndarray:
    """``(n, K)`` one-hot rows of a deterministic target's actions (range-checked, rows named)."""
    a = np.asarray(actions)
    if a.dtype.kind == "f":
        frac = ~np.isfinite(a) | (a != np.round(a))
        if frac.any():
            rows = np.flatnonzero(frac)
            raise ValueError(f"target actions must be integers: {describe_rows(rows, a[rows])}")
    a = a.astype(np.int64)
    out = (a < 0) | (a >= num_actions)
    if out.any():
        rows = np.flatnonzero(out)
        raise ValueError(f"target actions out of range [0, {num_actions}): {describe_rows(rows, a[rows])}")
    return np.eye(num_actions)[a]


def check_probabilities(probs, log: LoggedFeedback) -> np.ndarray:
    """``probs`` as float64 ``(n, K)`` after the checks of the module docstring."""
    p = np.asarray(probs, np.float64)
    n, k = len(log), log.num_actions
    if p.shape != (n, k):
        raise ValueError(f"target probabilities must have shape (n, K) = ({n}, {k}), got {p.shape}")
    bad = ~np.isfinite(p).all(axis=1) | (p < 0).any(axis=1)
    if bad.any():
        raise ValueError(f"target probabilities must be finite and >= 0: {describe_rows(np.flatnonzero(bad))}")
    sums = p.sum(axis=1)
    off = np.abs(sums - 1.0) > SUM_TOL
    if off.any():
        rows = np.flatnonzero(off)
        raise ValueError(f"target probabilities must sum to 1 in every row: {describe_rows(rows, sums[rows])}")
    if log.available is not None:
        leak = (p * ~log.available).sum(axis=1) > SUM_TOL
        if leak.any():
            raise ValueError("the target puts probability on arms the log marks unavailable: "
                             f"{describe_rows(np.flatnonzero(leak))}")
    return p


def uniform_probabilities(log: LoggedFeedback) -> np.ndarray:
    """``(n, K)``: uniform over each row's available arms (all ``K`` when the log has no availability mask)."""
    avail = np.ones((len(log), log.num_actions)) if log.available is None else log.available.astype(np.float64)
    return avail / avail.sum(axis=1, keepdims=True)


def target_probabilities(target, log: LoggedFeedback, key=None, *, num_draws: int = DEFAULT_DRAWS) -> np.ndarray:
    """``π (n, K)`` from any of the module docstring's forms."""
    if isinstance(target, tuple) and len(target) == 2 and hasattr(target[0], "act"):
        agent, state = target
        probs = agent_probabilities(agent, state, log.contexts, key, available=log.available, num_draws=num_draws)
        return check_probabilities(probs, log)
    arr = np.asarray(target)
    if arr.ndim == 1:
        if arr.shape[0] != len(log):
            raise ValueError(f"a deterministic target needs one action per logged row ({len(log)}), got {arr.shape}")
        return check_probabilities(one_hot(arr, log.num_actions), log)
    return check_probabilities(arr, log)
