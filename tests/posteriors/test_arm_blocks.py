"""``arms=K``: a K-output head's covariance kept as K per-arm blocks (``linear``, ``hilofi``; float64 exact oracles).

Oracles: per arm, the closed-form Normal-Inverse-Gamma batch posterior over the rounds that pulled that arm (seed 002
eqs. 17–20), with the design ``[1, x]`` written by hand; and the same backend with ``arms=None``, whose head
covariance stays block-diagonal under one-arm observations, so the blockwise filter must reproduce it exactly
(known noise, or a shared noise variance; HiLoFi's square-root and dense last layer), with forgetting and drift too.
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import banditkit as bk
from banditkit.agents import make_agent
from banditkit.agents.bandit import selected_output
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP
from banditkit.posteriors.arms import arm_blocks
from banditkit.posteriors.kalman_last_layer import current_forgetting

K, D, T = 3, 4, 30
A0, B0, V0 = 3.0, 2.0, 0.8


def _setup(seed=0):
    model = MLP(features=(), out=K)
    rng = np.random.default_rng(seed)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(D))
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(rng.normal(size=v.shape)), params)
    xs = rng.normal(size=(T, D))
    acts = rng.integers(0, K, T)
    ys = rng.normal(size=(T, 1)) + acts[:, None]
    return model, params, xs, acts, ys


def _run(post, params, xs, acts, ys, predict=True):
    """Filter the rounds (update, then the time update); returns the final state."""

    def step(s, xay):
        x, a, y = xay
        s = post.update(s, (x, jax.nn.one_hot(a, K, dtype=x.dtype)), y)
        return (post.predict(s) if predict else s), None

    return jax.jit(lambda p: jax.lax.scan(step, post.init(p), (xs, acts, ys))[0])(params)


def _assert_blocks_of(blocks_cov, dense_cov, idx):
    """Each ``blocks_cov[k]`` is the dense covariance's arm-``k`` block, and the dense one has nothing off them."""
    dense_cov = np.asarray(dense_cov)
    for k in range(K):
        np.testing.assert_allclose(blocks_cov[k], dense_cov[np.ix_(idx[k], idx[k])], atol=1e-10)
        others = np.setdiff1d(np.arange(dense_cov.shape[0]), idx[k])
        assert np.abs(dense_cov[np.ix_(idx[k], others)]).max() < 1e-12  # why the blocks suffice


def _assert_same_predictive(post_a, state_a, post_b, state_b, rtol=1e-9):
    x_star = np.random.default_rng(2).normal(size=D)
    for k in range(K):
        obs = (x_star, jax.nn.one_hot(k, K, dtype=x_star.dtype))
        for u, v in zip(post_a.predictive(state_a, obs), post_b.predictive(state_b, obs), strict=True):
            np.testing.assert_allclose(u, v, rtol=rtol, atol=1e-12)


def test_arm_blocks_maps_each_arm_to_its_slice_of_every_leaf():
    params = {"b": np.zeros(3), "w": np.zeros((2, 3))}  # ravel order: b (3,), then w row-major (2, 3)
    np.testing.assert_array_equal(arm_blocks(params, 3), [[0, 3, 6], [1, 4, 7], [2, 5, 8]])


