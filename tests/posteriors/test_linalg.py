"""Every kernel of ``banditkit.posteriors.linalg`` against dense numpy (float64)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.posteriors import linalg


def _top_eig(m, d):
    evals, evecs = np.linalg.eigh(0.5 * (m + m.T))
    return evals[::-1][:d], evecs[:, ::-1][:, :d]


def test_qr_upper_chol_and_solve(x64):
    rng = np.random.default_rng(0)
    b1, b2 = rng.normal(size=(3, 5)), rng.normal(size=(1, 5))  # 4 rows < 5 columns: padded
    u = np.asarray(linalg.qr_upper(jnp.asarray(b1), jnp.asarray(b2)))
    np.testing.assert_allclose(u.T @ u, b1.T @ b1 + b2.T @ b2, atol=1e-12)
    assert np.allclose(np.tril(u, -1), 0) and np.all(np.diag(u) >= 0)
    s = b1.T @ b1 + np.eye(5)
    uc = np.asarray(linalg.chol_upper(jnp.asarray(s)))
    np.testing.assert_allclose(uc.T @ uc, s, atol=1e-12)
    assert np.allclose(np.tril(uc, -1), 0)
    j = rng.normal(size=(5, 7))
    np.testing.assert_allclose(
        linalg.solve_spd_factor(jnp.asarray(uc), jnp.asarray(j)), np.linalg.solve(s, j), atol=1e-10
    )


@pytest.mark.parametrize("add", [0.0, 0.7])
def test_project_is_top_d_eigen_of_gram_plus_a(x64, add):
    rng = np.random.default_rng(1)
    n = rng.normal(size=(6, 20)) * np.array([3.0, 2.0, 1.5, 1.0, 0.5, 0.1])[:, None]
    d = 4
    j, s2 = linalg.project(jnp.asarray(n), d, add)
    j, s2 = np.asarray(j), np.asarray(s2)
    evals, evecs = _top_eig(n.T @ n, d)
    np.testing.assert_allclose(s2, evals + add, rtol=1e-10)  # P_{d,+a} keeps a (digest pitfall 3.3)
    np.testing.assert_allclose(j.T @ j, evecs @ np.diag(evals + add) @ evecs.T, atol=1e-10)
    np.testing.assert_allclose(j @ j.T, np.diag(s2), atol=1e-10)
    if add == 0.0:  # Eckart–Young: the residual is the tail of the spectrum
        tail = np.linalg.eigvalsh(n.T @ n)[::-1][d:]
        np.testing.assert_allclose(np.linalg.norm(n.T @ n - j.T @ j), np.sqrt(np.sum(tail**2)), rtol=1e-8)
    w, s2w = linalg.project_weights(jnp.asarray(n @ n.T), d, add)
    np.testing.assert_allclose(np.asarray(w) @ n, j, atol=1e-10)
    np.testing.assert_allclose(s2w, s2)
    jg, _ = linalg.project_gram(jnp.asarray(n @ n.T), jnp.asarray(n), d, add)
    np.testing.assert_allclose(jg, j, atol=1e-10)


def test_project_zero_directions_are_zero_rows(x64):
    n = np.zeros((4, 9))
    n[0, :] = 1.0  # rank one
    j, s2 = linalg.project(jnp.asarray(n), 3, 0.5)
    assert np.all(np.isfinite(j)) and np.allclose(np.asarray(j)[1:], 0) and np.allclose(np.asarray(s2)[1:], 0)
    np.testing.assert_allclose(np.asarray(s2)[0], 9.0 + 0.5)


def test_lowrank_update_gram_matches_dense(x64):
    rng = np.random.default_rng(2)
    c, h, kt, b = rng.normal(size=(4, 15)), rng.normal(size=(2, 15)), rng.normal(size=(2, 15)), rng.normal(size=(2, 2))
    a = c @ h.T
    n = np.concatenate([c - a @ kt, b @ kt])
    g = linalg.lowrank_update_gram(
        jnp.asarray(c @ c.T), jnp.asarray(a), jnp.asarray(c @ kt.T), jnp.asarray(kt @ kt.T), jnp.asarray(b)
    )
    np.testing.assert_allclose(g, n @ n.T, atol=1e-10)


def test_orthonormal_rows_dense(x64):
    q = np.asarray(linalg.orthonormal_rows(jax.random.PRNGKey(0), 5, 40, jnp.float64))
    np.testing.assert_allclose(q @ q.T, np.eye(5), atol=1e-12)
    assert np.mean(np.abs(q) > 1e-8) > 0.95  # dense rows, not a coordinate [I | 0] init


def test_sqrt_psd(x64):
    rng = np.random.default_rng(3)
    m = rng.normal(size=(3, 2))
    for r in [m @ m.T, m @ m.T + np.eye(3), np.array([[0.3]]), np.zeros((2, 2))]:
        rh = np.asarray(linalg.sqrt_psd(jnp.asarray(r)))
        np.testing.assert_allclose(rh.T @ rh, r, atol=1e-12)


def _orth_factor(rng, d, dim, scales):
    q, _ = np.linalg.qr(rng.normal(size=(dim, d)))
    return q.T * np.asarray(scales)[:, None]


@pytest.mark.parametrize("use_q", [False, True])
@pytest.mark.parametrize("d", [3, 12])
def test_lowrank_kalman_update_matches_dense_surrogate(x64, use_q, d):
    """One step equals the dense Kalman gain/mean and the top-d eigenpairs of the surrogate covariance."""
    rng = np.random.default_rng(4)
    dim, c_y, q = 12, 2, (0.3 if use_q else 0.0)
    c = _orth_factor(rng, d, dim, rng.uniform(0.5, 2.0, size=d))
    h = rng.normal(size=(c_y, dim))
    r = np.array([[0.5, 0.1], [0.1, 0.4]])
    r_other = np.array([[0.2, 0.0], [0.0, 0.1]])  # contribution of other blocks to S
    mu, eps = rng.normal(size=dim), rng.normal(size=c_y)
    sig = c.T @ c + q * np.eye(dim)
    s = h @ sig @ h.T + r + r_other
    k = sig @ h.T @ np.linalg.inv(s)
    a_kh = np.eye(dim) - k @ h
    surrogate = a_kh @ c.T @ c @ a_kh.T + k @ r @ k.T + q * np.eye(dim)
    s_chol = linalg.chol_upper(jnp.asarray(s))
    step = linalg.lowrank_kalman_weights(jnp.asarray(np.sum(c**2, 1)), jnp.asarray(h), jnp.asarray(c @ h.T), s_chol,
                                         linalg.sqrt_psd(jnp.asarray(r)), jnp.asarray(eps), q, use_q)
    out = linalg.lowrank_kalman_update(jnp.asarray(mu), jnp.asarray(c), step, s_chol, jnp.asarray(h))
    mu_new, c_new, g_new = (np.asarray(o) for o in out)
    np.testing.assert_allclose(mu_new, mu + k @ eps, atol=1e-10)
    evals, evecs = _top_eig(surrogate, d)
    np.testing.assert_allclose(c_new.T @ c_new, evecs @ np.diag(evals) @ evecs.T, atol=1e-9)
    np.testing.assert_allclose(c_new @ c_new.T, np.diag(g_new), atol=1e-9)  # the tracked Gram is exact
    if d == dim and not use_q:  # full rank: exactly the Joseph form
        np.testing.assert_allclose(c_new.T @ c_new, surrogate, atol=1e-9)


@pytest.mark.parametrize("singular_r", [False, True])
def test_sqrt_factor_update_is_block_joseph(x64, singular_r):
    rng = np.random.default_rng(5)
    dim, c_y = 6, 3
    u = np.triu(rng.normal(size=(dim, dim))) + 2 * np.eye(dim)
    sig = u.T @ u
    lj = rng.normal(size=(c_y, dim))
    m = rng.normal(size=(c_y, c_y))
    r = np.zeros((c_y, c_y)) if singular_r else m @ m.T / 3 + 0.2 * np.eye(c_y)
    r_other = np.diag([0.3, 0.2, 0.5])
    mu, eps = rng.normal(size=dim), rng.normal(size=c_y)
    s = lj @ sig @ lj.T + r_other + r
    k = sig @ lj.T @ np.linalg.inv(s)
    a_kl = np.eye(dim) - k @ lj
    joseph = a_kl @ sig @ a_kl.T + k @ r @ k.T
    mu_new, u_new = linalg.sqrt_factor_update(
        jnp.asarray(mu),
        jnp.asarray(u),
        jnp.asarray(u @ lj.T),
        jnp.asarray(s),
        jnp.asarray(r_other),
        linalg.sqrt_psd(jnp.asarray(r)),
        jnp.asarray(eps),
    )
    np.testing.assert_allclose(mu_new, mu + k @ eps, atol=1e-10)
    np.testing.assert_allclose(np.asarray(u_new).T @ np.asarray(u_new), joseph, atol=1e-9)


@pytest.mark.parametrize("c_y", [2, linalg._FUSED_RANK_MAX + 2])  # the fused-elementwise and the GEMM path
@pytest.mark.parametrize("with_other", [False, True])
def test_dense_block_update_is_block_joseph(x64, with_other, c_y):
    rng = np.random.default_rng(6)
    dim = 7 if c_y == 2 else 25
    a = rng.normal(size=(dim, dim))
    sig = a @ a.T / dim + 0.1 * np.eye(dim)
    lj = rng.normal(size=(c_y, dim))
    r = np.diag(rng.uniform(0.1, 0.4, size=c_y))
    b = rng.normal(size=(c_y, c_y))
    r_other = (b @ b.T / c_y + 0.1 * np.eye(c_y)) if with_other else np.zeros((c_y, c_y))
    mu, eps = rng.normal(size=dim), rng.normal(size=c_y)
    s = lj @ sig @ lj.T + r_other + r
    k = sig @ lj.T @ np.linalg.inv(s)
    a_kl = np.eye(dim) - k @ lj
    joseph = a_kl @ sig @ a_kl.T + k @ r @ k.T
    mu_new, sig_new = linalg.dense_block_update(
        jnp.asarray(mu), jnp.asarray(sig), jnp.asarray(sig @ lj.T), jnp.asarray(s), jnp.asarray(r_other),
        jnp.asarray(eps))
    np.testing.assert_allclose(mu_new, mu + k @ eps, atol=1e-10)
    np.testing.assert_allclose(sig_new, joseph, atol=1e-10)
    np.testing.assert_allclose(sig_new, sig_new.T, atol=0)


@pytest.mark.parametrize("c_y", [1, 3])
def test_dense_block_update_keeps_float32_covariance_exactly_symmetric_and_psd(c_y):
    """200 float32 EKF-style updates with no symmetrisation pass: Σ stays bitwise symmetric (every entry (i, j) is
    the same floating-point computation as (j, i)) and positive semi-definite up to rounding."""
    rng = np.random.default_rng(11)
    dim = 64
    a = rng.normal(size=(dim, dim)).astype(np.float32)
    sig = jnp.asarray(a @ a.T / dim + 0.01 * np.eye(dim, dtype=np.float32))
    jacs = jnp.asarray(rng.normal(size=(200, c_y, dim)).astype(np.float32))
    r = 1e-2 * jnp.eye(c_y, dtype=jnp.float32)

    def step(carry, lj):
        mu, sig = carry
        g = sig @ lj.T
        return linalg.dense_block_update(mu, sig, g, lj @ g + r, jnp.zeros_like(r), jnp.ones(c_y)), None

    mu, sig = jax.jit(lambda c, js: jax.lax.scan(step, c, js)[0])((jnp.zeros(dim), sig), jacs)
    sig = np.asarray(sig)
    np.testing.assert_array_equal(sig, sig.T)
    assert np.linalg.eigvalsh(sig.astype(np.float64)).min() > -1e-5 * np.abs(sig).max()
    assert np.all(np.isfinite(np.asarray(mu)))


def _psd(rng, n, rank=None):
    a = rng.normal(size=(n, rank or n))
    return a @ a.T / n + (0.0 if rank else 0.05 * np.eye(n))


def test_sample_factor_is_cholesky_for_spd(x64):
    cov = _psd(np.random.default_rng(7), 6)
    f = np.asarray(linalg.sample_factor(jnp.asarray(cov)))
    np.testing.assert_allclose(f @ f.T, cov, atol=1e-12)
    np.testing.assert_allclose(f, np.linalg.cholesky(cov), atol=1e-10)  # the Cholesky branch was taken


def test_sample_factor_falls_back_to_eigen_root(x64):
    # A symmetric matrix with a negative eigenvalue (round-off gone wrong): no Cholesky factor exists; the
    # eigen root clips it, so f fᵀ is the PSD part.
    rng = np.random.default_rng(8)
    q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    lam = np.array([-1e-3, 0.0, 0.5, 1.0, 2.0])
    cov = q @ np.diag(lam) @ q.T
    f = np.asarray(linalg.sample_factor(jnp.asarray(cov)))
    assert np.all(np.isfinite(f))
    np.testing.assert_allclose(f @ f.T, q @ np.diag(np.maximum(lam, 0)) @ q.T, atol=1e-10)


def test_sample_factor_vmapped_batch(x64):
    rng = np.random.default_rng(9)
    good = np.stack([_psd(rng, 5) for _ in range(3)])
    f = np.asarray(jax.jit(jax.vmap(linalg.sample_factor))(jnp.asarray(good)))
    np.testing.assert_allclose(f, np.linalg.cholesky(good), atol=1e-10)
    # One member without a Cholesky factor: the batch falls back together and every member is still a root.
    bad = good.copy()
    bad[1] = _psd(rng, 5, rank=2) - 1e-4 * np.eye(5)
    f = np.asarray(jax.jit(jax.vmap(linalg.sample_factor))(jnp.asarray(bad)))
    assert np.all(np.isfinite(f))
    for i in (0, 2):
        np.testing.assert_allclose(f[i] @ f[i].T, bad[i], atol=1e-10)
    w, v = np.linalg.eigh(bad[1])
    np.testing.assert_allclose(f[1] @ f[1].T, (v * np.maximum(w, 0)) @ v.T, atol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("blocked", [False, True])
def test_weighted_gram_matches_dense(x64, monkeypatch, weighted, blocked):
    """``Wᵀ diag(d) W``, on the single product and on the blocked loop (a remainder block of 3 rows), vmapped too."""
    if blocked:
        monkeypatch.setattr(linalg, "GRAM_BLOCK", 16)
        monkeypatch.setattr(linalg, "GRAM_MIN_SIZE", 0)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(2, 99, 7))
    d = np.exp(rng.normal(size=(2, 99))) if weighted else np.ones((2, 99))
    want = np.einsum("bpi,bp,bpj->bij", w, d, w)
    fn = (lambda w, d: linalg.weighted_gram(w, d)) if weighted else (lambda w, d: linalg.weighted_gram(w))
    np.testing.assert_allclose(jax.jit(fn)(w[0], d[0]), want[0], rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.vmap(fn))(w, d), want, rtol=1e-12)


def test_weighted_gram_blocks_only_large_factors(monkeypatch):
    """The blocked loop is traced only for ``P·n ≥ GRAM_MIN_SIZE`` and at least four blocks."""
    w = jnp.ones((4 * linalg.GRAM_BLOCK, 3))

    def has_loop(w):  # a fresh function each time: make_jaxpr caches traces by function
        eqns = jax.make_jaxpr(lambda v: linalg.weighted_gram(v))(w).eqns
        return any(e.primitive.name in ("while", "scan") for e in eqns)

    assert not has_loop(w)  # below GRAM_MIN_SIZE
    monkeypatch.setattr(linalg, "GRAM_MIN_SIZE", 0)
    assert has_loop(w)
    assert not has_loop(w[:-1])  # three whole blocks


def test_tall_t_matmul(x64):
    rng = np.random.default_rng(1)
    w, z, zs = rng.normal(size=(50, 4)), rng.normal(size=50), rng.normal(size=(50, 3))
    np.testing.assert_allclose(jax.jit(linalg.tall_t_matmul)(w, z), w.T @ z, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(linalg.tall_t_matmul)(w, zs), w.T @ zs, rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(linalg.tall_t_matmul)(w[None], zs[None])[0], w.T @ zs, rtol=1e-12)
    # both vector forms: rows up to SHORT_ROW long (the product zᵀW) and longer rows (the fused reduction)
    for n in (linalg.SHORT_ROW, linalg.SHORT_ROW + 1):
        w = rng.normal(size=(70, n))
        z70 = rng.normal(size=70)
        np.testing.assert_allclose(jax.jit(linalg.tall_t_matmul)(w, z70), w.T @ z70, rtol=1e-12)


def test_spd_inverse_and_tri_inverse_match_numpy(x64):
    rng = np.random.default_rng(3)
    a = rng.normal(size=(6, 6))
    spd = a @ a.T + 0.5 * np.eye(6)
    inv = np.asarray(linalg.spd_inverse(jnp.asarray(spd, jnp.float64)))
    np.testing.assert_allclose(inv, np.linalg.inv(spd), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(inv, inv.T)
    u = np.triu(a) + 4 * np.eye(6)
    np.testing.assert_allclose(np.asarray(linalg.tri_inverse(jnp.asarray(u, jnp.float64))), np.linalg.inv(u),
                               rtol=1e-8, atol=1e-10)
