"""Point estimate and confidence interval of ``V = ū + v̄ / c̄`` from per-row terms ``u_i, v_i, c_i``.

Every off-policy estimator in :mod:`banditkit.offline.estimators` has this form (bars are means over the n rows):
the plain ones have ``c_i = 1`` (``V`` is then the mean of ``u_i + v_i``), the self-normalised ones put the
importance weights in ``c_i``.

Normal interval (``"normal"``): the delta method.  The influence of row i is

    ψ_i = (u_i − ū) + (v_i − R c_i) / c̄,      R = v̄ / c̄,

``se = sd(ψ) / √n`` (``sd`` with ``ddof = 1``) and the interval ``V ± z_{1−α/2} se``.  With ``c_i = 1`` this is
the usual ``sd(u + v) / √n``.

Bootstrap interval (``"bootstrap"``): rows resampled with replacement ``B`` times, ``V*_b`` recomputed from the
resampled means, the percentile interval ``[q_{α/2}, q_{1−α/2}]`` of ``V*`` and ``se = sd(V*)``.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import NamedTuple

import numpy as np

BOOT_CHUNK_ROWS = 2_000_000  # resampled entries held at once (B_chunk × n)


class Estimate(NamedTuple):
    """One estimate of a policy's value: ``value`` with standard error ``stderr`` and the ``1 − α`` interval
    ``[lower, upper]`` (``interval`` says how it was made), from ``n`` logged rows."""

    estimator: str
    value: float
    stderr: float
    lower: float
    upper: float
    n: int
    interval: str


def _value(u_mean, v_mean, c_mean):
    return u_mean + v_mean / c_mean


def estimate(
    name: str,
    u: np.ndarray,
    v: np.ndarray | None = None,
    c: np.ndarray | None = None,
    *,
    alpha: float = 0.05,
    interval: str = "normal",
    n_boot: int = 1000,
    seed: int = 0,
) -> Estimate:
    """The :class:`Estimate` of ``ū + v̄ / c̄`` (``v = 0`` and ``c = 1`` when omitted); see the module docstring."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    u = np.asarray(u, np.float64)
    n = u.shape[0]
    v = np.zeros(n) if v is None else np.asarray(v, np.float64)
    c = np.ones(n) if c is None else np.asarray(c, np.float64)
    c_mean = c.mean()
    if not c_mean > 0:
        return Estimate(name, float("nan"), float("nan"), float("nan"), float("nan"), n, interval)
    value = float(_value(u.mean(), v.mean(), c_mean))
    if interval == "normal":
        psi = (u - u.mean()) + (v - (v.mean() / c_mean) * c) / c_mean
        se = float(psi.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
        z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
        return Estimate(name, value, se, value - z * se, value + z * se, n, interval)
    if interval == "bootstrap":
        draws = bootstrap(u, v, c, n_boot=n_boot, seed=seed)
        lo, hi = np.quantile(draws, [alpha / 2.0, 1.0 - alpha / 2.0])
        return Estimate(name, value, float(draws.std(ddof=1)), float(lo), float(hi), n, interval)
    raise ValueError(f"interval must be 'normal' or 'bootstrap', got {interval!r}")


def bootstrap(u: np.ndarray, v: np.ndarray, c: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """``(n_boot,)`` bootstrap replicates of ``ū + v̄ / c̄`` (rows resampled with replacement)."""
    if n_boot < 2:
        raise ValueError(f"n_boot must be >= 2, got {n_boot}")
    n = u.shape[0]
    rng = np.random.default_rng(seed)
    stacked = np.stack([u, v, c], axis=1)  # (n, 3)
    out = np.empty(n_boot)
    per = max(1, BOOT_CHUNK_ROWS // max(n, 1))
    for start in range(0, n_boot, per):
        b = min(per, n_boot - start)
        means = stacked[rng.integers(0, n, size=(b, n))].mean(axis=1)  # (b, 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[start:start + b] = _value(means[:, 0], means[:, 1], means[:, 2])
    return out