def test_per_arm_noise_equals_closed_form_per_arm_nig(x64):
    model, params, xs, acts, ys = _setup()
    post = bk.posteriors.linear(selected_output(model.apply), init_cov=V0, noise="nig", a0=A0, b0=B0, arms=K,
                                shared_noise=False)
    state = _run(post, params, xs, acts, ys)
    idx = arm_blocks(params, K)
    theta0 = np.asarray(jax.flatten_util.ravel_pytree(params)[0])
    x_star = np.random.default_rng(9).normal(size=D)
    for k in range(K):
        sel = acts == k
        x_mat = np.c_[np.ones(sel.sum()), xs[sel]]  # arm k's parameters: [bias_k, kernel[:, k]]
        y = ys[sel, 0]
        t0, s0_inv = theta0[idx[k]], np.eye(D + 1) / V0
        sig_n = np.linalg.inv(s0_inv + x_mat.T @ x_mat)
        mu_n = sig_n @ (s0_inv @ t0 + x_mat.T @ y)
        a_n = A0 + sel.sum() / 2
        b_n = B0 + 0.5 * (y @ y + t0 @ s0_inv @ t0 - mu_n @ np.linalg.inv(sig_n) @ mu_n)
        np.testing.assert_allclose(np.asarray(state.mean)[idx[k]], mu_n, atol=1e-10)
        np.testing.assert_allclose(state.cov[k], sig_n, atol=1e-10)
        np.testing.assert_allclose(state.a[k], a_n, atol=1e-12)
        np.testing.assert_allclose(state.b[k], b_n, rtol=1e-10)
        m, c = post.predictive(state, (x_star, jax.nn.one_hot(k, K, dtype=x_star.dtype)))
        h = np.r_[1.0, x_star]
        np.testing.assert_allclose(m, [h @ mu_n], atol=1e-10)
        np.testing.assert_allclose(c, [[b_n / (a_n - 1) * (h @ sig_n @ h + 1.0)]], rtol=1e-10)
    # the arms really have their own noise variances (the data's spread differs by arm only through chance here)
    assert len(set(np.round(np.asarray(state.b), 6))) == K


@pytest.mark.parametrize("noise", ["known", "nig"])
@pytest.mark.parametrize("q,g", [(0.0, 1.0), (0.05, 0.9)])
def test_blocks_equal_the_joint_model(x64, noise, q, g):
    """Known noise or a shared σ²: the blockwise filter is the joint filter, computed K blocks at a time."""
    model, params, xs, acts, ys = _setup(1)
    f = selected_output(model.apply)
    kw = dict(init_cov=V0, noise=noise, a0=A0, b0=B0, dynamics_cov=q, forgetting=g)
    blocks = bk.posteriors.linear(f, Gaussian(0.3), arms=K, **kw)
    joint = bk.posteriors.linear(f, Gaussian(0.3), **kw)
    sb, sj = _run(blocks, params, xs, acts, ys), _run(joint, params, xs, acts, ys)
    np.testing.assert_allclose(sb.mean, sj.mean, atol=1e-10)
    _assert_blocks_of(sb.cov, sj.cov, arm_blocks(params, K))
    np.testing.assert_allclose([sb.a, sb.b], [sj.a, sj.b], rtol=1e-10)
    _assert_same_predictive(blocks, sb, joint, sj, rtol=1e-10)


@pytest.mark.parametrize("shared", [True, False])
def test_thompson_draws_have_the_posterior_covariance(x64, shared):
    model, params, xs, acts, ys = _setup(3)
    post = bk.posteriors.linear(selected_output(model.apply), init_cov=V0, noise="nig", a0=A0, b0=B0, arms=K,
                                shared_noise=shared)
    state = _run(post, params, xs, acts, ys)
    keys = jax.random.split(jax.random.PRNGKey(0), 40000)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: jax.flatten_util.ravel_pytree(post.sample(k, state))[0]))(keys))
    idx = arm_blocks(params, K)
    emp = np.cov(draws.T)
    for k in range(K):
        a, b = (state.a, state.b) if shared else (state.a[k], state.b[k])
        want = float(b / (a - 1)) * np.asarray(state.cov[k])
        np.testing.assert_allclose(draws[:, idx[k]].mean(0), np.asarray(state.mean)[idx[k]],
                                   atol=0.03 * np.sqrt(np.diag(want)).max())
        np.testing.assert_allclose(emp[np.ix_(idx[k], idx[k])], want, atol=0.05 * np.abs(want).max())
        cross = emp[np.ix_(idx[k], np.setdiff1d(np.arange(emp.shape[0]), idx[k]))]
        assert np.abs(cross).max() < 0.05 * np.abs(want).max()  # independent given σ² (uncorrelated either way)


def test_an_observation_with_a_zero_design_changes_nothing(x64):
    post = bk.posteriors.linear(lambda w, x: jnp.sum(x[0] @ w * x[1], keepdims=True), noise="nig", arms=K,
                                shared_noise=False)
    state = post.init(jnp.ones((D, K)))
    new = post.update(state, (jnp.zeros(D), jax.nn.one_hot(1, K)), jnp.array([5.0]))
    for u, v in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(state), strict=True):
        np.testing.assert_array_equal(u, v)
    new = post.update(state, (jnp.ones(D), jax.nn.one_hot(1, K)), jnp.array([5.0]))
    np.testing.assert_array_equal(new.a, [6.0, 6.5, 6.0])  # only the pulled arm's noise variance learns


