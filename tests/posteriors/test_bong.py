"""The BONG grid: the paper's identities (EKF / VD-EKF / LoFi), exactness on a conjugate model, the rules' closed
forms, the DLR predict step, MC keys kept in the state, and jit / vmap / scan over every rule × family."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.likelihoods import Categorical, Gaussian
from banditkit.models import MLP
from banditkit.posteriors.bong import bong


def _run(post, state, xs, ys, predict=False):
    """Scan ``(predict,) update`` over a stream (one compile per backend)."""

    def step(s, xy):
        if predict:
            s = post.predict(s)
        return post.update(s, *xy), None

    return jax.jit(lambda s, a, b: jax.lax.scan(step, s, (a, b))[0])(state, xs, ys)


def _mlp_problem(dtype, out=1, n=8, seed=0):
    model = MLP(features=(4,), out=out)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    xs = jax.random.normal(k1, (n, 2), dtype)
    params = jax.tree_util.tree_map(lambda p: p.astype(dtype), model.init(k2, xs[0]))
    if out == 1:
        ys = jnp.sin(3 * xs[:, :1]) + 0.1 * jax.random.normal(k3, (n, 1), dtype)
    else:
        ys = jax.nn.one_hot(jax.random.randint(k3, (n,), 0, out), out, dtype=dtype)
    return model.apply, params, xs, ys


def _linear_problem(dtype, n=12, d=3, seed=1):
    """Conjugate linear-Gaussian model y = wᵀx + ε, ε ~ N(0, r)."""
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    xs = jax.random.normal(k1, (n, d), dtype)
    w_true = jax.random.normal(k2, (d,), dtype)
    ys = (xs @ w_true)[:, None] + 0.3 * jax.random.normal(k3, (n, 1), dtype)
    params = {"w": jnp.zeros((d,), dtype) + 0.1}

    def apply_fn(p, x):
        return jnp.atleast_1d(p["w"] @ x)

    return apply_fn, params, xs, ys


def _exact_linear(params, xs, ys, r, c0):
    """Closed-form batch posterior N(μ, Σ): Σ = (I/c0 + XᵀX/r)⁻¹, μ = Σ(μ0/c0 + Xᵀy/r)."""
    mu0 = np.asarray(params["w"])
    x = np.asarray(xs)
    prec = np.eye(x.shape[1]) / c0 + x.T @ x / r
    cov = np.linalg.inv(prec)
    return cov @ (mu0 / c0 + x.T @ np.asarray(ys)[:, 0] / r), cov


def _dlr_cov(state):
    w = np.asarray(state.low_rank)
    return np.linalg.inv(np.diag(np.asarray(state.prec_diag)) + w.T @ w)


# ---------------------------------------------------------------------------------------------------------- identities
@pytest.mark.parametrize("lik", ["gaussian", "categorical"])
def test_bong_lin_hess_full_equals_ekf(x64, lik):
    out = 1 if lik == "gaussian" else 3
    apply_fn, params, xs, ys = _mlp_problem(jnp.float64, out=out)
    likelihood = Gaussian(0.1) if lik == "gaussian" else Categorical(1e-4)
    a = bong(apply_fn, likelihood, family="full", init_cov=0.5)
    b = bk.posteriors.ekf(apply_fn, likelihood, init_cov=0.5)
    sa = _run(a, a.init(params), xs, ys)
    sb = _run(b, b.init(params), xs, ys)
    assert not np.allclose(sa.mean, a.init(params).mean)  # it learned something
    np.testing.assert_allclose(sa.mean, sb.mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sa.cov, sb.cov, rtol=1e-7, atol=1e-9)


def test_bong_lin_hess_diag_is_vdekf(x64):
    """Against an independent VD-EKF oracle written here, and against ``diag_ekf`` when registered."""
    apply_fn, params, xs, ys = _mlp_problem(jnp.float64)
    r = 0.1
    post = bong(apply_fn, Gaussian(r), family="diag", init_cov=0.5)
    st = _run(post, post.init(params), xs, ys)
    space = bk.posteriors.ParamSpace(params)
    mu = np.asarray(space.ravel(params))
    prec = np.full(mu.shape, 2.0)
    for x, y in zip(xs, ys, strict=True):
        f = lambda t, x=x: apply_fn(space.unravel(t), x)  # noqa: E731
        h = np.asarray(jax.jacrev(f)(jnp.asarray(mu)))
        yhat = np.asarray(f(jnp.asarray(mu)))
        prec = prec + np.sum(h**2, axis=0) / r
        mu = mu + (h.T @ (np.asarray(y) - yhat)) / r / prec
    np.testing.assert_allclose(st.mean, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(st.prec, prec, rtol=1e-8)
    # ``diag_ekf`` (seed 000's VD-EKF = zero-rank LoFi) shares the precision step υ ← υ + diag(HᵀR⁻¹H) but moves the
    # mean with the un-truncated precision, diag(1/υ_p) Hᵀ S⁻¹ (y − ŷ); seed 004 eq. (215) uses the diagonal posterior
    # precision, σ_t² Hᵀ R⁻¹ (y − ŷ).  Only one step from the same prior can be compared on the mean side.
    other = bk.posteriors.get("diag_ekf")(apply_fn, Gaussian(r), init_cov=0.5)
    so = _run(other, other.init(params), xs, ys)
    s1 = _run(post, post.init(params), xs[:1], ys[:1])
    o1 = _run(other, other.init(params), xs[:1], ys[:1])
    np.testing.assert_allclose(s1.prec, o1.prec, rtol=1e-10)
    assert not np.allclose(st.prec, so.prec)  # different means → different linearisation points afterwards
    p0 = np.full(mu.shape, 2.0)
    h = np.asarray(jax.jacrev(lambda t: apply_fn(space.unravel(t), xs[0]))(space.ravel(params)))
    np.testing.assert_allclose(s1.mean - space.ravel(params), (p0 + np.sum(h**2, 0) / r) ** -1 * (h.T @ (
        np.asarray(ys[0]) - np.asarray(apply_fn(params, xs[0])))) / r, rtol=1e-8)


def test_bong_lin_hess_dlr_full_rank_equals_ekf(x64):
    """DLR with R ≥ P is lossless: it must equal the full-covariance EKF."""
    apply_fn, params, xs, ys = _mlp_problem(jnp.float64)
    p = bk.posteriors.ParamSpace(params).size
    a = bong(apply_fn, Gaussian(0.1), family="dlr", rank=p, init_cov=0.5)
    b = bk.posteriors.ekf(apply_fn, Gaussian(0.1), init_cov=0.5)
    sa = _run(a, a.init(params), xs, ys)
    sb = _run(b, b.init(params), xs, ys)
    np.testing.assert_allclose(sa.mean, sb.mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(_dlr_cov(sa), sb.cov, rtol=1e-6, atol=1e-8)


def test_bong_lin_hess_dlr_equals_lofi(x64):
    apply_fn, params, xs, ys = _mlp_problem(jnp.float64)
    a = bong(apply_fn, Gaussian(0.1), family="dlr", rank=3, init_cov=0.5)
    b = bk.posteriors.get("lofi")(apply_fn, Gaussian(0.1), rank=3, init_cov=0.5)
    sa = _run(a, a.init(params), xs, ys)
    sb = _run(b, b.init(params), xs, ys)
    space = bk.posteriors.ParamSpace(params)
    np.testing.assert_allclose(sa.mean, space.ravel(b.mean(sb)), rtol=1e-6, atol=1e-8)
    for x in xs[:3]:
        ma, ca = a.predictive(sa, x)
        mb, cb = b.predictive(sb, x)
        np.testing.assert_allclose(ma, mb, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ca, cb, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "family, estimator",
    [("full", "linear-hessian"), ("dlr", "linear-hessian"), ("dlr", "linear-ef"), ("dlr", "mc-ef")],
)
def test_blr_unit_step_equals_bong(x64, family, estimator):
    """BLR with α = 1, I = 1 is BONG (the KL gradient vanishes at ψ_p); different code paths in both families.

    In the DLR family BONG's mean step is in gain form, ``Σ Bᵀ (I + BΣBᵀ)⁻¹ c`` with ``g = Bᵀc``, and BLR's is the
    Woodbury solve with ``g``: equal only if every estimator's ``c`` is right (MC draws are shared: same key)."""
    apply_fn, params, xs, ys = _mlp_problem(jnp.float64)
    kw = dict(family=family, rank=4, init_cov=0.5, estimator=estimator, n_samples=5)
    a = bong(apply_fn, Gaussian(0.1), **kw)
    b = bong(apply_fn, Gaussian(0.1), rule="blr", learning_rate=1.0, **kw)
    sa = _run(a, a.init(params), xs, ys)
    sb = _run(b, b.init(params), xs, ys)
    np.testing.assert_allclose(sa.mean, sb.mean, rtol=1e-6, atol=1e-8)
    for x in xs[:3]:
        np.testing.assert_allclose(a.predictive(sa, x)[1], b.predictive(sb, x)[1], rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------------------------------------- conjugate exactness
@pytest.mark.parametrize(
    "kw",
    [
        dict(family="full"),
        dict(family="dlr", rank=3),
        dict(family="full", rule="blr", learning_rate=0.5, num_iter=40),
        dict(family="dlr", rank=3, rule="blr", learning_rate=0.5, num_iter=40),
    ],
    ids=["bong-full", "bong-dlr", "blr-full-I40", "blr-dlr-I40"],
)
def test_exact_on_conjugate_linear_gaussian(x64, kw):
    apply_fn, params, xs, ys = _linear_problem(jnp.float64)
    r, c0 = 0.09, 2.0
    post = bong(apply_fn, Gaussian(r), init_cov=c0, **kw)
    st = _run(post, post.init(params), xs, ys)
    mu, cov = _exact_linear(params, xs, ys, r, c0)
    np.testing.assert_allclose(st.mean, mu, rtol=1e-8, atol=1e-9)
    got = st.cov if kw["family"] == "full" else _dlr_cov(st)
    np.testing.assert_allclose(got, cov, rtol=1e-8, atol=1e-10)


def test_mc_hessian_approaches_exact_on_conjugate(x64):
    """MC-Hessian: G is exact on a linear-Gaussian model, g is an M-sample average (error O(1/√M))."""
    apply_fn, params, xs, ys = _linear_problem(jnp.float64, n=6)
    r, c0 = 0.09, 2.0
    post = bong(apply_fn, Gaussian(r), estimator="mc-hessian", family="full", n_samples=4000, init_cov=c0)
    st = _run(post, post.init(params), xs, ys)
    mu, cov = _exact_linear(params, xs[:6], ys[:6], r, c0)
    np.testing.assert_allclose(st.cov, cov, rtol=1e-8, atol=1e-10)  # Hessian of a quadratic: exact
    np.testing.assert_allclose(st.mean, mu, atol=0.05)
    assert not np.allclose(st.mean, mu, atol=1e-9)  # and it is really Monte Carlo


def test_mc_hessian_diag_hutchinson_on_separable_model(x64):
    """Per-coordinate model y_j = w_j x_j: the Hessian is diagonal, Hutchinson is exact, diag posterior is exact."""
    d, r, c0 = 3, 0.25, 1.0
    k1, k2 = jax.random.split(jax.random.PRNGKey(3))
    xs = jax.random.normal(k1, (5, d), jnp.float64)
    ys = xs * jnp.array([1.0, -2.0, 0.5]) + 0.5 * jax.random.normal(k2, (5, d), jnp.float64)
    params = jnp.zeros((d,), jnp.float64)
    post = bong(lambda p, x: p * x, Gaussian(r), estimator="mc-hessian", family="diag", n_samples=4000,
                n_probes=2, init_cov=c0)
    st = _run(post, post.init(params), xs, ys)
    prec = 1.0 / c0 + np.sum(np.asarray(xs) ** 2, 0) / r
    mu = (np.sum(np.asarray(xs) * np.asarray(ys), 0) / r) / prec
    np.testing.assert_allclose(st.prec, prec, rtol=1e-10)
    np.testing.assert_allclose(st.mean, mu, atol=0.05)


# ---------------------------------------------------------------------------------------------------- rule closed forms
def test_bog_full_matches_paper_formula(x64):
    """BOG-FC one step, eqs. (141–142) (symmetrised), on a conjugate model so (g, G) are known exactly."""
    apply_fn, params, xs, ys = _linear_problem(jnp.float64)
    r, c0, alpha = 0.5, 1.5, 0.05
    post = bong(apply_fn, Gaussian(r), rule="bog", learning_rate=alpha, family="full", init_cov=c0)
    s0 = post.init(params)
    s1 = jax.jit(post.update)(s0, xs[0], ys[0])
    x, y = np.asarray(xs[0]), np.asarray(ys[0])
    mu_p, sig_p = np.asarray(s0.mean), np.asarray(s0.cov)
    g = x * (y[0] - x @ mu_p) / r
    gm = -np.outer(x, x) / r
    t = sig_p @ np.outer(g, mu_p)
    prec = np.linalg.inv(sig_p) - 2 * alpha * (t + t.T) - 2 * alpha * sig_p @ gm @ sig_p
    sig = np.linalg.inv(prec)
    mu = sig @ (np.linalg.inv(sig_p) @ mu_p + alpha * sig_p @ g)
    np.testing.assert_allclose(s1.cov, sig, rtol=1e-10)
    np.testing.assert_allclose(s1.mean, mu, rtol=1e-10)


def test_bbb_diag_matches_paper_formula(x64):
    """BBB-DIAG two iterations, eqs. (230–231), on a conjugate model."""
    apply_fn, params, xs, ys = _linear_problem(jnp.float64)
    r, c0, alpha = 0.5, 1.5, 0.02
    post = bong(apply_fn, Gaussian(r), rule="bbb", learning_rate=alpha, num_iter=2, family="diag", init_cov=c0)
    s0 = post.init(params)
    s1 = jax.jit(post.update)(s0, xs[0], ys[0])
    x, y = np.asarray(xs[0]), np.asarray(ys[0])
    mu_p, prec_p = np.asarray(s0.mean), np.asarray(s0.prec)
    mu, prec = mu_p.copy(), prec_p.copy()
    for _ in range(2):
        g = x * (y[0] - x @ mu) / r
        d = -(x**2) / r
        v = 1 / prec
        prec_new = (prec - 4 * alpha * v * mu * g - 2 * alpha * v**2 * d + 4 * alpha * v * prec_p * mu * (mu - mu_p)
                    + 2 * alpha * v**2 * (prec_p - prec))
        v_new = 1 / prec_new
        mu = v_new * prec * mu + alpha * v_new * v * g + alpha * v_new * v * prec_p * (mu_p - mu)
        prec = prec_new
    np.testing.assert_allclose(s1.prec, prec, rtol=1e-10)
    np.testing.assert_allclose(s1.mean, mu, rtol=1e-10)


def test_bog_dlr_full_rank_matches_moment_gradient(x64):
    """BOG-DLR (310–311): μ ← μ + αg, Λ-gradient ½Σ(−G)Σ mapped onto (υ, W); checked densely at R ≥ P."""
    apply_fn, params, xs, ys = _linear_problem(jnp.float64)
    r, c0, alpha = 0.5, 1.5, 0.05
    post = bong(apply_fn, Gaussian(r), rule="bog", learning_rate=alpha, family="dlr", rank=3, init_cov=c0)
    s0 = jax.jit(post.update)(post.init(params), xs[1], ys[1])  # a state with W ≠ 0 (BOG from W = 0 keeps W = 0)
    s0 = s0._replace(low_rank=s0.low_rank + 0.3 * jnp.eye(3))
    s1 = jax.jit(post.update)(s0, xs[0], ys[0])
    x, y = np.asarray(xs[0]), np.asarray(ys[0])
    ups, w, mu = np.asarray(s0.prec_diag), np.asarray(s0.low_rank), np.asarray(s0.mean)
    sig = np.linalg.inv(np.diag(ups) + w.T @ w)
    g = x * (y[0] - x @ mu) / r
    m = sig @ (np.outer(x, x) / r) @ sig
    np.testing.assert_allclose(s1.mean, mu + alpha * g, rtol=1e-10)
    np.testing.assert_allclose(s1.prec_diag, ups + 0.5 * alpha * np.diag(m), rtol=1e-10)
    np.testing.assert_allclose(s1.low_rank, w + alpha * w @ m, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------------------------------------- predict step
@pytest.mark.parametrize("family", ["full", "diag", "dlr"])
def test_predict_matches_moment_form(x64, family):
    apply_fn, params, xs, ys = _linear_problem(jnp.float64)
    gamma, q = 0.9, 0.05
    post = bong(apply_fn, Gaussian(0.5), family=family, rank=3, forgetting=gamma, dynamics_cov=q)
    s = _run(post, post.init(params), xs[:4], ys[:4])
    sp = jax.jit(post.predict)(s)
    cov = {"full": lambda st: np.asarray(st.cov), "diag": lambda st: np.diag(1 / np.asarray(st.prec)),
           "dlr": _dlr_cov}[family]
    np.testing.assert_allclose(sp.mean, gamma * np.asarray(s.mean), rtol=1e-12)
    np.testing.assert_allclose(cov(sp), gamma**2 * cov(s) + q * np.eye(3), rtol=1e-9, atol=1e-12)
    if family == "dlr":  # and the predict step really acts inside a scan
        s_pred = _run(post, post.init(params), xs[:4], ys[:4], predict=True)
        assert not np.allclose(s_pred.mean, s.mean)


# ------------------------------------------------------------------------------------------------ keys, purity, grid
def test_mc_key_lives_in_state_and_update_is_pure():
    apply_fn, params, xs, ys = _mlp_problem(jnp.float32)
    post = bong(apply_fn, Gaussian(0.1), estimator="mc-ef", family="dlr", rank=2, n_samples=8)
    s0 = post.init(params)
    upd = jax.jit(post.update)
    a, b = upd(s0, xs[0], ys[0]), upd(s0, xs[0], ys[0])
    np.testing.assert_array_equal(a.mean, b.mean)
    assert not np.array_equal(a.key, s0.key)
    c = upd(s0._replace(key=jax.random.PRNGKey(7)), xs[0], ys[0])
    assert not np.allclose(a.mean, c.mean)


# Cells of the rule × estimator × family grid not already run under jit + scan by the tests above (those cover
# bong/LinHess on all families, blr/LinHess full+dlr, bong/MC-Hessian full+diag, bog full+dlr, bbb diag, bong/MC-EF
# dlr); together every rule meets every family and every estimator.
GRID = [("blr", "mc-ef", "diag"), ("blr", "mc-hessian", "full"), ("blr", "linear-ef", "dlr"),
        ("bog", "mc-hessian", "diag"), ("bog", "linear-ef", "dlr"), ("bog", "mc-ef", "full"),
        ("bbb", "linear-ef", "full"), ("bbb", "mc-ef", "dlr"), ("bbb", "mc-hessian", "diag"),
        ("bong", "linear-ef", "full")]


@pytest.mark.parametrize("rule,est,fam", GRID, ids=["-".join(g) for g in GRID])
def test_grid_runs_under_jit_vmap_scan(rule, est, fam):
    """A jitted scan over a short stream (vmapped over 2 keys for MC estimators); finite and moving."""
    apply_fn, params, xs, ys = _linear_problem(jnp.float32, n=4)
    kw = dict(rule=rule, estimator=est, family=fam, rank=2, n_samples=4, n_probes=2, init_cov=0.5)
    if rule in ("blr", "bbb"):
        kw["num_iter"] = 2
    if rule in ("bog", "bbb"):
        kw["learning_rate"] = 0.01
    post = bong(apply_fn, Gaussian(0.5), **kw)
    s0 = post.init(params)
    if est.startswith("mc"):
        states = jax.vmap(lambda k: s0._replace(key=k))(jax.random.split(jax.random.PRNGKey(1), 2))
        out = jax.vmap(lambda s: _run(post, s, xs, ys))(states)
    else:
        out = jax.tree_util.tree_map(lambda a: a[None], _run(post, s0, xs, ys))
    for leaf in jax.tree_util.tree_leaves(out):
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert not np.allclose(out.mean[0], s0.mean)
    if est.startswith("mc"):
        assert not np.allclose(out.mean[0], out.mean[1])  # the two seeds' keys differ
    m, c = post.predictive(jax.tree_util.tree_map(lambda a: a[0], out), xs[0])
    assert m.shape == (1,) and c.shape == (1, 1) and float(c[0, 0]) > 0


def test_sample_moments_dlr(x64):
    """The DLR thin-SVD sampler draws from N(μ, (diag υ + WᵀW)⁻¹)."""
    apply_fn, params, xs, ys = _linear_problem(jnp.float64)
    post = bong(apply_fn, Gaussian(0.5), family="dlr", rank=2, init_cov=1.0)
    s = _run(post, post.init(params), xs[:5], ys[:5])
    draws = jax.vmap(lambda k: post.sample(k, s)["w"])(jax.random.split(jax.random.PRNGKey(0), 4000))
    np.testing.assert_allclose(np.mean(draws, 0), s.mean, atol=0.04)
    np.testing.assert_allclose(np.cov(np.asarray(draws).T), _dlr_cov(s), atol=0.04)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rule"):
        bong(lambda p, x: p, rule="adam")
    with pytest.raises(ValueError, match="mc-hessian"):
        bong(lambda p, x: p, estimator="mc-hessian", family="dlr")
    with pytest.raises(ValueError, match="learning_rate"):
        bong(lambda p, x: p, learning_rate=0.1)
    with pytest.raises(ValueError, match="num_iter"):
        bong(lambda p, x: p, rule="bog", num_iter=3)
