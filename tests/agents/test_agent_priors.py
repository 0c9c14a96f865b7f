"""The prior-variance rules of banditkit.agents.priors on cases with a known answer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.agents import priors
from banditkit.models import MLP, LeNet5


def test_fan_in_variances_exact_for_an_mlp():
    params = MLP(features=(50, 50), out=7).init(jax.random.PRNGKey(0), jnp.zeros(9))
    got = priors.fan_in_variances(params)
    assert priors.fan_in_variances(jax.eval_shape(lambda: params)) == got  # shapes suffice
    # kernels 9×50, 50×50 (hidden) and 50×7 (head); each entry's initialiser variance is 1/fan_in
    assert got["hidden"] == pytest.approx((9 * 50 / 9 + 50 * 50 / 50) / (9 * 50 + 50 * 50), rel=1e-12)
    assert got["last"] == pytest.approx(1 / 50, rel=1e-12)
    assert got["all"] == pytest.approx((50 + 50 + 7) / (9 * 50 + 50 * 50 + 50 * 7), rel=1e-12)


def test_fan_in_variances_counts_the_receptive_field_of_a_convolution():
    params = jax.eval_shape(LeNet5(out=10).init, jax.random.PRNGKey(0), jnp.zeros(784))  # shapes only
    got = priors.fan_in_variances(params)
    sizes = [(25 * 1, 6), (25 * 6, 16), (400, 120), (120, 84)]  # (fan_in, fan_out) of the hidden kernels
    want = sum(fo for _, fo in sizes) / sum(fi * fo for fi, fo in sizes)
    assert got["hidden"] == pytest.approx(want, rel=1e-12)
    assert got["last"] == pytest.approx(1 / 84, rel=1e-12)


def test_fan_in_variances_rejects_a_last_layer_that_matches_nothing():
    params = MLP(features=(5,), out=2).init(jax.random.PRNGKey(0), jnp.zeros(3))
    with pytest.raises(ValueError, match="last_layer='output'"):
        priors.fan_in_variances(params, last_layer="output")


def _linear_gaussian(rng, n, dims, variances, noise):
    """y = Σ_B X_B w_B + ε with w_B ~ N(0, σ_B² I), ε ~ N(0, R): the Gram matrices X_B X_Bᵀ and y."""
    grams, y = [], rng.normal(0.0, np.sqrt(noise), n)
    for d, v in zip(dims, variances, strict=True):
        x = rng.normal(size=(n, d))
        y = y + x @ rng.normal(0.0, np.sqrt(v), d)
        grams.append(x @ x.T)
    return grams, y


def test_empirical_bayes_recovers_the_weight_variance_of_a_linear_gaussian_stream():
    # one weight draw per trial; the estimate's spread is set by the d = 300 weights (rel. s.e. ≈ √(2/d) ≈ 8%)
    rng = np.random.default_rng(0)
    est = []
    for _ in range(5):
        grams, y = _linear_gaussian(rng, 400, [300], [0.3], 0.05)
        (v,), r = priors.empirical_bayes_variances(grams, y)
        est.append((v, r))
    v_mean, r_mean = np.mean(est, axis=0)
    assert v_mean == pytest.approx(0.3, rel=0.1)
    assert r_mean == pytest.approx(0.05, rel=0.25)


def test_empirical_bayes_separates_two_blocks_with_different_variances():
    rng = np.random.default_rng(1)
    grams, y = _linear_gaussian(rng, 200, [200, 100], [0.02, 1.0], 0.01)
    (vh, vl), _ = priors.empirical_bayes_variances(grams, y)
    assert vh == pytest.approx(0.02, rel=0.3)
    assert vl == pytest.approx(1.0, rel=0.3)
    (th, tl), _ = priors.empirical_bayes_variances(grams, y, tied=True)
    assert th == tl and vh < th < vl  # one shared variance lies between the two


def test_empirical_bayes_maximises_the_marginal_likelihood():
    rng = np.random.default_rng(2)
    grams, y = _linear_gaussian(rng, 80, [50, 20], [0.1, 0.5], 0.2)
    (vh, vl), r = priors.empirical_bayes_variances(grams, y)
    best = priors.log_marginal_likelihood([vh, vl], grams, y, r)
    for f in (0.7, 1.4):
        assert best >= priors.log_marginal_likelihood([vh * f, vl], grams, y, r)
        assert best >= priors.log_marginal_likelihood([vh, vl * f], grams, y, r)
        assert best >= priors.log_marginal_likelihood([vh, vl], grams, y, r * f)


def test_empirical_bayes_with_a_given_noise_keeps_it():
    rng = np.random.default_rng(3)
    grams, y = _linear_gaussian(rng, 300, [200], [0.5], 0.1)
    (v,), r = priors.empirical_bayes_variances(grams, y, obs_noise=0.1)
    assert r == 0.1 and v == pytest.approx(0.5, rel=0.3)


def test_empirical_bayes_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="n = 3"):
        priors.empirical_bayes_variances([np.eye(4)], np.zeros(3))
    with pytest.raises(ValueError, match="obs_noise"):
        priors.empirical_bayes_variances([np.eye(3)], np.ones(3), obs_noise=-1.0)


def test_linearised_grams_reject_a_model_without_a_hidden_block():
    model = MLP(features=(), out=3)
    rng = np.random.default_rng(4)
    x = rng.normal(size=(10, 4)).astype(np.float32)
    a = rng.integers(0, 3, 10)
    params = model.init(jax.random.PRNGKey(0), x[0])
    with pytest.raises(ValueError, match="last_layer"):  # a linear model is all head
        priors.linearised_grams(model.apply, params, x, a)


def test_linearised_grams_match_explicit_jacobians():
    model = MLP(features=(6,), out=3)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(9, 4)).astype(np.float32)
    a = rng.integers(0, 3, 9)
    params = model.init(jax.random.PRNGKey(0), x[0])
    gh, gl, f0 = priors.linearised_grams(model.apply, params, x, a, chunk=4)
    jh, jl, outs = [], [], []
    for xi, ai in zip(x, a, strict=True):
        g = jax.grad(lambda p, xi=xi, ai=ai: model.apply(p, xi)[ai])(params)["params"]
        jh.append(np.concatenate([np.ravel(g["dense_0"]["bias"]), np.ravel(g["dense_0"]["kernel"])]))
        jl.append(np.concatenate([np.ravel(g["head"]["bias"]), np.ravel(g["head"]["kernel"])]))
        outs.append(float(model.apply(params, xi)[ai]))
    jh, jl = np.array(jh, np.float64), np.array(jl, np.float64)
    np.testing.assert_allclose(gh, jh @ jh.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gl, jl @ jl.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(f0, outs, rtol=1e-5, atol=1e-6)
    # the head's Gram is exact: (h_s·h_t + 1) when the two rounds chose the same arm, else 0
    assert np.all(gl[a[:, None] != a[None, :]] == 0)


def test_the_one_gram_fast_path_has_the_same_likelihood_and_gradient():
    rng = np.random.default_rng(6)
    (g,), y = _linear_gaussian(rng, 60, [30], [0.4], 0.1)
    eig, q = np.linalg.eigh(g)
    for z in ([np.log(0.4), np.log(0.1)], [np.log(2.0), np.log(0.01)]):
        z = np.asarray(z)
        fast = priors._negative_lml_one_gram(z, eig, (q.T @ y) ** 2, None)
        full = priors._negative_lml_and_grad(z, [g], y, None)
        assert fast[0] == pytest.approx(full[0], rel=1e-9)
        np.testing.assert_allclose(fast[1], full[1], rtol=1e-7)
        assert -fast[0] == pytest.approx(priors.log_marginal_likelihood([np.exp(z[0])], [g], y, np.exp(z[1])),
                                         rel=1e-9)


class _FeaturesAreTheInput:
    """A model whose head input is the context itself, ``φ(x) = x`` (known answer for the unit-head rule)."""

    def init(self, key, x):
        return {"params": {"head": {"kernel": jnp.zeros((x.shape[-1], 2)), "bias": jnp.zeros((2,))}}}

    def apply(self, params, x, return_features=False):
        head = params["params"]["head"]
        return x if return_features else x @ head["kernel"] + head["bias"]


def test_unit_head_variance_is_one_over_the_mean_squared_feature_norm_plus_one():
    contexts = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # ‖x‖² = 1, 3, 4, 0
    model = _FeaturesAreTheInput()
    params = model.init(None, jnp.asarray(contexts[0]))
    assert priors.unit_head_variance(model, params, contexts) == pytest.approx(1.0 / (2.0 + 1.0))


def test_unit_head_prior_reads_the_envs_contexts_and_make_agent_no_longer_calls_it():
    import gymnasium as gym

    from banditkit.agents import make_agent
    from banditkit.agents.factory import default_model

    env = gym.make("banditkit/Mushroom-v0", max_steps=8)
    model, _ = default_model(env.unwrapped, "hilofi")
    value = priors.unit_head_prior(env, model)
    fb = env.unwrapped.functional(0, priors.ROUNDS)
    contexts = np.asarray(fb.contexts)[np.asarray(fb.index)]
    params = model.init(jax.random.PRNGKey(0), contexts[0])
    phi = np.asarray(jax.vmap(lambda x: model.apply(params, x, return_features=True))(jnp.asarray(contexts)))
    assert value == pytest.approx(1.0 / (np.mean(np.sum(phi.astype(np.float64) ** 2, axis=1)) + 1.0), rel=1e-6)
    # make_agent no longer reads the env's contexts (issue 69): the agent sets the unit head prior at init, from the
    # first context it sees (tests/agents/test_honest_agents.py); this function stays a study tool
    assert make_agent("hilofi-thompson", env).head_prior == "unit"
    given = make_agent("hilofi-thompson", env, posterior_kwargs=dict(init_cov_last=2.0))
    assert given.posterior.hyper["init_cov_last"] == 2.0 and given.head_prior is None  # a given head prior is kept
    assert priors.unit_head_prior(object(), model) is None  # no functional form: make_agent keeps the constant


def test_unit_lowrank_variance_on_a_linear_model_with_coordinate_rows():
    """``f(θ, x) = W x`` with ``θ = vec(W)`` (K = 2, D = 3): ``h_k(x) = e_k ⊗ x``; with rows picking ``W[0, 0]``,
    ``W[1, 2]`` and ``W[0, 1]``, ``Σ_k ‖Q h_k‖² = x_0² + x_2² + x_1²`` — the known answer ``1 / E[...] / K``."""
    contexts = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])  # ‖x‖² = 5, 9
    rows = np.zeros((3, 6))
    rows[0, 0], rows[1, 5], rows[2, 1] = 1.0, 1.0, 1.0  # vec(W) row-major: W[0, 0], W[1, 2], W[0, 1]
    value = priors.unit_lowrank_variance(lambda th, x: th.reshape(2, 3) @ x, jnp.zeros(6), rows, contexts)
    # per context: ‖Q h_0‖² = x_0² + x_1², ‖Q h_1‖² = x_2²; mean over (x, k) = (5 + 9) / 4
    assert value == pytest.approx(4.0 / 14.0, rel=1e-12)


def test_unit_lowrank_prior_reads_the_agents_prior_rows_and_the_envs_contexts():
    import gymnasium as gym

    from banditkit.agents import make_agent
    from banditkit.agents.factory import DEFAULT_HYPER

    env = gym.make("banditkit/Mushroom-v0", max_steps=8)
    agent = make_agent("lrkf-thompson", env, obs_noise=0.1)  # one filter (make_agent's default is a noise mixture)
    assert agent.posterior.hyper["init_cov"] == DEFAULT_HYPER["lrkf"]["init_cov"]  # the rule is not the default
    assert priors.unit_lowrank_prior(env, make_agent("lrkf-thompson", env)) == pytest.approx(
        priors.unit_lowrank_prior(env, agent), rel=1e-6)  # the mixture's members share these prior rows
    value = priors.unit_lowrank_prior(env, agent)
    # recomputed by hand: the agent's own prior rows (C_0 / √σ²) and the gradients of its outputs, float64
    state = agent.init(jax.random.PRNGKey(0), env.unwrapped.functional(0, 1).contexts[0]).posterior
    q = np.asarray(state.cov.dense(), np.float64) / np.sqrt(agent.posterior.hyper["init_cov"])
    np.testing.assert_allclose(q @ q.T, np.eye(q.shape[0]), atol=1e-4)  # orthonormal rows: C_0 = √σ² Q
    fb = env.unwrapped.functional(0, priors.ROUNDS)
    contexts = np.asarray(fb.contexts)[np.asarray(fb.index)]
    jac = jax.vmap(jax.jacrev(lambda th, x: agent.model.apply(state.space.unravel(th), x)), (None, 0))(
        state.mean, jnp.asarray(contexts))  # (n, K, P)
    want = 1.0 / np.mean(np.sum(np.einsum("dp,nkp->nkd", q, np.asarray(jac, np.float64)) ** 2, axis=-1))
    assert value == pytest.approx(want, rel=1e-4)
    assert value == pytest.approx(25.7, abs=0.05)  # the value benchmarks/studies/lrkf_prior pre-registered
    assert priors.unit_lowrank_prior(object(), agent) is None  # no functional form