def test_bad_arms_input_is_explained():
    f = selected_output(MLP(features=(), out=K).apply)
    for bad in (0, -2, 1.5, True, "3"):
        with pytest.raises(ValueError, match="arms must be a positive int"):
            bk.posteriors.linear(f, arms=bad)
    hidden = MLP(features=(5,), out=K)
    post = bk.posteriors.linear(selected_output(hidden.apply), arms=K)
    with pytest.raises(ValueError, match=r"dense_0.*last axis 3.*arms=None"):
        post.init(hidden.init(jax.random.PRNGKey(0), jnp.zeros(D)))
    full = MLP(features=(), out=K)
    post = bk.posteriors.linear(full.apply, arms=K)  # all K outputs at once: not one arm per observation
    state = post.init(full.init(jax.random.PRNGKey(0), jnp.zeros(D)))
    with pytest.raises(ValueError, match="one arm at a time"):
        post.update(state, jnp.ones(D), jnp.ones(K))


def _env(k=K):
    return SimpleNamespace(unwrapped=SimpleNamespace(num_actions=k, per_arm_features=False, default_model="mlp",
                                                     task="bandit", reward_scale=1.0))


def test_make_agent_linear_is_per_arm_and_matches_the_joint_agent():
    """The default linear agent keeps K blocks (shared σ²); its belief equals the joint agent's round for round."""
    blocks = make_agent("linear-thompson", _env())
    joint = make_agent("linear-thompson", _env(), posterior_kwargs=dict(arms=None))
    assert blocks.posterior.hyper["arms"] == K and blocks.posterior.hyper["shared_noise"]
    assert "arms" not in joint.posterior.hyper
    assert make_agent("linear-thompson", _env(), model=MLP(features=(4,), out=K)).posterior.hyper.get("arms") is None
    rng = np.random.default_rng(5)
    ctx = jnp.asarray(rng.normal(size=(12, D)))
    sb, sj = blocks.init(jax.random.PRNGKey(0), ctx[0]), joint.init(jax.random.PRNGKey(0), ctx[0])
    for t in range(12):
        a = jnp.int32(t % K)
        r = float(rng.normal())
        sb, sj = blocks.observe(sb, ctx[t], a, r), joint.observe(sj, ctx[t], a, r)
    # the agent's weights are float32 (Flax's init), so agreement to float32 rounding
    assert sb.posterior.mean.dtype == jnp.float32
    np.testing.assert_allclose(sb.posterior.mean, sj.posterior.mean, atol=2e-5)
    np.testing.assert_allclose([sb.posterior.a, sb.posterior.b], [sj.posterior.a, sj.posterior.b], rtol=2e-5)
    action, _ = blocks.act(jax.random.PRNGKey(1), sb, ctx[0])
    assert 0 <= int(action) < K


HILOFI_CONFIGS = [dict(), dict(dynamics_cov_last=0.01), dict(dynamics_cov=0.01, forgetting=0.95),
                  dict(dynamics_cov_last=0.01, last_cov="sqrt"),
                  dict(dynamics_cov=0.01, forgetting=0.95, dynamics_mode="gain"),
                  dict(dynamics_cov_last=0.01, last_cov="sqrt", dynamics_mode="gain")]


def _hilofi_setup():
    model = MLP(features=(6,), out=K)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(D))
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(np.asarray(v, np.float64)), params)  # float64 under x64
    space = bk.posteriors.base.ParamSpace(params, "head")
    return model, params, arm_blocks(params, K, keep=space.is_last)


def _last_cov(post, state):
    """``Σ_ℓ`` (dense) or its blocks ``(K, P_k, P_k)``, whichever form ``state.cov_last`` holds."""
    c = np.asarray(state.cov_last)
    if post.hyper["last_cov"] == "dense":
        return c
    return np.einsum("...ji,...jl->...il", c, c)


HILOFI_IDS = ["sqrt", "dense", "dense-drift-forget", "sqrt-drift", "dense-gain", "sqrt-gain"]


