"""LoFi (seed 000) against exact oracles: closed-form Kalman filter, full EKF, exact DLR update algebra."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.likelihoods import Categorical, Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors.dlr import apply_f, cov_root

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


def kalman_oracle(params, xs, ys, *, init_cov, q, gamma, obs_noise=None, inflation="none", alpha=0.0):
    """Closed-form (extended) KF, full matrices in numpy float64, with App. E inflation in covariance form.

    ``obs_noise=None``: moment-matched softmax observations of the linear logits (``J = (diag p − ppᵀ) H``,
    ``R = diag p − ppᵀ + 1e-4 I``); otherwise Gaussian observations ``y = H θ + N(0, obs_noise I)``.
    """
    flat, _ = jax.flatten_util.ravel_pytree(params)
    mu0 = np.asarray(flat, np.float64)
    p = mu0.size
    # init_cov: one variance, or (P,) per parameter in ravel_pytree's order (then inflation must be "none")
    mu, cov = mu0.copy(), np.diag(np.broadcast_to(np.asarray(init_cov, np.float64), (p,)))
    eta, big_gamma = 1.0 / np.mean(init_cov), 1.0
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
        if obs_noise is None:
            z = h @ mu
            prob = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            r = np.diag(prob) - np.outer(prob, prob)
            h, yhat, r = r @ h, prob, r + 1e-4 * np.eye(2)
        else:
            yhat, r = h @ mu, obs_noise * np.eye(2)
        s = h @ cov @ h.T + r
        k = cov @ h.T @ np.linalg.inv(s)
        mu = mu + k @ (y - yhat)
        cov = cov - k @ s @ k.T
        means.append(mu.copy())
        covs.append(cov.copy())
    return np.stack(means), np.stack(covs)


def _scan_body(post):
    def step(state, xy):
        state = post.update(post.predict(state), xy[0], xy[1])
        prec = jnp.diag(state.prec_diag) + state.prec_lr @ state.prec_lr.T  # P = 8: fine in a test
        return state, (state.mean, prec)

    return step


@functools.partial(jax.jit, static_argnames=("inflation", "categorical"))
def _traced_lofi_run(params, xs, ys, x_query, q, gamma, alpha, *, inflation, categorical):
    """Full-rank LoFi built INSIDE jit with traced (q, γ, α): one compile serves every value."""
    lik = Categorical() if categorical else Gaussian(0.09)
    post = bk.posteriors.lofi(linear_apply, lik, rank=8, init_cov=2.0, dynamics_cov=q, forgetting=gamma,
                              inflation=inflation, inflation_factor=alpha)
    state, (means, precs) = jax.lax.scan(_scan_body(post), post.init(params), (xs, ys))
    return means, precs, post.predictive(state, x_query)


@pytest.mark.parametrize(
    "inflation,configs",
    [("none", [(0.0, 1.0, 0.0), (0.05, 0.9, 0.0)]), ("simple", [(0.02, 0.95, 0.1)]),
     ("hybrid", [(0.02, 0.95, 0.1)]), ("bayesian", [(0.0, 1.0, 0.2), (0.02, 0.95, 0.1)])],
)
def test_full_rank_lofi_equals_closed_form_kalman(x64, inflation, configs):
    params = _linear_params(jnp.float64)
    xs, ys = _stream(12, jnp.float64)
    x = jnp.array([0.2, -1.0, 0.7], jnp.float64)
    h = np.concatenate([np.eye(2), np.kron(np.eye(2), np.asarray(x)[None, :])], axis=1)
    for q, gamma, alpha in configs:
        means, precs, (mean, cov) = _traced_lofi_run(params, xs, ys, x, q, gamma, alpha, inflation=inflation,
                                                     categorical=False)
        ref_means, ref_covs = kalman_oracle(params, xs, ys, obs_noise=0.09, init_cov=2.0, q=q, gamma=gamma,
                                            inflation=inflation, alpha=alpha)
        np.testing.assert_allclose(means, ref_means, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(np.linalg.inv(np.asarray(precs)), ref_covs, rtol=1e-8, atol=1e-10)
        # the predictive is J Σ Jᵀ + R with J the design matrix
        np.testing.assert_allclose(mean, h @ ref_means[-1], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(cov, h @ ref_covs[-1] @ h.T + 0.09 * np.eye(2), rtol=1e-8, atol=1e-10)
        # dynamics / forgetting / inflation really act: the stationary filter gives a different answer
        if (q, gamma, alpha) != (0.0, 1.0, 0.0):
            stat_means, _ = kalman_oracle(params, xs, ys, obs_noise=0.09, init_cov=2.0, q=0.0, gamma=1.0)
            assert np.abs(np.asarray(means[-1]) - stat_means[-1]).max() > 1e-3


@pytest.mark.parametrize("q,gamma", [(0.0, 1.0), (0.05, 0.9)])
def test_full_rank_lofi_with_per_layer_prior_equals_closed_form_kalman(x64, q, gamma):
    """``init_cov`` as a pytree: ``Υ_0 = diag(1 / init_cov)`` per parameter, the exact KF from that diagonal prior."""
    params = _linear_params(jnp.float64)
    xs, ys = _stream(12, jnp.float64)
    prior = {"b": 0.5, "w": jnp.array([[2.0, 1.0, 3.0], [0.2, 2.0, 1.5]])}  # a scalar leaf and a full-shape leaf
    post = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=8, init_cov=prior, dynamics_cov=q, forgetting=gamma)
    state0 = post.init(params)
    diag = np.concatenate([np.full(2, 0.5), np.asarray(prior["w"]).ravel()])  # ravel_pytree order: b, then w
    np.testing.assert_allclose(state0.prec_diag, 1.0 / diag, rtol=1e-12)
    _, (means, precs) = jax.lax.scan(_scan_body(post), state0, (xs, ys))
    ref_means, ref_covs = kalman_oracle(params, xs, ys, obs_noise=0.09, init_cov=diag, q=q, gamma=gamma)
    np.testing.assert_allclose(means, ref_means, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.linalg.inv(np.asarray(precs)), ref_covs, rtol=1e-8, atol=1e-10)
    # the per-layer prior really acts: the isotropic prior of the same mean variance gives a different answer
    iso_means, _ = kalman_oracle(params, xs, ys, obs_noise=0.09, init_cov=float(diag.mean()), q=q, gamma=gamma)
    assert np.abs(np.asarray(means[2]) - iso_means[2]).max() > 1e-3


def test_per_layer_prior_bad_input_raises():
    params = _linear_params(jnp.float32)
    with pytest.raises(ValueError, match="structure"):
        bk.posteriors.lofi(linear_apply, init_cov={"w": 1.0}).init(params)
    with pytest.raises(ValueError, match=r"\['w'\].*> 0"):
        bk.posteriors.lofi(linear_apply, init_cov={"b": 1.0, "w": jnp.array([[1.0, 0.0, 1.0], [1, 1, 1]])}).init(params)
    with pytest.raises(ValueError, match="inflation"):
        bk.posteriors.lofi(linear_apply, init_cov={"b": 1.0, "w": 1.0}, inflation_factor=0.1)


def test_inflation_options_differ(x64):
    """The options' exact filters (which full-rank LoFi matches above) give pairwise different posteriors."""
    params = _linear_params(jnp.float64)
    xs, ys = _stream(12, jnp.float64)
    x = jnp.array([0.2, -1.0, 0.7], jnp.float64)
    runs = {}
    for inflation in ("none", "simple", "hybrid", "bayesian"):
        means, precs, _ = _traced_lofi_run(params, xs, ys, x, 0.02, 0.95, 0.1, inflation=inflation,
                                           categorical=False)
        runs[inflation] = np.concatenate([np.asarray(means[-1]), np.asarray(precs[-1]).ravel()])
    names = list(runs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert np.abs(runs[a] - runs[b]).max() > 1e-4, (a, b)


def test_full_rank_lofi_equals_extended_kalman_on_softmax_observations(x64):
    """Moment-matched categorical observations (non-diagonal, state-dependent R) with q > 0 and γ < 1."""
    params = _linear_params(jnp.float64)
    xs, _ = _stream(10, jnp.float64)
    ys = jax.nn.one_hot(jnp.arange(10) % 2, 2, dtype=jnp.float64)
    means, precs, _ = _traced_lofi_run(params, xs, ys, xs[0], 0.01, 0.97, 0.0, inflation="none", categorical=True)
    ref_means, ref_covs = kalman_oracle(params, xs, ys, obs_noise=None, init_cov=2.0, q=0.01, gamma=0.97)
    np.testing.assert_allclose(means, ref_means, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.linalg.inv(np.asarray(precs)), ref_covs, rtol=1e-8, atol=1e-10)


def test_predict_step_applies_forgetting_and_dynamics(x64):
    params = _linear_params(jnp.float64)
    xs, ys = _stream(2, jnp.float64)
    post = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=3, dynamics_cov=0.1, forgetting=0.8)
    s = jax.jit(post.update)(post.init(params), xs[0], ys[0])
    s2 = jax.jit(post.predict)(s)
    np.testing.assert_allclose(s2.mean, 0.8 * s.mean)
    cov = np.linalg.inv(np.diag(s.prec_diag) + np.asarray(s.prec_lr @ s.prec_lr.T))
    cov2 = np.linalg.inv(np.diag(s2.prec_diag) + np.asarray(s2.prec_lr @ s2.prec_lr.T))
    np.testing.assert_allclose(cov2, 0.64 * cov + 0.1 * np.eye(8), rtol=1e-10, atol=1e-12)


