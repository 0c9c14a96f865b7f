"""Replay-buffer last-layer baselines: vbll, online_vbll, last_layer_laplace.

Each learns a small regression stream under jit + scan + vmap (over seeds), shrinks its predictive variance near
the data while keeping it larger in between and far away, and the Laplace covariance matches the closed-form GGN
posterior of exactly the buffer's points (FIFO)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.likelihoods import Bernoulli, Gaussian
from banditkit.models import MLP

BACKENDS = ["vbll", "online_vbll", "last_layer_laplace"]


def _toy(n=24):
    """Two clusters around ±0.5 with a gap at 0 (the in-between toy, seed 003 §11.1, scaled down)."""
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    xs = (jnp.sign(jax.random.normal(k1, (n,))) * 0.5 + 0.15 * jax.random.uniform(k2, (n,), minval=-1, maxval=1))
    xs = xs[:, None]
    ys = jnp.sin(4 * xs) + 0.05 * jax.random.normal(k3, (n, 1))
    return xs, ys


@pytest.mark.parametrize("name", BACKENDS)
def test_learns_and_in_between_uncertainty(name):
    model = MLP(features=(8, 8), out=1)
    xs, ys = _toy(20)
    post = bk.posteriors.get(name)(model.apply, Gaussian(0.01), example_x=xs[0], buffer_size=32, n_inner=10,
                                   learning_rate=2e-2)
    params = jax.vmap(lambda k: model.init(k, xs[0]))(jax.random.split(jax.random.PRNGKey(1), 2))
    s0 = jax.vmap(post.init)(params)

    def run(s):
        return jax.lax.scan(lambda c, xy: (post.update(c, *xy), None), s, (xs, ys))[0]

    s = jax.jit(jax.vmap(run))(s0)
    for leaf in jax.tree_util.tree_leaves(s):
        assert np.all(np.isfinite(np.asarray(leaf)))
    probe = jnp.array([[-2.0], [-0.5], [0.0], [0.5], [2.0]])
    # one compiled predictive over a batch of inputs for both seeds and states (eager vmaps compile op by op)
    predict = jax.jit(jax.vmap(post.predictive, in_axes=(None, 0)))
    for seed in range(2):
        si = jax.tree_util.tree_map(lambda a, seed=seed: a[seed], s)
        s0i = jax.tree_util.tree_map(lambda a, seed=seed: a[seed], s0)
        mse = lambda st: float(jnp.mean((predict(st, xs)[0] - ys) ** 2))  # noqa: E731
        assert mse(si) < 0.2 * mse(s0i), name
        # epistemic part: predictive variance minus the (learned or fixed) noise variance
        noise = lambda st: float(jnp.exp(2 * st.params["noise_logdiag"][0])) if name != "last_layer_laplace" else 0.01  # noqa: E731
        var = np.asarray(predict(si, probe)[1][:, 0, 0]) - noise(si)
        var0 = np.asarray(predict(s0i, probe)[1][:, 0, 0]) - noise(s0i)
        near = max(var[1], var[3])
        assert 0 < near < 0.1 * min(var0[1], var0[3]), (name, var, var0)  # shrinks near the data
        assert var[2] > near and min(var[0], var[4]) > 5 * near, (name, var)  # larger in between / far
        draw = post.sample(jax.random.PRNGKey(2), si)
        assert jax.tree_util.tree_structure(draw) == jax.tree_util.tree_structure(post.mean(si))
        hid = draw["params"]["dense_0"]["kernel"]
        np.testing.assert_array_equal(hid, post.mean(si)["params"]["dense_0"]["kernel"])  # last layer only
        assert not np.allclose(draw["params"]["head"]["kernel"], post.mean(si)["params"]["head"]["kernel"])


def test_laplace_covariance_is_ggn_posterior_of_the_buffer(x64):
    """With n_inner = 0 the network stays put; Σ_ℓ must be (I/c + Σ_{i∈buffer} ΦᵢᵀΦᵢ/r)⁻¹ over the LAST B points."""
    model = MLP(features=(3,), out=1)
    xs = jax.random.normal(jax.random.PRNGKey(0), (7, 2), jnp.float64)
    ys = xs[:, :1] ** 2
    params = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), model.init(jax.random.PRNGKey(1), xs[0]))
    r, c, b = 0.3, 2.0, 4
    post = bk.posteriors.last_layer_laplace(model.apply, Gaussian(r), buffer_size=b, n_inner=0, init_cov_last=c,
                                            example_x=xs[0])
    s = post.init(params)
    s = jax.jit(lambda s: jax.lax.scan(lambda c, xy: (post.update(c, *xy), None), s, (xs, ys))[0])(s)
    feats = jax.vmap(lambda x: model.apply(params, x, return_features=True))(xs[-b:])
    phi = np.concatenate([np.asarray(feats), np.ones((b, 1))], axis=1)  # ravel order of "head": bias, kernel
    phi = np.concatenate([phi[:, -1:], phi[:, :-1]], axis=1)
    want = np.linalg.inv(np.eye(phi.shape[1]) / c + phi.T @ phi / r)
    np.testing.assert_allclose(s.cov_last, want, rtol=1e-10)
    m, v = post.predictive(s, xs[0])
    phi0 = np.concatenate([[1.0], np.asarray(model.apply(params, xs[0], return_features=True))])
    np.testing.assert_allclose(v[0, 0], phi0 @ want @ phi0 + r, rtol=1e-10)
    np.testing.assert_allclose(m, model.apply(params, xs[0]), rtol=1e-12)
    # Thompson draws: the last layer ~ N(ℓ*, Σ_ℓ) (the draw factor's L Lᵀ = Σ_ℓ), the hidden layers at θ*
    space = bk.posteriors.base.ParamSpace(params, "head")
    draws = jax.vmap(lambda k: space.split(post.sample(k, s))[1])(jax.random.split(jax.random.PRNGKey(3), 20000))
    np.testing.assert_allclose(np.cov(np.asarray(draws).T), want, atol=0.03 * np.max(np.abs(want)))
    np.testing.assert_allclose(np.mean(np.asarray(draws), axis=0), space.split(params)[1],
                               atol=4 * np.sqrt(np.max(np.diag(want)) / 20000))  # 4 standard errors


def test_laplace_classification_runs():
    model = MLP(features=(4,), out=3)
    xs = jax.random.normal(jax.random.PRNGKey(0), (6, 2))
    ys = jax.nn.one_hot(jnp.arange(6) % 3, 3)
    post = bk.posteriors.last_layer_laplace(model.apply, bk.likelihoods.Categorical(1e-4), n_inner=3,
                                            learning_rate=1e-2)
    s = post.init(model.init(jax.random.PRNGKey(1), xs[0]), xs[0])
    s = jax.jit(lambda s: jax.lax.scan(lambda c, xy: (post.update(c, *xy), None), s, (xs, ys))[0])(s)
    m, v = post.predictive(s, xs[0])
    assert m.shape == (3,) and v.shape == (3, 3) and np.all(np.isfinite(np.asarray(v)))
    np.testing.assert_allclose(float(jnp.sum(m)), 1.0, rtol=1e-5)


def test_bad_arguments():
    model = MLP(features=(4,), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(2))
    with pytest.raises(ValueError, match="Gaussian"):
        bk.posteriors.vbll(model.apply, Bernoulli())
    with pytest.raises(ValueError, match="example_x"):
        bk.posteriors.online_vbll(model.apply).init(params)
    with pytest.raises(ValueError, match="buffer_size"):
        bk.posteriors.last_layer_laplace(model.apply, buffer_size=0)
    with pytest.raises(ValueError, match="last_layer"):
        bk.posteriors.vbll(model.apply, last_layer="nope", example_x=jnp.zeros(2)).init(params)