@pytest.mark.parametrize("kw", HILOFI_CONFIGS, ids=HILOFI_IDS)
def test_hilofi_arm_blocks_equal_one_dense_last_layer(x64, kw):
    model, params, idx = _hilofi_setup()
    _, _, xs, acts, ys = _setup(4)
    f = selected_output(model.apply)
    blocks = bk.posteriors.hilofi(f, Gaussian(0.3), rank=3, arms=K, **kw)
    joint = bk.posteriors.hilofi(f, Gaussian(0.3), rank=3, **kw)
    sb, sj = _run(blocks, params, xs, acts, ys), _run(joint, params, xs, acts, ys)
    assert sb.cov_last.shape == (K, idx.shape[1], idx.shape[1])
    pairs = [(sb.mean_hidden, sj.mean_hidden), (sb.mean_last, sj.mean_last),
             (sb.cov_hidden.dense(), sj.cov_hidden.dense())]
    for u, v in pairs:
        np.testing.assert_allclose(u, v, atol=1e-10)
    _assert_blocks_of(_last_cov(blocks, sb), _last_cov(joint, sj), idx)
    _assert_same_predictive(blocks, sb, joint, sj)


def test_hilofi_arm_block_draws_have_the_block_covariance(x64):
    model, params, idx = _hilofi_setup()
    _, _, xs, acts, ys = _setup(5)
    post = bk.posteriors.hilofi(selected_output(model.apply), Gaussian(0.3), rank=3, arms=K, dynamics_cov_last=0.01)
    state = _run(post, params, xs, acts, ys)
    keys = jax.random.split(jax.random.PRNGKey(0), 40000)
    draws = jax.jit(jax.vmap(lambda k: bk.posteriors.base.ParamSpace(params, "head").split(post.sample(k, state))[1]))
    ell = np.asarray(draws(keys))
    emp, cov = np.cov(ell.T), _last_cov(post, state)
    for k in range(K):
        np.testing.assert_allclose(ell[:, idx[k]].mean(0), np.asarray(state.mean_last)[idx[k]],
                                   atol=0.03 * np.sqrt(np.diag(cov[k])).max())
        np.testing.assert_allclose(emp[np.ix_(idx[k], idx[k])], cov[k], atol=0.05 * np.abs(cov[k]).max())
        cross = emp[np.ix_(idx[k], np.setdiff1d(np.arange(emp.shape[0]), idx[k]))]
        assert np.abs(cross).max() < 0.05 * np.abs(cov[k]).max()


def test_hilofi_bad_arms_input_is_explained():
    model, params, _ = _hilofi_setup()
    f = selected_output(model.apply)
    with pytest.raises(ValueError, match="arms must be a positive int"):
        bk.posteriors.hilofi(f, arms=0)
    with pytest.raises(ValueError, match="LoLoFi"):
        bk.posteriors.lolofi(f, arms=K)
    with pytest.raises(ValueError, match=r"head.*last axis 5"):
        bk.posteriors.hilofi(f, arms=5).init(params)
    post = bk.posteriors.hilofi(model.apply, arms=K)  # all K outputs per observation
    state = post.init(params)
    with pytest.raises(ValueError, match="one arm at a time"):
        post.update(state, jnp.ones(D), jnp.ones(K))


def test_make_agent_hilofi_keeps_arm_blocks_on_the_default_head():
    agent = make_agent("hilofi-thompson", _env())
    assert agent.posterior.hyper["arms"] == K
    assert "arms" not in make_agent("hilofi-thompson", _env(), posterior_kwargs=dict(arms=None)).posterior.hyper
    assert "arms" not in make_agent("hilofi-thompson", _env(), posterior_kwargs=dict(rank_last=2)).posterior.hyper
    assert "arms" not in make_agent("lolofi-thompson", _env()).posterior.hyper
    assert "arms" not in make_agent("hilofi-thompson", _env(), model=MLP(features=(4,), out=K)).posterior.hyper
    per_arm = SimpleNamespace(unwrapped=SimpleNamespace(num_actions=K, per_arm_features=True, default_model="mlp",
                                                        task="bandit", reward_scale=1.0))
    assert "arms" not in make_agent("hilofi-thompson", per_arm).posterior.hyper
    state = agent.init(jax.random.PRNGKey(0), jnp.ones(D))
    state = agent.observe(state, jnp.ones(D), 1, 0.5)
    action, _ = agent.act(jax.random.PRNGKey(1), state, jnp.ones(D))
    assert 0 <= int(action) < K


