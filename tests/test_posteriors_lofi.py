"""LoFi (seed 000) against exact oracles: closed-form Kalman filter, full EKF, exact DLR update algebra."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.likelihoods import Categorical, Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors.lofi import _apply_f, _whitened_svd

# ---------------------------------------------------------------------------------------------------------------
# linear-Gaussian model y = W x + b + noise (C = 2 outputs, P = 8 parameters) and its closed-form Kalman filter


def linear_apply(params, x):
    return params["w"] @ x + params["b"]


def _linear_params(dtype):
    key = jax.random.PRNGKey(3)
    return {"b": jnp.zeros((2,), dtype), "w": (0.3 * jax.random.normal(key, (2, 3))).astype(dtype)}


def _stream(n, dtype):
    kx, kn = jax.random.split(jax.random.PRNGKey(7))
    xs = jax.random.normal(kx, (n, 3), dtype)
    w_true = jnp.array([[1.0, -2.0, 0.5], [0.3, 0.0, -1.0]], dtype)
    ys = xs @ w_true.T + jnp.array([0.5, -0.2], dtype) + 0.3 * jax.random.normal(kn, (n, 2), dtype)
    return xs, ys


def kalman_oracle(params, xs, ys, *, obs_noise, init_cov, q, gamma, inflation="none", alpha=0.0):
    """Closed-form KF (full matrices, numpy float64), with the App. E inflation written in covariance form."""
    flat, _ = jax.flatten_util.ravel_pytree(params)
    mu0 = np.asarray(flat, np.float64)
    p = mu0.size
    mu, cov = mu0.copy(), init_cov * np.eye(p)
    eta, big_gamma = 1.0 / init_cov, 1.0
    means, covs = [], []
    for x, y in zip(np.asarray(xs, np.float64), np.asarray(ys, np.float64), strict=True):
        if inflation != "none":
            prec = np.linalg.inv(cov) / (1 + alpha)
            if inflation in ("hybrid", "bayesian"):
                prec = prec + alpha * eta / (1 + alpha) * np.eye(p)
            cov_hat = np.linalg.inv(prec)
            if inflation == "bayesian":
                mu = mu + alpha * eta / (1 + alpha) * cov_hat @ (big_gamma * mu0 - mu)
            cov = cov_hat
        mu, cov = gamma * mu, gamma**2 * cov + q * np.eye(p)
        eta, big_gamma = eta / (gamma**2 + q * eta), gamma * big_gamma
        # parameter order of ravel_pytree: b (2,), then w (2, 3) row-major
        h = np.concatenate([np.eye(2), np.kron(np.eye(2), x[None, :])], axis=1)  # (2, 8)
        s = h @ cov @ h.T + obs_noise * np.eye(2)
        k = cov @ h.T @ np.linalg.inv(s)
        mu = mu + k @ (y - h @ mu)
        cov = cov - k @ s @ k.T
        means.append(mu.copy())
        covs.append(cov.copy())
    return np.stack(means), np.stack(covs)


def _run_scan(post, params, xs, ys):
    """predict + update over the stream in one jitted lax.scan; returns all means and precisions."""

    @jax.jit
    def go(xs, ys):
        def step(state, xy):
            state = post.update(post.predict(state), xy[0], xy[1])
            prec = jnp.diag(state.prec_diag) + state.prec_lr @ state.prec_lr.T  # P = 8: fine in a test
            return state, (state.mean, prec)

        return jax.lax.scan(step, post.init(params), (xs, ys))

    return go(xs, ys)


@pytest.mark.parametrize(
    "q,gamma,inflation,alpha",
    [(0.0, 1.0, "none", 0.0), (0.05, 0.9, "none", 0.0), (0.02, 0.95, "simple", 0.1),
     (0.02, 0.95, "hybrid", 0.1), (0.02, 0.95, "bayesian", 0.1)],
)
def test_full_rank_lofi_equals_closed_form_kalman(x64, q, gamma, inflation, alpha):
    params = _linear_params(jnp.float64)
    xs, ys = _stream(12, jnp.float64)
    post = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=8, init_cov=2.0, dynamics_cov=q,
                              forgetting=gamma, inflation=inflation, inflation_factor=alpha)
    state, (means, precs) = _run_scan(post, params, xs, ys)
    ref_means, ref_covs = kalman_oracle(params, xs, ys, obs_noise=0.09, init_cov=2.0, q=q, gamma=gamma,
                                        inflation=inflation, alpha=alpha)
    np.testing.assert_allclose(means, ref_means, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.linalg.inv(np.asarray(precs)), ref_covs, rtol=1e-8, atol=1e-10)
    # the predictive is J Σ Jᵀ + R with J the design matrix
    x = jnp.array([0.2, -1.0, 0.7], jnp.float64)
    h = np.concatenate([np.eye(2), np.kron(np.eye(2), np.asarray(x)[None, :])], axis=1)
    mean, cov = jax.jit(post.predictive)(state, x)
    np.testing.assert_allclose(mean, h @ ref_means[-1], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(cov, h @ ref_covs[-1] @ h.T + 0.09 * np.eye(2), rtol=1e-8, atol=1e-10)


def test_dynamics_and_forgetting_act(x64):
    """The stationary and the drifting filters must differ, and predict alone must move mean and precision."""
    params = _linear_params(jnp.float64)
    xs, ys = _stream(6, jnp.float64)
    stat = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=8)
    drift = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=8, dynamics_cov=0.1, forgetting=0.8)
    _, (m1, p1) = _run_scan(stat, params, xs, ys)
    _, (m2, p2) = _run_scan(drift, params, xs, ys)
    assert np.abs(np.asarray(m1[-1] - m2[-1])).max() > 1e-3
    s = drift.init(params)
    s2 = drift.predict(s)
    np.testing.assert_allclose(s2.mean, 0.8 * s.mean)
    np.testing.assert_allclose(1 / s2.prec_diag, 0.64 / s.prec_diag + 0.1)


def test_full_rank_lofi_equals_ekf_on_nonlinear_classifier(x64):
    model = MLP(features=(3,), out=3)
    params = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), model.init(jax.random.PRNGKey(0), jnp.zeros(2)))
    p = jax.flatten_util.ravel_pytree(params)[0].size
    kw = dict(init_cov=0.5, dynamics_cov=0.01, forgetting=0.97)
    ekf = bk.posteriors.ekf(model.apply, Categorical(), **kw)
    lofi = bk.posteriors.lofi(model.apply, Categorical(), rank=p, **kw)
    xs = jax.random.normal(jax.random.PRNGKey(1), (5, 2), jnp.float64)
    ys = jax.nn.one_hot(jnp.arange(5) % 3, 3, dtype=jnp.float64)

    def run(post):
        step = lambda s, xy: (post.update(post.predict(s), xy[0], xy[1]), None)
        return jax.jit(lambda: jax.lax.scan(step, post.init(params), (xs, ys))[0])()

    se, sl = run(ekf), run(lofi)
    np.testing.assert_allclose(sl.mean, se.mean, atol=1e-10)
    prec = np.diag(sl.prec_diag) + np.asarray(sl.prec_lr @ sl.prec_lr.T)
    np.testing.assert_allclose(np.linalg.inv(prec), se.cov, atol=1e-10)
    np.testing.assert_allclose(lofi.predictive(sl, xs[0])[1], ekf.predictive(se, xs[0])[1], atol=1e-10)


@pytest.mark.parametrize("rank", [0, 2])
def test_truncated_update_exact_mean_and_preserved_diagonal(x64, rank):
    """rank < P: the mean is the exact update of the DLR(L) prior; diag of the precision is preserved (eq. 41)."""
    params = _linear_params(jnp.float64)
    xs, ys = _stream(4, jnp.float64)
    post = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=rank, init_cov=2.0)
    update = jax.jit(post.update)
    state = post.init(params)
    for t in range(3):
        state = update(state, xs[t], ys[t])
    prec_prior = np.diag(state.prec_diag) + np.asarray(state.prec_lr @ state.prec_lr.T)
    x, y = np.asarray(xs[3]), np.asarray(ys[3])
    h = np.concatenate([np.eye(2), np.kron(np.eye(2), x[None, :])], axis=1)
    prec_exact = prec_prior + h.T @ h / 0.09
    mu_exact = state.mean + np.linalg.solve(prec_exact, h.T @ (y - h @ np.asarray(state.mean)) / 0.09)
    new = update(state, xs[3], ys[3])
    assert new.prec_lr.shape == (8, rank)
    np.testing.assert_allclose(new.mean, mu_exact, atol=1e-10)
    prec_new = np.diag(new.prec_diag) + np.asarray(new.prec_lr @ new.prec_lr.T)
    np.testing.assert_allclose(np.diag(prec_new), np.diag(prec_exact), rtol=1e-10)
    # the kept low-rank part is the best rank-L part of the new information W̃ W̃ᵀ
    wt = np.concatenate([np.asarray(state.prec_lr), h.T / 0.3], axis=1)
    evals = np.linalg.eigvalsh(wt @ wt.T)[::-1]
    np.testing.assert_allclose(np.linalg.eigvalsh(np.asarray(new.prec_lr @ new.prec_lr.T))[::-1][:rank],
                               evals[:rank], rtol=1e-9)
    # spherical LoFi drops the discarded directions: Υ stays at its prior value
    sph = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=rank, init_cov=2.0, spherical=True)
    s = sph.update(sph.init(params), xs[0], ys[0])
    np.testing.assert_allclose(s.prec_diag, 0.5)


def test_sampler_covariance_is_the_dlr_inverse(x64):
    params = _linear_params(jnp.float64)
    xs, ys = _stream(5, jnp.float64)
    post = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=3, init_cov=2.0, dynamics_cov=0.01)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    state = post.init(params)
    for t in range(5):
        state = step(state, xs[t], ys[t])
    prec = np.diag(state.prec_diag) + np.asarray(state.prec_lr @ state.prec_lr.T)
    cov = np.linalg.inv(prec)
    # exact: the sampling matrix Υ^{-1/2} F has (Υ^{-1/2} F)(Υ^{-1/2} F)ᵀ = Σ
    j, c = _whitened_svd(state.prec_diag, state.prec_lr)
    m = np.asarray(_apply_f(j, c, jnp.eye(8, dtype=jnp.float64))) / np.sqrt(np.asarray(state.prec_diag))[:, None]
    np.testing.assert_allclose(m @ m.T, cov, rtol=1e-9, atol=1e-12)
    # Monte Carlo through the public sample()
    draws = jax.jit(jax.vmap(lambda k: jax.flatten_util.ravel_pytree(post.sample(k, state))[0]))(
        jax.random.split(jax.random.PRNGKey(0), 20000))
    draws = np.asarray(draws)
    np.testing.assert_allclose(draws.mean(0), state.mean, atol=4 * np.sqrt(np.diag(cov).max() / 20000))
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.05 * np.abs(cov).max())


# ---------------------------------------------------------------------------------------------------------------
# rank < P on a small nonlinear regression (float32)


def _sine_data(n=160):
    kx, kn = jax.random.split(jax.random.PRNGKey(11))
    xs = jax.random.uniform(kx, (n, 1), minval=-2.0, maxval=2.0)
    ys = jnp.sin(2.0 * xs) + 0.1 * jax.random.normal(kn, (n, 1))
    return xs, ys


_MODEL = MLP(features=(16,), out=1)
_PARAMS = _MODEL.init(jax.random.PRNGKey(0), jnp.zeros(1))


def _fit(post):
    xs, ys = _sine_data()

    @jax.jit
    def go(xs, ys):
        def step(state, xy):
            return post.update(post.predict(state), xy[0], xy[1]), None

        state, _ = jax.lax.scan(step, post.init(_PARAMS), (xs, ys))
        mse = lambda p: jnp.mean((jax.vmap(lambda x: _MODEL.apply(p, x))(xs) - ys) ** 2)
        return state, mse(_PARAMS), mse(post.mean(state))

    return go(xs, ys)


def test_low_rank_lofi_fits_nonlinear_regression_and_inflations_differ():
    results = {}
    for inflation in ("none", "simple", "hybrid", "bayesian"):
        post = bk.posteriors.lofi(_MODEL.apply, Gaussian(0.01), rank=4, init_cov=1.0, dynamics_cov=1e-5,
                                  forgetting=0.9999, inflation=inflation, inflation_factor=1e-3)
        state, mse0, mse1 = _fit(post)
        assert state.mean.dtype == jnp.float32 and state.prec_lr.shape == (49, 4)
        leaves = jax.tree_util.tree_leaves(state)
        assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in leaves), inflation
        assert bool(jnp.all(state.prec_diag > 0))
        assert float(mse1) < 0.25 * float(mse0), (inflation, float(mse0), float(mse1))
        mean, cov = post.predictive(state, jnp.array([0.5]))
        assert mean.shape == (1,) and cov.shape == (1, 1) and float(cov[0, 0]) > 0.01 - 1e-6
        results[inflation] = np.asarray(state.mean)
    names = list(results)
    for i in range(len(names)):
        for k in range(i + 1, len(names)):
            assert np.abs(results[names[i]] - results[names[k]]).max() > 1e-6, (names[i], names[k])


def test_spherical_lofi_runs_and_fits():
    post = bk.posteriors.lofi(_MODEL.apply, Gaussian(0.01), rank=8, spherical=True)
    state, mse0, mse1 = _fit(post)
    assert bool(jnp.all(jnp.isfinite(state.mean))) and float(mse1) < 0.25 * float(mse0)
    np.testing.assert_allclose(state.prec_diag, 1.0)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="rank"):
        bk.posteriors.lofi(linear_apply, rank=-1)
    with pytest.raises(ValueError, match="inflation"):
        bk.posteriors.lofi(linear_apply, inflation="bogus")
    with pytest.raises(ValueError, match="forgetting"):
        bk.posteriors.lofi(linear_apply, forgetting=0.0)
    post = bk.posteriors.lofi(linear_apply, Gaussian(1.0), rank=2)
    state = post.init(_linear_params(jnp.float32))
    with pytest.raises(ValueError, match="shape"):
        post.update(state, jnp.ones(3), jnp.ones(3))
    assert bk.posteriors.get("lofi") is bk.posteriors.lofi
