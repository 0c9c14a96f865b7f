"""``dlr.truncate`` (LoFi's and BONG-DLR's rank truncation through the small Gram) against the SVD truncation.

Oracle: with the thin SVD ``Ñ = U diag(σ) Vᵀ`` (numpy, float64), the best rank-``L`` part of ``ÑÑᵀ`` is
``U_L diag(σ_L²) U_Lᵀ`` and the discarded mass on the diagonal is ``rowsum((U σ)[:, L:]²)`` (LoFi eq. 41).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.posteriors import dlr

P, RANK = 300, 12


def _factor(kind: str, m: int, seed: int = 0) -> np.ndarray:
    """``Ñ (P, m)`` float64: Gaussian, or ``U diag(σ) Vᵀ`` with ``σ`` log-spaced from 1 to 1e-6 (cond 1e6)."""
    rs = np.random.default_rng(seed)
    if kind == "random":
        return rs.standard_normal((P, m))
    u, _ = np.linalg.qr(rs.standard_normal((P, m)))
    v, _ = np.linalg.qr(rs.standard_normal((m, m)))
    return (u * np.logspace(0.0, -6.0, m)[None, :]) @ v.T


def _svd_truncation(n: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """``(discarded diagonal (P,), U_L σ_L (P, L))`` of the float64 SVD."""
    u, s, _ = np.linalg.svd(n, full_matrices=False)
    us = u * s[None, :]
    return np.sum(us[:, rank:] ** 2, axis=1), us[:, :rank]


def _truncate(n: np.ndarray, rank: int, split: tuple[int, ...], dtype) -> tuple[np.ndarray, np.ndarray]:
    """``dlr.truncate`` with ``Ñ`` passed as column blocks of widths ``split`` and ``υ = 1``."""
    nj = jnp.asarray(n, dtype)
    edges = np.cumsum((0, *split))
    pieces = tuple(nj[:, a:b] for a, b in zip(edges[:-1], edges[1:], strict=True))
    ups, w = dlr.truncate(jnp.ones(n.shape[0], dtype), pieces, nj.T @ nj, rank)
    return np.asarray(ups, np.float64) - 1.0, np.asarray(w, np.float64)


@pytest.mark.parametrize("kind", ["random", "ill"])
def test_truncate_equals_the_svd_truncation_in_float64(x64, kind):
    """Same low-rank part ``WWᵀ``, same subspace, same mass moved to ``υ``; ``W`` has orthogonal columns."""
    n = _factor(kind, RANK + 2)
    dropped, w = _truncate(n, RANK, (RANK, 1, 1), jnp.float64)
    ref_dropped, ref_w = _svd_truncation(n, RANK)
    scale = np.linalg.norm(n, 2) ** 2
    np.testing.assert_allclose(w @ w.T, ref_w @ ref_w.T, atol=1e-12 * scale)
    np.testing.assert_allclose(dropped, ref_dropped, atol=1e-12 * scale)
    # the kept subspace: projectors onto the columns agree wherever the kept directions are resolved (σ ≥ 1e-4)
    if kind == "random":
        q, _ = np.linalg.qr(w)
        q_ref, _ = np.linalg.qr(ref_w)
        np.testing.assert_allclose(q @ q.T, q_ref @ q_ref.T, atol=1e-10)
    g = w.T @ w
    np.testing.assert_allclose(g - np.diag(np.diag(g)), 0.0, atol=1e-12 * scale)
    # the truncation keeps the diagonal of the precision: diag(WWᵀ) + Δυ = diag(ÑÑᵀ)
    diag = np.sum(n * n, axis=1)
    np.testing.assert_allclose(np.sum(w * w, axis=1) + dropped, diag, atol=1e-12 * diag.max())


def _errors(n: np.ndarray, dropped: np.ndarray, w: np.ndarray, rank: int) -> tuple[float, float]:
    """``(‖WWᵀ − W*W*ᵀ‖_F / ‖ÑÑᵀ‖_F, max |diag(WWᵀ) + Δυ − diag(ÑÑᵀ)| / max diag(ÑÑᵀ))`` against the float64 SVD."""
    _, ref_w = _svd_truncation(n, rank)
    nn = n @ n.T
    return (np.linalg.norm(ref_w @ ref_w.T - w @ w.T) / np.linalg.norm(nn),
            np.max(np.abs(np.sum(w * w, axis=1) + dropped - np.diag(nn))) / np.max(np.diag(nn)))


@pytest.mark.parametrize("kind", ["random", "ill"])
def test_truncate_in_float32_is_as_accurate_as_the_svd(kind):
    """In float32 the Gram squares cond(Ñ) = 1e6 past 1/ε, yet the low-rank part and the diagonal stay as close to
    the float64 SVD truncation as a float32 SVD of ``Ñ`` gets (an eigenvalue cut-off at m·ε·λ_max, as
    ``linalg.project_weights`` has, is ~5× worse on the ill-conditioned input: every direction with σ < 1.3e-3 lost)."""
    n = _factor(kind, RANK + 1)
    n32 = np.asarray(jnp.asarray(n, jnp.float32), np.float64)  # the input as float32 holds it
    err, diag_err = _errors(n32, *_truncate(n32, RANK, (RANK, 1), jnp.float32), RANK)
    u, s, _ = jnp.linalg.svd(jnp.asarray(n32, jnp.float32), full_matrices=False)
    us = np.asarray(u * s[None, :], np.float64)
    svd_err, svd_diag_err = _errors(n32, np.sum(us[:, RANK:] ** 2, axis=1), us[:, :RANK], RANK)
    assert err <= 2.0 * svd_err, (err, svd_err)
    assert diag_err <= 2.0 * svd_diag_err, (diag_err, svd_diag_err)
    assert diag_err < 10 * np.finfo(np.float32).eps, diag_err