def test_make_agent_custom_model_takes_arms_from_posterior_kwargs():
    """A custom ``K``-output model keeps one dense head block unless ``arms=K`` is asked for (docs/usage.md); a head
    whose parameters do not end in the ``K`` arms is refused at ``init``, naming the parameter."""
    custom = MLP(features=(5,), out=K)
    agent = make_agent("hilofi-thompson", _env(), model=custom, posterior_kwargs=dict(arms=K))
    assert agent.posterior.hyper["arms"] == K
    state = agent.observe(agent.init(jax.random.PRNGKey(0), jnp.ones(D)), jnp.ones(D), 1, 0.5)
    assert 0 <= int(agent.act(jax.random.PRNGKey(1), state, jnp.ones(D))[0]) < K
    wrong = make_agent("hilofi-thompson", _env(), model=MLP(features=(5,), out=K + 1), posterior_kwargs=dict(arms=K))
    with pytest.raises(ValueError, match=r"\['head'\]\['bias'\].*last axis"):
        wrong.init(jax.random.PRNGKey(0), jnp.ones(D))


def _nl(model, params, **kw):
    return bk.posteriors.neural_linear(selected_output(model.apply), Gaussian(1.0), init_cov=V0, a0=A0, b0=B0,
                                       example_x=(jnp.zeros(D), jnp.zeros(K)), buffer_size=16,
                                       optimizer=optax.sgd(0.01), n_train_steps=3, **kw)


def test_neural_linear_arm_blocks_equal_one_dense_head_through_retraining(x64):
    """Incremental rows and the refits from the buffer (train_every=7 over 30 rounds) give the dense posterior."""
    model, params, idx = _hilofi_setup()
    _, _, xs, acts, ys = _setup(6)
    blocks, dense = _nl(model, params, arms=K, train_every=7), _nl(model, params, train_every=7)
    sb, sd = _run(blocks, params, xs, acts, ys), _run(dense, params, xs, acts, ys)
    assert sb.cov_sqrt.shape == (K, idx.shape[1], idx.shape[1])
    for u, v in [(sb.hidden, sd.hidden), (sb.mean_last, sd.mean_last), (sb.a, sd.a), (sb.b, sd.b)]:
        np.testing.assert_allclose(u, v, rtol=1e-9, atol=1e-10)
    sq_b, sq_d = np.asarray(sb.cov_sqrt), np.asarray(sd.cov_sqrt)
    _assert_blocks_of(sq_b @ np.swapaxes(sq_b, 1, 2), sq_d @ sq_d.T, idx)  # Σ = S Sᵀ
    _assert_same_predictive(blocks, sb, dense, sd)


def test_neural_linear_per_arm_noise_equals_closed_form_per_arm_nig(x64):
    model, params, idx = _hilofi_setup()
    _, _, xs, acts, ys = _setup(7)
    post = _nl(model, params, arms=K, shared_noise=False, train_every=1000)  # no retraining: the body stays put
    state = _run(post, params, xs, acts, ys)
    feats = np.asarray(jax.vmap(lambda x: model.apply(params, x, return_features=True))(jnp.asarray(xs)))
    for k in range(K):
        sel = acts == k
        x_mat = np.c_[np.ones(sel.sum()), feats[sel]]  # arm k's head weights: [bias_k, kernel[:, k]]
        y = ys[sel, 0]
        sig_n = np.linalg.inv(np.eye(x_mat.shape[1]) / V0 + x_mat.T @ x_mat)
        mu_n = sig_n @ (x_mat.T @ y)
        a_n, b_n = A0 + sel.sum() / 2, B0 + 0.5 * (y @ y - mu_n @ np.linalg.inv(sig_n) @ mu_n)
        sk = np.asarray(state.cov_sqrt[k])
        np.testing.assert_allclose(np.asarray(state.mean_last)[idx[k]], mu_n, atol=1e-10)
        np.testing.assert_allclose(sk @ sk.T, sig_n, atol=1e-10)
        np.testing.assert_allclose([state.a[k], state.b[k]], [a_n, b_n], rtol=1e-10)
    space = bk.posteriors.base.ParamSpace(params, "head")
    draws = jax.jit(jax.vmap(lambda key: space.split(post.sample(key, state))[1]))
    ell = np.asarray(draws(jax.random.split(jax.random.PRNGKey(0), 30000)))
    emp = np.cov(ell.T)
    for k in range(K):
        sk = np.asarray(state.cov_sqrt[k])
        want = float(state.b[k] / (state.a[k] - 1)) * (sk @ sk.T)
        np.testing.assert_allclose(emp[np.ix_(idx[k], idx[k])], want, atol=0.06 * np.abs(want).max())


