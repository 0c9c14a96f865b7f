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

Switch-DR's default threshold (:func:`switch_tau`) is ``τ = √(K / p_min)``, with ``K`` the arm count and ``p_min`` the
smallest logged propensity (the log's propensity floor).  Why: ``K`` is the largest weight a uniformly random logger
produces (``1 / (1/K)``), the best-covered design there is, so weights up to ``K`` are never cut; ``1 / p_min`` is the
largest weight this log can produce, so ``τ ≥ 1 / p_min`` would be plain DR.  ``τ`` is the geometric mean of the two:
a uniform log (``p_min = 1/K``) gets ``τ = K`` and Switch-DR equals DR; an ε-greedy log over ``K`` arms
(``p_min = ε/K``) gets ``τ = K / √ε``, which keeps the greedy rows' weights (``≈ 1``) and trusts the model where
a target agrees only with the rare exploration steps (weights ``K / ε``).  A fixed ``τ`` would do neither: ``τ = 10``
cuts every weight of a uniform log over more than 10 arms, so Switch-DR silently became DM.

Each function returns an :class:`~banditkit.offline.intervals.Estimate` with a ``1 − α`` interval, ``"normal"``
(the delta method over rows) or ``"bootstrap"`` (rows resampled); see :mod:`banditkit.offline.intervals`.
The intervals treat ``q̂`` as fixed (the reward model's own fitting error is not in them).

:func:`row_terms` gives any estimator's per-row terms ``(u, v, c)`` (its value is ``ū + v̄ / c̄``), and :func:`lift`
the difference of two policies' values on the same rows with an interval for the difference itself (paired by row,
so the rows' common noise cancels).
"""

from __future__ import annotations

import numpy as np

from banditkit.offline.intervals import Estimate, estimate

NEED_PROPENSITY = ("ips", "snips", "dr", "sndr", "switch_dr")
NEED_MODEL = ("dm", "dr", "sndr", "switch_dr")
LIFT_ESTIMATORS = ("dm", "ips", "dr", "switch_dr")  # plain means (c = 1): differences are means too


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


def switch_tau(num_actions: int, propensities) -> float:
    """Switch-DR's default threshold ``τ = √(K / p_min)`` (the module docstring says why); ``K`` arms,
    ``p_min = min_i p_i``."""
    p = np.asarray(propensities, np.float64)
    if int(num_actions) < 1 or p.size == 0 or not np.all((p > 0) & (p <= 1)):
        raise ValueError(f"switch_tau needs num_actions >= 1 and propensities in (0, 1], got K={num_actions} and "
                         f"{p.size} propensities (min {p.min() if p.size else 'n/a'})")
    return float(np.sqrt(int(num_actions) / p.min()))


def row_terms(name: str, target, actions=None, rewards=None, propensities=None, q_hat=None, *, tau=None):
    """``(u, v, c)``, each ``(n,)``, of estimator ``name``: its value is ``ū + v̄ / c̄`` (``c`` is ``None`` for the
    plain means, i.e. ``c_i = 1``).  ``tau``: Switch-DR's threshold (``None``: :func:`switch_tau`)."""
    t = _probs(target)
    if name == "dm":
        dm_i, _ = _model_terms(t, q_hat)
        return dm_i, None, None
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; choose from {sorted(ESTIMATORS)}")
    a, r, p = _rows(actions, rewards, propensities, name)
    w = importance_weights(t, a, p)
    if name == "ips":
        return np.zeros_like(r), w * r, None
    if name == "snips":
        return np.zeros_like(r), w * r, w
    dm_i, q_taken = _model_terms(t, q_hat, a)
    if name == "dr":
        return dm_i, w * (r - q_taken), None
    if name == "sndr":
        return dm_i, w * (r - q_taken), w
    tau = switch_tau(t.shape[1], p) if tau is None else tau
    if not tau >= 0:
        raise ValueError(f"switch_dr: tau must be >= 0, got {tau!r}")
    return dm_i, np.where(w <= tau, w, 0.0) * (r - q_taken), None


def dm(target, q_hat, **kw) -> Estimate:
    """Direct method: ``(1/n) Σ_i Σ_k π_ik q̂_ik``."""
    return estimate("dm", *row_terms("dm", target, q_hat=q_hat), **kw)


def ips(target, actions, rewards, propensities, **kw) -> Estimate:
    """Inverse propensity scoring: ``(1/n) Σ w_i r_i``."""
    return estimate("ips", *row_terms("ips", target, actions, rewards, propensities), **kw)


def snips(target, actions, rewards, propensities, **kw) -> Estimate:
    """Self-normalised IPS: ``Σ w_i r_i / Σ w_i``."""
    return estimate("snips", *row_terms("snips", target, actions, rewards, propensities), **kw)


def dr(target, actions, rewards, propensities, q_hat, **kw) -> Estimate:
    """Doubly robust: ``(1/n) Σ [q̂π_i + w_i (r_i − q̂_{i a_i})]``."""
    return estimate("dr", *row_terms("dr", target, actions, rewards, propensities, q_hat), **kw)


def sndr(target, actions, rewards, propensities, q_hat, **kw) -> Estimate:
    """Self-normalised doubly robust: ``(1/n) Σ q̂π_i + Σ w_i (r_i − q̂_{i a_i}) / Σ w_i``."""
    return estimate("sndr", *row_terms("sndr", target, actions, rewards, propensities, q_hat), **kw)


def switch_dr(target, actions, rewards, propensities, q_hat, tau: float | None = None, **kw) -> Estimate:
    """Switch-DR: ``(1/n) Σ [q̂π_i + w_i 1{w_i ≤ τ} (r_i − q̂_{i a_i})]`` (``τ = ∞``: DR; ``τ = 0``: DM).

    ``tau=None`` (default): ``τ = √(K / p_min)`` (:func:`switch_tau`; the module docstring says why)."""
    return estimate("switch_dr", *row_terms("switch_dr", target, actions, rewards, propensities, q_hat, tau=tau),
                    **kw)


def lift(name: str, terms, baseline_terms, **kw) -> Estimate:
    """The value of one policy minus another's on the same ``n`` rows, ``(ū₁ + v̄₁) − (ū₀ + v̄₀)``, with the interval
    of the per-row differences (:func:`~banditkit.offline.intervals.estimate` over ``u₁ − u₀``, ``v₁ − v₀``).

    ``terms`` / ``baseline_terms``: :func:`row_terms` of a plain-mean estimator (``dm``, ``ips``, ``dr``,
    ``switch_dr``: ``c = None``), or ``(r, None, None)`` for the logged rewards (the logging policy's own value).
    Self-normalised estimators are ratios, whose difference is not a mean over rows: they raise."""
    (u1, v1, c1), (u0, v0, c0) = terms, baseline_terms
    if c1 is not None or c0 is not None:
        raise ValueError(f"a lift needs plain-mean estimators ({', '.join(LIFT_ESTIMATORS)}); self-normalised ones "
                         "(snips, sndr) are ratios")
    u1, u0 = np.asarray(u1, np.float64), np.asarray(u0, np.float64)
    if u1.shape != u0.shape:
        raise ValueError(f"a lift compares two policies on the same rows: got {u1.shape[0]} and {u0.shape[0]} rows")
    zero = np.zeros_like(u1)
    v = (zero if v1 is None else np.asarray(v1, np.float64)) - (zero if v0 is None else np.asarray(v0, np.float64))
    return estimate(f"{name} lift", u1 - u0, v, **kw)


ESTIMATORS = {"dm": dm, "ips": ips, "snips": snips, "dr": dr, "sndr": sndr, "switch_dr": switch_dr}


def weight_diagnostics(target, actions, propensities) -> dict:
    """``{ess, max_weight, mean_weight}``: the effective sample size ``(Σ w)² / Σ w²`` (n for the logging policy
    itself, small when the target rarely agrees with the log), the largest weight, and the mean weight (≈ 1 when
    π₀ covers π and the propensities are right)."""
    w = importance_weights(target, actions, propensities)
    ess = float(w.sum() ** 2 / np.sum(w * w)) if np.any(w > 0) else 0.0
    return dict(ess=ess, max_weight=float(w.max()), mean_weight=float(w.mean()))