@pytest.fixture(params=[False, True], ids=["one-gram", "blocked-gram"])
def gram_blocks(request, monkeypatch):
    """``True``: ``linalg.weighted_gram`` takes its blocked path (blocks of 2 rows) even for these tiny ``P``."""
    if request.param:
        monkeypatch.setattr(bk.posteriors.linalg, "GRAM_BLOCK", 2)
        monkeypatch.setattr(bk.posteriors.linalg, "GRAM_MIN_SIZE", 0)
    return request.param


@pytest.mark.parametrize("q", [0.0, 0.01])
@pytest.mark.parametrize("rank", [0, 2])
def test_truncated_update_exact_mean_and_preserved_diagonal(x64, rank, q, gram_blocks):
    """rank < P: the mean is the exact update of the DLR(L) prior; diag of the precision is preserved (eq. 41).

    ``q = 0``: the identity predict, where the update takes WᵀW from its orthogonal columns; ``q > 0``: a predict
    may mix the columns of W, so the update computes the whole Gram; it must be exact for any (υ, W), here random."""
    params = _linear_params(jnp.float64)
    xs, ys = _stream(4, jnp.float64)
    post = bk.posteriors.lofi(linear_apply, Gaussian(0.09), rank=rank, init_cov=2.0, dynamics_cov=q)
    update = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    state = post.init(params)
    for t in range(3):
        state = update(state, xs[t], ys[t])
    update = jax.jit(post.update)
    if q > 0:
        kw, ku = jax.random.split(jax.random.PRNGKey(11))
        state = state._replace(prec_lr=jax.random.normal(kw, (8, rank), jnp.float64),
                               prec_diag=jnp.exp(jax.random.normal(ku, (8,), jnp.float64)))
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
    s = jax.jit(sph.update)(sph.init(params), xs[0], ys[0])
    np.testing.assert_allclose(s.prec_diag, 0.5)