def test_make_agent_neural_linear_keeps_arm_blocks():
    agent = make_agent("neural_linear-thompson", _env())
    assert agent.posterior.hyper["arms"] == K and agent.posterior.hyper["shared_noise"]
    assert "arms" not in make_agent("neural_linear-thompson", _env(), posterior_kwargs=dict(arms=None)).posterior.hyper
    state = agent.init(jax.random.PRNGKey(0), jnp.ones(D))
    state = agent.observe(state, jnp.ones(D), 2, 0.5)
    assert state.posterior.cov_sqrt.shape[0] == K
    with pytest.raises(ValueError, match="arms must be a positive int"):
        bk.posteriors.neural_linear(selected_output(MLP(features=(), out=K).apply), arms=-1)


KLL_CONFIGS = [dict(forgetting=0.95), dict(forgetting=0.9, dynamics_cov=0.01, shrink_mean=False, forgetting_lr=0.1),
               dict(learn_forgetting=False), dict(likelihood="bernoulli", forgetting=0.95, num_samples=8)]


def _kll(model, arms=None, likelihood=None, **kw):
    lik = bk.likelihoods.Bernoulli() if likelihood == "bernoulli" else Gaussian(0.3)
    return bk.posteriors.kalman_last_layer(selected_output(model.apply), lik, init_cov=V0, arms=arms, **kw)


@pytest.mark.parametrize("kw", KLL_CONFIGS, ids=["learned-gamma", "drift-no-shrink", "static", "bernoulli-mc"])
def test_kalman_last_layer_arm_blocks_equal_one_dense_head(x64, kw):
    """γ learned from the one-step predictive, drift, no drift, and the Monte-Carlo γ objective of a Bernoulli head:
    the blocks reproduce the dense filter's mean, covariance, δ and predictive."""
    model, params, idx = _hilofi_setup()
    _, _, xs, acts, ys = _setup(8)
    if kw.get("likelihood") == "bernoulli":
        ys = (ys > 1.0).astype(np.float64)
    blocks, dense = _kll(model, arms=K, **kw), _kll(model, **kw)
    sb, sd = _run(blocks, params, xs, acts, ys), _run(dense, params, xs, acts, ys)
    assert sb.chol.shape == (K, idx.shape[1], idx.shape[1]) and bool(sb.pending)
    np.testing.assert_allclose(sb.mean, sd.mean, atol=1e-10)
    np.testing.assert_allclose(sb.delta, sd.delta, rtol=1e-9, atol=1e-12)
    if kw.get("learn_forgetting", True):
        assert float(sd.delta) != -2.0 * np.log(kw.get("forgetting", 1.0))  # γ did move, so the check means something
    _assert_blocks_of(sb.cov, sd.cov, idx)
    _assert_same_predictive(blocks, sb, dense, sd)


def test_kalman_last_layer_arm_block_draws_have_the_predicted_covariance(x64):
    """With a pending time update a draw is from ``N(m⁻, γ² A + a I)``, block by block."""
    model, params, idx = _hilofi_setup()
    _, _, xs, acts, ys = _setup(9)
    post = _kll(model, arms=K, forgetting=0.9)
    state = _run(post, params, xs, acts, ys)
    g = float(current_forgetting(state))
    cov = g**2 * np.asarray(state.cov) + (1 - g**2) * V0 * np.eye(idx.shape[1])
    space = bk.posteriors.base.ParamSpace(params, "head")
    draws = jax.jit(jax.vmap(lambda key: space.split(post.sample(key, state))[1]))
    ell = np.asarray(draws(jax.random.split(jax.random.PRNGKey(0), 40000)))
    emp = np.cov(ell.T)
    want_mean = np.asarray(space.split(post.mean(state))[1])
    for k in range(K):
        np.testing.assert_allclose(ell[:, idx[k]].mean(0), want_mean[idx[k]],
                                   atol=0.03 * np.sqrt(np.diag(cov[k])).max())
        np.testing.assert_allclose(emp[np.ix_(idx[k], idx[k])], cov[k], atol=0.05 * np.abs(cov[k]).max())
        cross = emp[np.ix_(idx[k], np.setdiff1d(np.arange(emp.shape[0]), idx[k]))]
        assert np.abs(cross).max() < 0.05 * np.abs(cov[k]).max()


