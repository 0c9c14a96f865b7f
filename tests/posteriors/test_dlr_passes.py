"""LoFi's / BONG-DLR's update: ``dlr.update`` with the root's Gram from ``linalg.inv_weighted_gram`` (single product and
blocked loop) against the dense float64 EKF step and SVD truncation; ``inv_weighted_gram`` against the plain product.

Oracle for the update (numpy, float64, ``P × P`` matrices): ``Σ = (Υ + WWᵀ)⁻¹``, ``μ' = μ + ΣJᵀ(JΣJᵀ + R)⁻¹e``; with
the thin SVD ``[W, A] = U diag(σ) Vᵀ`` the kept low-rank part is ``U_L diag(σ_L²) U_Lᵀ`` and
``υ' = υ + rowsum((Uσ)[:, L:]²)``.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from banditkit.posteriors import dlr, linalg

P, N, C = 45, 4, 2


@pytest.fixture(params=[False, True], ids=["one-gram", "blocked-gram"])
def blocked(request, monkeypatch):
    """``True``: the Grams loop over blocks of 8 rows (5 whole blocks and a remainder of 5 rows)."""
    if request.param:
        monkeypatch.setattr(linalg, "GRAM_BLOCK", 8)
        monkeypatch.setattr(linalg, "GRAM_MIN_SIZE", 0)
    return request.param


def _problem(orthogonal: bool, seed: int = 0):
    rs = np.random.default_rng(seed)
    ups = np.exp(rs.normal(size=P))
    w = rs.normal(size=(P, N))
    if orthogonal:  # orthogonal columns of different norms, as LoFi's truncation leaves them
        w = np.linalg.qr(w)[0] * np.array([3.0, 2.0, 1.0, 0.5])[None, :]
    jac = rs.normal(size=(C, P))
    r = np.array([[0.3, 0.1], [0.1, 0.2]])
    cols = jac.T @ np.linalg.inv(np.linalg.cholesky(r).T)  # A = Jᵀ V⁻¹ with R = VᵀV: A Aᵀ = Jᵀ R⁻¹ J
    return rs.normal(size=P), ups, w, jac, cols, r, rs.normal(size=C)


def _oracle(mean, ups, w, jac, cols, r, innov, rank, spherical):
    cov = np.linalg.inv(np.diag(ups) + w @ w.T)
    s = jac @ cov @ jac.T + r
    mean = mean + cov @ jac.T @ np.linalg.solve(s, innov)
    u, sig, _ = np.linalg.svd(np.concatenate([w, cols], axis=1), full_matrices=False)
    us = u * sig[None, :]
    return mean, ups if spherical else ups + np.sum(us[:, rank:] ** 2, axis=1), us[:, :rank] @ us[:, :rank].T


@pytest.mark.parametrize("spherical", [False, True])
@pytest.mark.parametrize("orthogonal", [False, True])
@pytest.mark.parametrize("rank", [N, N - 1])
def test_update_equals_dense_ekf_and_svd_truncation(x64, blocked, orthogonal, spherical, rank):
    """Mean, diagonal and kept low-rank part of the exact EKF step + SVD truncation; the new ``W``'s columns are
    orthogonal.  ``rank = n``: ``C`` directions discarded; ``rank = n − 1``: ``C + 1``."""
    mean, ups, w, jac, cols, r, innov = _problem(orthogonal)
    want_mean, want_ups, want_lr = _oracle(mean, ups, w, jac, cols, r, innov, rank, spherical)

    def step(mean, ups, w, jac, cols, r, innov):
        root = dlr.cov_root(ups, w)
        return dlr.update(mean, ups, w, root, jac, cols, r, innov, rank, orthogonal=orthogonal, spherical=spherical)

    got_mean, got_ups, got_w = (np.asarray(v) for v in jax.jit(step)(mean, ups, w, jac, cols, r, innov))
    assert got_w.shape == (P, rank)
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_ups, want_ups, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_w @ got_w.T, want_lr, rtol=1e-10, atol=1e-10)
    g = got_w.T @ got_w
    np.testing.assert_allclose(g - np.diag(np.diag(g)), 0.0, atol=1e-10 * np.abs(g).max())


def test_update_with_no_low_rank_columns(x64):
    """``n = L = 0`` (VD-EKF, LoFi rank 0): every new direction goes into ``υ``; the mean is the diagonal EKF's."""
    mean, ups, _, jac, cols, r, innov = _problem(False)
    w = np.zeros((P, 0))
    want_mean, want_ups, _ = _oracle(mean, ups, w, jac, cols, r, innov, 0, False)
    step = jax.jit(lambda *a: dlr.update(a[0], a[1], a[2], dlr.cov_root(a[1], a[2]), *a[3:], 0))
    got_mean, got_ups, got_w = step(mean, ups, w, jac, cols, r, innov)
    assert got_w.shape == (P, 0)
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_ups, want_ups, rtol=1e-10, atol=1e-12)


def test_inv_weighted_gram_matches_dense_and_vmaps(x64, blocked):
    """``Wᵀ diag(v)⁻¹ W`` on the single product and on the blocked loop (Grams of ``v^{-1/2} ⊙ W_b``), vmapped too."""
    rs = np.random.default_rng(2)
    w, v = rs.normal(size=(2, P, 7)), np.exp(rs.normal(size=(2, P)))
    want = np.einsum("bpi,bp,bpj->bij", w, 1.0 / v, w)
    np.testing.assert_allclose(jax.jit(linalg.inv_weighted_gram)(w[0], v[0]), want[0], rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.vmap(linalg.inv_weighted_gram))(w, v), want, rtol=1e-12)
