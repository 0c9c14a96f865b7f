"""Off-policy estimators of a target policy's value ``V(π) = E_x Σ_k π(k | x) q(x, k)`` from a log of π₀.

Notation: ``n`` logged rows ``(x_i, a_i, r_i, p_i)`` with ``p_i = π₀(a_i | x_i)``; the target's action
probabilities ``π_ik = π(k | x_i)`` as an ``(n, K)`` array (a deterministic target is one-hot); the importance
weight ``w_i = π_{i a_i} / p_i``; a reward model ``q̂_ik ≈ E[r | x_i, k]`` as an ``(n, K)`` array, and
``q̂π_i = Σ_k π_ik q̂_ik``.

======================  ==========================================================  ======================
estimator               value                                                       needs
======================  ==========================================================  ======================
``dm``                  ``(1/n) Σ q̂π_i``                                            q̂
``ips``                 ``(1/n) Σ w_i r_i``                                         p
``snips``               ``Σ w_i r_i / Σ w_i``                                       p
``dr``                  ``(1/n) Σ [q̂π_i + w_i (r_i − q̂_{i a_i})]``                 p, q̂
``sndr``                ``(1/n) Σ q̂π_i + Σ w_i (r_i − q̂_{i a_i}) / Σ w_i``          p, q̂
``switch_dr``           ``(1/n) Σ [q̂π_i + w_i 1{w_i ≤ τ} (r_i − q̂_{i a_i})]``      p, q̂
======================  ==========================================================  ======================

IPS and DR are unbiased when ``p`` is the true propensity and π₀ covers π (``π_ik > 0 ⇒ π₀(k|x_i) > 0``); DR stays
unbiased with any reward model and has lower variance the better q̂ is; DM is unbiased only with an exact q̂.
SNIPS and SNDR trade an ``O(1/n)`` bias for lower variance (they are invariant to a constant shift of the rewards).
Switch-DR (Wang, Agarwal & Dudík 2017, in its doubly-robust form) drops the correction of rows whose weight exceeds
``τ``, where the model alone is trusted: ``τ = ∞`` is DR, ``τ = 0`` is DM.

Each function returns an :class:`~banditkit.offline.intervals.Estimate` with a ``1 − α`` interval, ``"normal"``
(the delta method over rows) or ``"bootstrap"`` (rows resampled); see :mod:`banditkit.offline.intervals`.
The intervals treat ``q̂`` as fixed (the reward model's own fitting error is not in them).
"""

from __future__ import annotations

import numpy as np

from banditkit.offline.intervals import Estimate, estimate

NEED_PROPENSITY = ("ips", "snips", "dr", "sndr", "switch_dr")
NEED_MODEL = ("dm", "dr", "sndr", "switch_dr")
DEFAULT_TAU = 10.0


def _probs(target, n: int | None = None) -> np.ndarray:
    t = np.asarray(target, np.float64)
    if t.ndim != 2 or (n is not None and t.shape[0] != n):
        want = f"({n}, K)" if n is not None else "(n, K)"
        raise ValueError(f"target action probabilities must have shape {want}, got {t.shape}")
    return t


def _rows(actions, rewards, propensities, name: str):
    if propensities is None:
        raise ValueError(
            f"{name} needs the logging policy's propensities, and this log has none; use the direct method ('dm') "
            "with a reward model, or log propensities"
        )
    a = np.asarray(actions).astype(np.int64)
    r = np.asarray(rewards, np.float64)
    p = np.asarray(propensities, np.float64)
    if not (a.shape == r.shape == p.shape) or a.ndim != 1:
        raise ValueError(f"{name}: actions, rewards and propensities must be (n,) each, got {a.shape}, {r.shape}, "
                         f"{p.shape}")
    return a, r, p


def importance_weights(target, actions, propensities) -> np.ndarray:
    """``w_i = π(a_i | x_i) / p_i``, ``(n,)``."""
    a = np.asarray(actions).astype(np.int64)
    t = _probs(target, a.shape[0])
    return t[np.arange(a.shape[0]), a] / np.asarray(propensities, np.float64)