def test_kalman_last_layer_bad_arms_input_is_explained():
    model, params, _ = _hilofi_setup()
    with pytest.raises(ValueError, match="arms must be a positive int"):
        _kll(model, arms=0)
    with pytest.raises(ValueError, match=r"head.*last axis 5"):
        _kll(model, arms=5).init(params)
    post = bk.posteriors.kalman_last_layer(model.apply, arms=K)  # all K outputs per observation
    state = post.init(params)
    with pytest.raises(ValueError, match="one arm at a time"):
        post.update(post.predict(state), jnp.ones(D), jnp.ones(K))


def test_make_agent_kalman_last_layer_keeps_arm_blocks():
    """The default head is blocked; an agent observing a round moves only the pulled arm's block."""
    agent = make_agent("kalman_last_layer-thompson", _env())
    assert agent.posterior.hyper["arms"] == K
    dense = make_agent("kalman_last_layer-thompson", _env(), posterior_kwargs=dict(arms=None))
    assert "arms" not in dense.posterior.hyper
    state = agent.init(jax.random.PRNGKey(0), jnp.ones(D))
    before = np.asarray(state.posterior.chol)
    state = agent.observe(state, jnp.ones(D), 2, 0.5)
    after = np.asarray(state.posterior.chol)
    assert after.shape[0] == K
    assert not np.allclose(after[2], before[2]) and all(np.array_equal(after[k], before[k]) for k in (0, 1))
    action, _ = agent.act(jax.random.PRNGKey(1), state, jnp.ones(D))
    assert 0 <= int(action) < K


def _net(p, x):
    """A K-output head on a hidden tanh layer (``body``) or, without one, on the first inputs: any width."""
    h = jnp.tanh(x @ p["body"]["w"]) if "body" in p else x[: p["head"]["kernel"].shape[0]]
    return h @ p["head"]["kernel"] + p["head"]["bias"]


@pytest.mark.parametrize("make, body", [
    (lambda f: bk.posteriors.linear(f, Gaussian(0.3), arms=K, noise="nig", shared_noise=False), False),
    (lambda f: bk.posteriors.hilofi(f, Gaussian(0.3), rank=2, arms=K, dynamics_cov=0.01), True),
    (lambda f: bk.posteriors.kalman_last_layer(f, Gaussian(0.3), arms=K), True),
], ids=["linear", "hilofi", "kalman_last_layer"])
def test_arm_blocks_come_from_the_state(make, body):
    """The arm index is derived from the state's layout: one backend serves two head widths, and a fresh backend
    that never ran ``init`` continues a state exactly."""
    f = selected_output(_net)
    post, x, y = make(f), (jnp.ones(D), jax.nn.one_hot(1, K)), jnp.ones(1)
    for width in (2, 3):
        params = {"head": {"kernel": jnp.full((width, K), 0.2), "bias": jnp.zeros(K)}}
        if body:
            params["body"] = {"w": jnp.full((D, width), 0.1)}
        state = post.update(post.predict(post.init(params)), x, y)
        fresh = make(f)
        for u, v in zip(post.predictive(state, x), fresh.predictive(state, x), strict=True):
            np.testing.assert_array_equal(u, v)
        for u, v in zip(*(jax.tree_util.tree_leaves(p.update(state, x, y)) for p in (post, fresh)), strict=True):
            np.testing.assert_array_equal(u, v)
        shapes = [[v.shape for v in jax.tree_util.tree_leaves(t)] for t in (fresh.sample(jax.random.PRNGKey(0), state),
                                                                            params)]
        assert shapes[0] == shapes[1]
