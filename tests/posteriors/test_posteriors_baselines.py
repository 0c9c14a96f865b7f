"""neural_linear (NIG last-layer regression, retrained body) and replay_sgd (FIFO point estimate)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import banditkit as bk
from banditkit.likelihoods import Bernoulli, Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors._replay import buffer_nll, fifo_mask

K = 3  # arms / outputs of the multi-output model
MODEL = MLP(features=(4,), out=K)


def selected(params, x):
    """Multi-output model observed through the chosen arm: x = (context, one_hot(action)) -> (1,)."""
    return (MODEL.apply(params, x[0]) @ x[1])[None]


_PARAMS = MODEL.init(jax.random.PRNGKey(0), jnp.zeros(2))


def _params(dtype=jnp.float32):
    return jax.tree_util.tree_map(lambda a: np.asarray(a).astype(dtype), _PARAMS)


def _stream(n, dtype=jnp.float32):
    kx, kn = jax.random.split(jax.random.PRNGKey(5))
    ctx = jax.random.normal(kx, (n, 2), dtype)
    acts = jnp.arange(n) % K
    ys = jnp.sin(2.0 * ctx[:, 0] + acts) + 0.5 * ctx[:, 1] + 0.1 * jax.random.normal(kn, (n,), dtype)
    return ctx, jax.nn.one_hot(acts, K, dtype=dtype), ys[:, None]


_JITTED: dict = {}


def _scan(post, state, ctx, onehot, ys):
    """predict + update over the stream in one jitted lax.scan (compiled once per posterior and shape)."""
    if id(post) not in _JITTED:

        def go(state, ctx, onehot, ys):
            def step(s, d):
                return post.update(post.predict(s), (d[0], d[1]), d[2]), None

            return jax.lax.scan(step, state, (ctx, onehot, ys))[0]

        _JITTED[id(post)] = (post, jax.jit(go))  # keep post alive so its id is not reused
    return _JITTED[id(post)][1](state, ctx, onehot, ys)


def _design_rows(params, ctx, onehot):
    """Hand-built design rows: ℓ = [head bias (K,), head kernel (F, K) row-major]; arm a sees e_a and φ in column a."""
    feats = np.asarray(jax.vmap(lambda c: MODEL.apply(params, c, return_features=True))(ctx), np.float64)
    oh = np.asarray(onehot, np.float64)
    kernel_rows = (feats[:, :, None] * oh[:, None, :]).reshape(len(feats), -1)
    return np.concatenate([oh, kernel_rows], axis=1)


def nig_oracle(x, y, *, init_cov, a0, b0):
    """Batch NIG posterior (seed 002 eqs. 17–20, μ_0 = 0)."""
    prec = np.eye(x.shape[1]) / init_cov + x.T @ x
    cov = np.linalg.inv(prec)
    mu = cov @ x.T @ y
    a = a0 + len(y) / 2
    b = b0 + 0.5 * (y @ y - mu @ prec @ mu)
    return mu, cov, a, b


# ---------------------------------------------------------------------------------------------------------------
# neural_linear


def test_neural_linear_equals_closed_form_nig_before_retraining(x64):
    params = _params(jnp.float64)
    ctx, onehot, ys = _stream(14, jnp.float64)
    post = bk.posteriors.neural_linear(selected, Gaussian(1.0), train_every=1000, init_cov=4.0, a0=6.0, b0=6.0,
                                       example_x=(ctx[0], onehot[0]), buffer_size=8)
    state = _scan(post, post.init(params), ctx, onehot, ys)
    x = _design_rows(params, ctx, onehot)
    mu, cov, a, b = nig_oracle(x, np.asarray(ys[:, 0]), init_cov=4.0, a0=6.0, b0=6.0)
    np.testing.assert_allclose(state.mean_last, mu, rtol=1e-9, atol=1e-11)
    sq = np.asarray(state.cov_sqrt)
    np.testing.assert_allclose(sq @ sq.T, cov, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose([state.a, state.b], [a, b], rtol=1e-10)
    # the body never moved (no retraining yet), and mean() puts μ in the head
    np.testing.assert_allclose(state.hidden, bk.posteriors.base.ParamSpace(params, "head").split(params)[0])
    head = post.mean(state)["params"]["head"]
    np.testing.assert_allclose(head["bias"], mu[:K], atol=1e-11)
    # Student-t predictive moments: mean xμ, covariance b/(a−1) (x Σ xᵀ + 1)
    xq = (jnp.array([0.3, -0.7], jnp.float64), jax.nn.one_hot(2, K, dtype=jnp.float64))
    row = _design_rows(params, xq[0][None], xq[1][None])[0]
    m, c = jax.jit(post.predictive)(state, xq)
    np.testing.assert_allclose(m, [row @ mu], rtol=1e-9)
    np.testing.assert_allclose(c, [[b / (a - 1) * (row @ cov @ row + 1.0)]], rtol=1e-9)
    # sample: σ² ~ IG(a, b) then ℓ ~ N(μ, σ² Σ): mean μ, covariance b/(a−1) Σ; body at its point estimate
    draws = jax.jit(jax.vmap(lambda k: post.sample(k, state)))(jax.random.split(jax.random.PRNGKey(1), 20000))
    np.testing.assert_array_equal(draws["params"]["dense_0"]["kernel"][0], params["params"]["dense_0"]["kernel"])
    ell = np.concatenate([draws["params"]["head"]["bias"], draws["params"]["head"]["kernel"].reshape(20000, -1)], 1)
    target = b / (a - 1) * cov
    np.testing.assert_allclose(ell.mean(0), mu, atol=5 * np.sqrt(np.diag(target).max() / 20000))
    np.testing.assert_allclose(np.cov(ell.T), target, atol=0.06 * np.abs(target).max())


def test_neural_linear_retraining_reduces_buffer_loss_and_refits_from_buffer(x64):
    params = _params(jnp.float64)
    ctx, onehot, ys = _stream(24, jnp.float64)
    post = bk.posteriors.neural_linear(selected, Gaussian(0.1), train_every=24, n_train_steps=150, buffer_size=16,
                                       optimizer=optax.adam(2e-2), example_x=(ctx[0], onehot[0]))
    update = jax.jit(post.update)
    state = post.init(params)
    for t in range(23):
        state = update(state, (ctx[t], onehot[t]), ys[t])
    before = state
    space = bk.posteriors.base.ParamSpace(params, "head")
    np.testing.assert_allclose(before.hidden, space.split(params)[0])  # no retraining during the first 23 steps
    state = update(before, (ctx[23], onehot[23]), ys[23])
    assert int(state.step) == 24 and not np.allclose(state.hidden, before.hidden)
    buf = state.buffer
    w = jnp.ones(16, jnp.float64)
    loss0 = buffer_nll(selected, Gaussian(0.1), params, buf.x, buf.y, w)
    loss_sgd = buffer_nll(selected, Gaussian(0.1), space.merge(state.hidden, state.head_sgd), buf.x, buf.y, w)
    loss_nl = buffer_nll(selected, Gaussian(0.1), post.mean(state), buf.x, buf.y, w)
    assert float(loss_sgd) < 0.5 * float(loss0) and float(loss_nl) < 0.5 * float(loss0)
    # limited memory: the statistics are the closed-form NIG of the 16 buffered observations, new features
    new_params = space.merge(state.hidden, state.head_sgd)
    x = _design_rows(new_params, buf.x[0], buf.x[1])
    mu, cov, a, b = nig_oracle(x, np.asarray(buf.y[:, 0]), init_cov=4.0, a0=6.0, b0=6.0)
    np.testing.assert_allclose(state.mean_last, mu, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(state.cov_sqrt) @ np.asarray(state.cov_sqrt).T, cov, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose([state.a, state.b], [a, b], rtol=1e-9)


@pytest.mark.parametrize("obs_noise", [0.1, 1.0, 5.0])
def test_neural_linear_body_is_fit_by_least_squares_whatever_obs_noise(x64, obs_noise):
    """One plain-SGD retraining step moves (body, head) by −lr ∇ ½·mean (y − f)², independent of ``obs_noise``:
    the NIG model learns σ² itself (a Gaussian(0.1) NLL would make the step 100× larger)."""
    params = _params(jnp.float64)
    ctx, onehot, ys = _stream(8, jnp.float64)
    lr = 0.05
    post = bk.posteriors.neural_linear(selected, Gaussian(obs_noise), train_every=8, n_train_steps=1, buffer_size=8,
                                       optimizer=optax.sgd(lr), example_x=(ctx[0], onehot[0]))
    state = post.init(params)
    for t in range(8):
        state = post.update(state, (ctx[t], onehot[t]), ys[t])
    space = bk.posteriors.base.ParamSpace(params, "head")

    def mse(hl):
        f = jax.vmap(lambda c, o: selected(space.merge(*hl), (c, o)))(ctx, onehot)
        return 0.5 * jnp.mean(jnp.sum((ys - f) ** 2, axis=-1))

    h0, l0 = space.split(params)
    gh, gl = jax.grad(mse)((h0, l0))
    np.testing.assert_allclose(state.hidden, h0 - lr * gh, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(state.head_sgd, l0 - lr * gl, rtol=1e-10, atol=1e-12)


def test_neural_linear_stays_finite_with_large_rewards_and_sgd_momentum():
    """Seed 002's showdown settings on Mushroom-scale rewards (±35): sgd(0.05, momentum 0.9), 100 steps per
    retraining.  With the obs-noise-scaled NLL the body went NaN at the first retraining."""
    params = _params()
    ctx, onehot, _ = _stream(200)
    ys = jnp.where(ctx[:, :1] > 0, 5.0, -35.0)
    post = bk.posteriors.neural_linear(selected, Gaussian(0.1), train_every=100, n_train_steps=100, buffer_size=20,
                                       optimizer=optax.sgd(0.05, momentum=0.9), example_x=(ctx[0], onehot[0]))
    state = _scan(post, post.init(params), ctx, onehot, ys)
    assert int(state.step) == 200
    for leaf in jax.tree_util.tree_leaves(state):
        if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating):
            assert bool(jnp.all(jnp.isfinite(leaf)))


@pytest.mark.parametrize("lr, diverges", [(50.0, True), (1e-3, False)])
def test_neural_linear_discards_a_diverging_retraining(x64, lr, diverges):
    """Plain SGD on an outlier context (|x| ≈ 56, as in Shuttle) blows the body up; that retraining is discarded:
    body, SGD head and optimiser state keep their values, ``rejected`` counts it, and the posterior is the exact
    NIG of the buffer with the previous features.  A tame learning rate is not rejected (the guard is not a no-op
    in either direction)."""
    params = _params(jnp.float64)
    ctx, onehot, ys = _stream(10, jnp.float64)
    ctx = ctx.at[3].set(jnp.array([56.0, -40.0]))
    post = bk.posteriors.neural_linear(selected, Gaussian(0.1), train_every=10, n_train_steps=30, buffer_size=10,
                                       optimizer=optax.sgd(lr, momentum=0.9), example_x=(ctx[0], onehot[0]))
    state = _scan(post, post.init(params), ctx, onehot, ys)
    h0, l0 = bk.posteriors.base.ParamSpace(params, "head").split(params)
    assert int(state.step) == 10 and int(state.rejected) == int(diverges)
    for leaf in jax.tree_util.tree_leaves(state):
        assert bool(jnp.all(jnp.isfinite(leaf)))
    if diverges:
        np.testing.assert_array_equal(state.hidden, h0)
        np.testing.assert_array_equal(state.head_sgd, l0)
        kept = post.init(params).opt_state
        for a, b in zip(jax.tree_util.tree_leaves(state.opt_state), jax.tree_util.tree_leaves(kept), strict=True):
            np.testing.assert_array_equal(a, b)
        features = params
    else:
        assert not np.allclose(state.hidden, h0)
        features = bk.posteriors.base.ParamSpace(params, "head").merge(state.hidden, state.head_sgd)
    x = _design_rows(features, ctx, onehot)
    mu, cov, a, b = nig_oracle(x, np.asarray(ys[:, 0]), init_cov=4.0, a0=6.0, b0=6.0)
    np.testing.assert_allclose(state.mean_last, mu, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(np.asarray(state.cov_sqrt) @ np.asarray(state.cov_sqrt).T, cov, rtol=1e-7, atol=1e-10)
    np.testing.assert_allclose([state.a, state.b], [a, b], rtol=1e-8)


def _shove(size: float) -> optax.GradientTransformation:
    """An 'optimiser' that moves every weight by ``+size`` per step: finite, and a far worse fit."""
    return optax.GradientTransformation(lambda params: optax.EmptyState(),
                                        lambda g, s, p=None: (jax.tree_util.tree_map(lambda v: jnp.full_like(v, size),
                                                                                     g), s))


@pytest.mark.parametrize("batch_size", [None, 4])
@pytest.mark.parametrize("ratio, rejected", [(2.0, True), (float("inf"), False)])
def test_neural_linear_discards_a_finite_runaway(x64, ratio, rejected, batch_size):
    """Weights that stay finite but fit the buffer far worse (Shuttle: |h| ≈ 4e15 after one retraining, the
    regression overflowing 60 updates later) are a diverged retraining too: discarded under the default
    ``divergence_ratio``, whether the check batch is the whole buffer or one minibatch; ``inf`` keeps every finite
    retraining (the check is what rejects it)."""
    params = _params(jnp.float64)
    ctx, onehot, ys = _stream(10, jnp.float64)
    post = bk.posteriors.neural_linear(selected, train_every=10, n_train_steps=5, buffer_size=10, batch_size=batch_size,
                                       optimizer=_shove(1e3), divergence_ratio=ratio, example_x=(ctx[0], onehot[0]))
    state = _scan(post, post.init(params), ctx, onehot, ys)
    h0, _ = bk.posteriors.base.ParamSpace(params, "head").split(params)
    assert int(state.rejected) == int(rejected)
    if rejected:
        np.testing.assert_array_equal(state.hidden, h0)
    else:
        np.testing.assert_allclose(state.hidden, h0 + 5e3)


def test_neural_linear_divergence_ratio_is_checked():
    with pytest.raises(ValueError, match="divergence_ratio must be a number > 1"):
        bk.posteriors.neural_linear(selected, divergence_ratio=1.0)
    assert "divergence_ratio" not in bk.posteriors.neural_linear(selected).hyper  # old checkpoints still load
    assert bk.posteriors.neural_linear(selected, divergence_ratio=10).hyper["divergence_ratio"] == 10.0


@pytest.mark.parametrize("n, warns", [(7, False), (8, True)])
def test_neural_linear_diagnostics_counts_discarded_retrainings(n, warns):
    """The ``diagnostics`` hook reports ``[rejected, retrainings]`` of one state, and a warning only from 4
    retrainings on when more than half were discarded; ``discarded_retrainings`` gives the same counts."""
    ctx, onehot, ys = _stream(n)
    post = bk.posteriors.neural_linear(selected, train_every=2, n_train_steps=2, buffer_size=8, optimizer=_shove(1e3),
                                       example_x=(ctx[0], onehot[0]))
    state = _scan(post, post.init(_params()), ctx, onehot, ys)
    report = post.diagnostics(state)
    assert report["discarded_retrainings"] == [n // 2, n // 2]
    assert ("warning" in report) == warns
    if warns:
        assert f"discarded in most retrainings ({n // 2} of {n // 2})" in report["warning"]
    from banditkit.posteriors.neural_linear import discarded_retrainings

    assert [int(c) for c in discarded_retrainings(post, state)] == report["discarded_retrainings"]


def test_neural_linear_vmaps_over_seeds_with_retraining():
    params = _params()
    ctx, onehot, ys = _stream(12)
    post = bk.posteriors.neural_linear(selected, train_every=5, n_train_steps=5, buffer_size=8, batch_size=4,
                                       example_x=(ctx[0], onehot[0]))
    states = jax.vmap(lambda k: post.init(params)._replace(key=k))(jax.random.split(jax.random.PRNGKey(0), 2))
    step = lambda st, d: (post.update(st, (d[0], d[1]), d[2]), None)
    out = jax.jit(jax.vmap(lambda s: jax.lax.scan(step, s, (ctx, onehot, ys))[0]))(states)
    np.testing.assert_array_equal(out.step, [12, 12])
    h0 = bk.posteriors.base.ParamSpace(params, "head").split(params)[0]
    assert not np.allclose(out.hidden[0], h0) and not np.allclose(out.hidden[1], h0)  # both seeds retrained
    assert not np.allclose(out.hidden[0], out.hidden[1])  # different minibatch keys → different bodies
    assert bool(jnp.all(jnp.isfinite(out.mean_last))) and bool(jnp.all(out.b >= 6.0))


# ---------------------------------------------------------------------------------------------------------------
# replay_sgd


def test_replay_sgd_fifo_buffer_wraps():
    params = _params()
    ctx, onehot, ys = _stream(6)
    post = bk.posteriors.replay_sgd(selected, buffer_size=4, n_inner=1)
    s = post.init(params, example_x=(ctx[0], onehot[0]))
    s3 = _scan(post, s, ctx[:3], onehot[:3], ys[:3])
    np.testing.assert_array_equal(s3.buffer.y[:3, 0], ys[:3, 0])
    s6 = _scan(post, s3, ctx[3:], onehot[3:], ys[3:])
    assert int(s6.buffer.count) == 6
    order = [4, 5, 2, 3]  # slot i holds the newest observation with index ≡ i (mod 4)
    np.testing.assert_array_equal(s6.buffer.y[:, 0], ys[jnp.array(order), 0])
    np.testing.assert_array_equal(s6.buffer.x[0], ctx[jnp.array(order)])
    np.testing.assert_array_equal(s6.buffer.x[1], onehot[jnp.array(order)])
    np.testing.assert_array_equal(fifo_mask(s3.buffer), [1, 1, 1, 0])
    np.testing.assert_array_equal(fifo_mask(s6.buffer), [1, 1, 1, 1])


@pytest.mark.parametrize("batch_size", [None, 4])
def test_replay_sgd_reduces_buffer_loss(batch_size):
    params = _params()
    ctx, onehot, ys = _stream(16)
    lik = Gaussian(0.1)
    post = bk.posteriors.replay_sgd(selected, lik, buffer_size=16, n_inner=20, optimizer=optax.adam(1e-2),
                                    batch_size=batch_size, example_x=(ctx[0], onehot[0]))
    state = _scan(post, post.init(params), ctx, onehot, ys)
    w = jnp.ones(16)
    loss0 = buffer_nll(selected, lik, params, state.buffer.x, state.buffer.y, w)
    loss1 = buffer_nll(selected, lik, post.mean(state), state.buffer.x, state.buffer.y, w)
    assert float(loss1) < 0.5 * float(loss0), (float(loss0), float(loss1))
    # point estimate: sample == mean; predictive = plug-in mean with the aleatoric covariance only
    draw = post.sample(jax.random.PRNGKey(3), state)
    same = jax.tree_util.tree_map(lambda a, b: bool(jnp.array_equal(a, b)), draw, post.mean(state))
    assert all(jax.tree_util.tree_leaves(same))
    m, c = post.predictive(state, (ctx[0], onehot[0]))
    np.testing.assert_allclose(m, selected(post.mean(state), (ctx[0], onehot[0])), rtol=1e-6)
    np.testing.assert_allclose(c, [[0.1]])


def test_bad_arguments_raise():
    params = _params()
    x0 = (jnp.zeros(2), jnp.zeros(K))
    with pytest.raises(ValueError, match="example_x"):
        bk.posteriors.replay_sgd(selected).init(params)
    with pytest.raises(ValueError, match="example_x"):
        bk.posteriors.neural_linear(selected).init(params)
    with pytest.raises(TypeError, match="Gaussian"):
        bk.posteriors.neural_linear(selected, Bernoulli())
    with pytest.raises(ValueError, match="buffer_size"):
        bk.posteriors.replay_sgd(selected, buffer_size=0)
    with pytest.raises(ValueError, match="train_every"):
        bk.posteriors.neural_linear(selected, train_every=0)
    with pytest.raises(ValueError, match="last_layer"):
        bk.posteriors.neural_linear(selected, last_layer="nope").init(params, example_x=x0)
    post = bk.posteriors.replay_sgd(selected, example_x=x0)
    with pytest.raises(ValueError, match="shape"):
        post.update(post.init(params), x0, jnp.ones(2))
    assert bk.posteriors.get("neural_linear") is bk.posteriors.neural_linear
    assert bk.posteriors.get("replay_sgd") is bk.posteriors.replay_sgd


# ---------------------------------------------------------------------------------------------------------------
# kernels the buffer backends share (banditkit.posteriors._replay, base.flat_obs)


@pytest.mark.parametrize("name", ["last_layer_laplace", "vbll", "online_vbll"])
@pytest.mark.parametrize("bad, what", [(dict(learning_rate=0.0), "learning_rate must be > 0"),
                                       (dict(init_cov_last=-1.0), "init_cov_last must be > 0"),
                                       (dict(n_inner=-1), "n_inner must be an integer >= 0"),
                                       (dict(buffer_size=0), "buffer_size must be an integer >= 1")])
def test_optax_buffer_backends_answer_bad_arguments_alike(name, bad, what):
    """One check (``_replay.check_fit_args``): the same bad value gets the same message from every such backend."""
    with pytest.raises(ValueError, match=f"^{name}: {what}, got"):
        bk.posteriors.get(name)(selected, **bad)


def test_check_fit_args_returns_the_given_optimizer():
    from banditkit.posteriors import _replay

    opt = optax.sgd(0.1)
    assert _replay.check_fit_args("x", 4, 1, 1e-3, opt, init_cov_last=1.0) is opt
    default = _replay.check_fit_args("x", 4, 1, 1e-3, None)
    theta = jnp.ones(3)
    step, _ = default.update(jnp.ones(3), default.init(theta), theta)  # adamw: first step −lr·(sign(g) + wd·θ)
    np.testing.assert_allclose(step, -1e-3 * (1.0 + 1e-4) * np.ones(3), rtol=1e-5)


def test_sample_last_layer_keeps_the_hidden_block_and_draws_the_factor():
    from banditkit.posteriors._replay import sample_last_layer
    from banditkit.posteriors.base import ParamSpace

    params = _params()
    space = ParamSpace.of(params, "head")
    theta = space.ravel(params)
    _, ell = space.split(params)
    d = space.size_last
    zero = sample_last_layer(jax.random.PRNGKey(0), space, theta, jnp.zeros((d, d)))
    for a, b in zip(jax.tree_util.tree_leaves(zero), jax.tree_util.tree_leaves(params), strict=True):
        np.testing.assert_array_equal(a, b)  # F = 0: the point estimate itself, bit for bit
    f = jnp.tril(jnp.full((d, d), 0.3)) + jnp.eye(d)
    n = 8000
    draws = jax.jit(jax.vmap(lambda k: space.split(sample_last_layer(k, space, theta, f))))(
        jax.random.split(jax.random.PRNGKey(1), n))
    h_draws, ell_draws = np.asarray(draws[0]), np.asarray(draws[1], np.float64)
    np.testing.assert_array_equal(h_draws, np.broadcast_to(np.asarray(space.split(params)[0]), h_draws.shape))
    cov = np.asarray(f @ f.T, np.float64)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(ell_draws.mean(0) - np.asarray(ell)) < 5 * sd / np.sqrt(n))
    emp = np.cov(ell_draws.T)
    # standard error of a sample covariance entry: sqrt((Σ_ij² + Σ_ii Σ_jj) / n)
    assert np.all(np.abs(emp - cov) < 5 * np.sqrt((cov**2 + np.outer(sd**2, sd**2)) / n))


def test_flat_obs_is_the_model_at_the_unravelled_vector():
    from banditkit.posteriors.base import ParamSpace, flat_obs

    params = _params()
    space = ParamSpace.of(params)
    x = (jnp.array([0.3, -1.2]), jax.nn.one_hot(1, K))
    np.testing.assert_array_equal(flat_obs(selected, space, x)(space.ravel(params)), selected(params, x))