def _model_terms(target, q_hat, actions=None):
    t = np.asarray(target, np.float64)
    q = np.asarray(q_hat, np.float64)
    if q.shape != t.shape:
        raise ValueError(f"the reward model's predictions must have the target's shape {t.shape} (one per row and "
                         f"arm), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("the reward model's predictions are not all finite")
    dm_i = np.sum(t * q, axis=1)
    q_taken = None if actions is None else q[np.arange(q.shape[0]), actions]
    return dm_i, q_taken


def dm(target, q_hat, **kw) -> Estimate:
    """Direct method: ``(1/n) Σ_i Σ_k π_ik q̂_ik``."""
    t = _probs(target)
    dm_i, _ = _model_terms(t, q_hat)
    return estimate("dm", dm_i, **kw)


def ips(target, actions, rewards, propensities, **kw) -> Estimate:
    """Inverse propensity scoring: ``(1/n) Σ w_i r_i``."""
    a, r, p = _rows(actions, rewards, propensities, "ips")
    w = importance_weights(target, a, p)
    return estimate("ips", np.zeros_like(r), w * r, **kw)


def snips(target, actions, rewards, propensities, **kw) -> Estimate:
    """Self-normalised IPS: ``Σ w_i r_i / Σ w_i``."""
    a, r, p = _rows(actions, rewards, propensities, "snips")
    w = importance_weights(target, a, p)
    return estimate("snips", np.zeros_like(r), w * r, w, **kw)


def dr(target, actions, rewards, propensities, q_hat, **kw) -> Estimate:
    """Doubly robust: ``(1/n) Σ [q̂π_i + w_i (r_i − q̂_{i a_i})]``."""
    a, r, p = _rows(actions, rewards, propensities, "dr")
    w = importance_weights(target, a, p)
    dm_i, q_taken = _model_terms(target, q_hat, a)
    return estimate("dr", dm_i, w * (r - q_taken), **kw)


def sndr(target, actions, rewards, propensities, q_hat, **kw) -> Estimate:
    """Self-normalised doubly robust: ``(1/n) Σ q̂π_i + Σ w_i (r_i − q̂_{i a_i}) / Σ w_i``."""
    a, r, p = _rows(actions, rewards, propensities, "sndr")
    w = importance_weights(target, a, p)
    dm_i, q_taken = _model_terms(target, q_hat, a)
    return estimate("sndr", dm_i, w * (r - q_taken), w, **kw)


def switch_dr(target, actions, rewards, propensities, q_hat, tau: float = DEFAULT_TAU, **kw) -> Estimate:
    """Switch-DR: ``(1/n) Σ [q̂π_i + w_i 1{w_i ≤ τ} (r_i − q̂_{i a_i})]`` (``τ = ∞``: DR; ``τ = 0``: DM)."""
    if not tau >= 0:
        raise ValueError(f"switch_dr: tau must be >= 0, got {tau!r}")
    a, r, p = _rows(actions, rewards, propensities, "switch_dr")
    w = importance_weights(target, a, p)
    dm_i, q_taken = _model_terms(target, q_hat, a)
    return estimate("switch_dr", dm_i, np.where(w <= tau, w, 0.0) * (r - q_taken), **kw)


ESTIMATORS = {"dm": dm, "ips": ips, "snips": snips, "dr": dr, "sndr": sndr, "switch_dr": switch_dr}


def weight_diagnostics(target, actions, propensities) -> dict:
    """``{ess, max_weight, mean_weight}``: the effective sample size ``(Σ w)² / Σ w²`` (n for the logging policy
    itself, small when the target rarely agrees with the log), the largest weight, and the mean weight (≈ 1 when
    π₀ covers π and the propensities are right)."""
    w = importance_weights(target, actions, propensities)
    ess = float(w.sum() ** 2 / np.sum(w * w)) if np.any(w > 0) else 0.0
    return dict(ess=ess, max_weight=float(w.max()), mean_weight=float(w.mean()))