def test_update_keeps_low_rank_columns_orthogonal_in_float32():
    """With the identity predict the update relies on WᵀW = diag(column norms²); rounding must not build up."""
    model = MLP(features=(16,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(4))
    post = bk.posteriors.lofi(model.apply, Gaussian(0.1), rank=5, init_cov=1.0)
    kx, ky = jax.random.split(jax.random.PRNGKey(1))
    xs = jax.random.normal(kx, (400, 4))
    ys = jnp.sin(xs[:, :1] * 2.0) + 0.1 * jax.random.normal(ky, (400, 1))
    state, _ = jax.lax.scan(lambda s, xy: (post.update(s, *xy), None), post.init(params), (xs, ys))
    g = np.asarray(state.prec_lr.T @ state.prec_lr, np.float64)
    d = np.sqrt(np.diag(g))
    assert np.all(d > 0)
    off = np.abs(g / np.outer(d, d) - np.eye(5)).max()
    assert off < 1e-4, off


def test_sampler_covariance_is_the_dlr_inverse(x64, gram_blocks):
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
    root = cov_root(state.prec_diag, state.prec_lr)
    m = np.asarray(root.isd[:, None] * apply_f(root, jnp.eye(8, dtype=jnp.float64)))
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


def test_low_rank_lofi_fits_nonlinear_regression_with_and_without_inflation():
    results = {}
    for inflation in ("none", "bayesian"):
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
        jax.jit(post.update)(state, jnp.ones(3), jnp.ones(3))
    assert bk.posteriors.get("lofi") is bk.posteriors.lofi
