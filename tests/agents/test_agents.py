"""BanditAgent against a closed-form Kalman filter, both reward-model shapes, make_agent specs, warm-up."""

import functools
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.agents import BanditAgent, make_agent, parse_spec, selected_output
from banditkit.models import MLP, LeNet5

K, D = 3, 4
RNG = np.random.default_rng(0)
XS = RNG.normal(size=(8, D)).astype(np.float32)
ACTIONS = [0, 2, 1, 2, 2, 0, 1, 0]
REWARDS = RNG.normal(size=8).astype(np.float32)


def _kalman(theta0, rows, ys, init_cov, noise):
    """Closed-form Bayesian linear regression: prior N(θ0, init_cov I), y = h·θ + N(0, noise)."""
    mu, cov = np.asarray(theta0, np.float64), init_cov * np.eye(len(theta0))
    for h, y in zip(rows, ys, strict=True):
        s = h @ cov @ h + noise
        k = cov @ h / s
        mu = mu + k * (y - h @ mu)
        cov = cov - np.outer(k, h @ cov)
    return mu, cov


def _flat(params):
    """θ in ravel order of {'params': {'head': {'bias' (K,), 'kernel' (D, K)}}}."""
    head = params["params"]["head"]
    return np.concatenate([np.asarray(head["bias"]).ravel(), np.asarray(head["kernel"]).ravel()])


def _row_multi(x, a, k=K):
    h = np.zeros(k + len(x) * k)
    h[a] = 1.0
    h[k + np.arange(len(x)) * k + a] = x
    return h


def test_multi_output_agent_equals_closed_form_kalman_filter():
    agent = BanditAgent(MLP(features=(), out=K), "ekf", "greedy", obs_noise=0.5, posterior_kwargs=dict(init_cov=2.0))
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    theta0 = _flat(agent.posterior.mean(state.posterior))
    for x, a, r in zip(XS, ACTIONS, REWARDS, strict=True):
        state = agent.observe(state, x, a, r)
    assert int(state.step) == len(XS)
    mu, cov = _kalman(theta0, [_row_multi(x, a) for x, a in zip(XS, ACTIONS, strict=True)], REWARDS, 2.0, 0.5)
    np.testing.assert_allclose(_flat(agent.posterior.mean(state.posterior)), mu, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(np.asarray(state.posterior.cov), cov, rtol=2e-4, atol=2e-5)
    # the greedy action is the argmax of the posterior-mean rewards W·x + b
    x = XS[3]
    action, _ = agent.act(jax.random.PRNGKey(1), state, x)
    w = mu[K:].reshape(D, K)
    assert int(action) == int(np.argmax(x @ w + mu[:K]))


def test_reward_scale_divides_the_observation():
    a1 = BanditAgent(MLP(features=(), out=K), "ekf", "greedy", reward_scale=4.0)
    a2 = BanditAgent(MLP(features=(), out=K), "ekf", "greedy")
    s1, s2 = a1.init(jax.random.PRNGKey(0), XS[0]), a2.init(jax.random.PRNGKey(0), XS[0])
    for x, a, r in zip(XS[:3], ACTIONS, REWARDS, strict=False):
        s1, s2 = a1.observe(s1, x, a, 4.0 * r), a2.observe(s2, x, a, r)
    np.testing.assert_allclose(s1.posterior.mean, s2.posterior.mean, rtol=1e-5, atol=1e-6)


def test_per_arm_agent_observes_the_pulled_arms_features():
    agent = BanditAgent(MLP(features=(), out=1), "ekf", "ucb", per_arm=True, obs_noise=0.3)
    ctx = RNG.normal(size=(len(XS), K, D)).astype(np.float32)
    state = agent.init(jax.random.PRNGKey(0), ctx[0])
    head = agent.posterior.mean(state.posterior)["params"]["head"]
    theta0 = np.concatenate([np.asarray(head["bias"]).ravel(), np.asarray(head["kernel"]).ravel()])
    rows = []
    for c, a, r in zip(ctx, ACTIONS, REWARDS, strict=True):
        action, state = agent.act(jax.random.PRNGKey(0), state, c)
        assert action.dtype == jnp.int32 and 0 <= int(action) < K
        state = agent.observe(state, c, a, r)
        rows.append(np.concatenate([[1.0], c[a]]))
    mu, _ = _kalman(theta0, rows, REWARDS, 1.0, 0.3)
    np.testing.assert_allclose(np.asarray(state.posterior.mean), mu, rtol=2e-4, atol=2e-5)


def test_posterior_object_factory_and_name_agree():
    model = MLP(features=(5,), out=K)
    built = bk.posteriors.ekf(selected_output(model.apply), bk.likelihoods.Gaussian(0.1), init_cov=0.5)
    agents = [
        BanditAgent(model, built, "greedy"),
        BanditAgent(model, functools.partial(bk.posteriors.ekf, init_cov=0.5), "greedy"),
    ]
    means, actions = [], []
    for agent in agents:
        state = agent.init(jax.random.PRNGKey(0), XS[0])
        for t, x in enumerate(XS[:3]):
            a, state = agent.act(jax.random.PRNGKey(t), state, x)
            state = agent.observe(state, x, a, float(x.sum()))
            actions.append(int(a))
        means.append(np.asarray(state.posterior.mean))
    np.testing.assert_allclose(means[0], means[1], rtol=1e-6)
    assert actions[:3] == actions[3:]


def test_bad_inputs_raise_clear_errors():
    agent = BanditAgent(MLP(features=(), out=K), "ekf", "greedy")
    with pytest.raises(RuntimeError, match="init"):
        agent.act(jax.random.PRNGKey(0), None, XS[0])
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    with pytest.raises(ValueError, match="reward"):
        agent.observe(state, XS[0], 0, float("nan"))
    with pytest.raises(ValueError):
        agent.observe(state, XS[0], K, 1.0)
    with pytest.raises(ValueError, match="shape"):
        agent.act(jax.random.PRNGKey(0), state, XS[0][:2])
    with pytest.raises(ValueError, match="shape"):
        agent.observe(state, np.zeros((2, D), np.float32), 0, 1.0)
    with pytest.raises(ValueError, match="unknown posterior"):
        BanditAgent(MLP(out=K), "no_such_backend", "greedy")
    with pytest.raises(ValueError, match="unknown policy"):
        BanditAgent(MLP(out=K), "ekf", "softmax")
    with pytest.raises(TypeError, match="Flax module"):
        BanditAgent(lambda p, x: x, "ekf", "greedy")


def _env(default_model="mlp", per_arm=False, k=K, **extra):
    return SimpleNamespace(
        unwrapped=SimpleNamespace(
            num_actions=k, per_arm_features=per_arm, default_model=default_model, task="bandit", **extra
        )
    )


def test_parse_spec_and_aliases():
    assert parse_spec("hilofi-thompson") == ("hilofi", "thompson")
    assert parse_spec("lofi-ucb") == ("lofi", "ucb")
    assert parse_spec("linear-ts") == ("linear", "thompson")
    assert parse_spec("diag-ekf-eps_greedy") == ("diag_ekf", "epsilon_greedy")
    assert parse_spec("ekf") == ("ekf", "thompson")
    assert parse_spec("eps_greedy") == ("replay_sgd", "epsilon_greedy")
    with pytest.raises(ValueError, match="hilofi"):
        parse_spec("hilofy-thompson")
    with pytest.raises(ValueError, match="policies"):
        parse_spec("hilofi-softmax")


def test_adaptive_noise_spec_suffix():
    """``-adaptive_noise`` (or ``-adaptive-noise``) after a spec is ``make_agent(..., adaptive_noise=True)``; the
    spec's other parts read as without it, and a contradiction or an unsupported backend is an error."""
    from banditkit.agents.factory import split_noise_suffix

    assert parse_spec("hilofi-ucb-adaptive_noise") == ("hilofi", "ucb")
    assert parse_spec("lofi-adaptive-noise") == ("lofi", "thompson")
    assert split_noise_suffix("diag-ekf-ts-Adaptive_Noise") == ("diag-ekf-ts", True)
    assert split_noise_suffix("hilofi-thompson") == ("hilofi-thompson", False)
    with pytest.raises(ValueError, match="cannot read agent spec"):
        parse_spec("adaptive_noise")  # the suffix alone names no posterior
    env = _env("mlp")
    learned = make_agent("lofi-ucb-adaptive_noise", env)
    assert learned.posterior_name == "adaptive_noise(lofi)" and learned.spec == "lofi-ucb-adaptive_noise"
    assert make_agent("lofi-ucb", env, adaptive_noise=True).posterior.hyper == learned.posterior.hyper
    assert make_agent("lofi-ucb", env).posterior_name == "lofi"
    with pytest.raises(ValueError, match="drop one of the two"):
        make_agent("lofi-ucb-adaptive_noise", env, adaptive_noise=False)
    with pytest.raises(ValueError, match="not a Gaussian filter"):
        make_agent("linear-thompson-adaptive_noise", env)


def test_make_agent_uses_the_env_default_model():
    agent = make_agent("lofi-ucb", _env("mlp"))
    assert isinstance(agent.model, MLP) and agent.model.features == (50, 50) and agent.model.out == K
    assert agent.policy.name == "ucb" and agent.posterior.name == "lofi" and not agent.per_arm
    assert agent.posterior.hyper["rank"] == 10
    agent = make_agent("ekf-eps_greedy", _env("lenet5", k=10), posterior_kwargs=dict(init_cov=0.3))
    assert isinstance(agent.model, LeNet5) and agent.model.out == 10
    assert agent.posterior.hyper["init_cov"] == 0.3 and agent.policy.hyper == {"epsilon": 0.05}
    agent = make_agent("linear-thompson", _env("mlp", per_arm=True))
    assert agent.model.features == () and agent.model.out == 1 and agent.per_arm
    # an env's declared scale is not read (issue 69): the agent learns it from the rewards, or the user passes it
    agent = make_agent("ekf-ucb", _env("mlp", reward_scale=35.0), policy_kwargs=dict(beta=2.0))
    assert agent.auto_scale and agent.policy.hyper == {"beta": 2.0}
    assert make_agent("ekf-ucb", _env("mlp"), reward_scale=35.0).reward_scale == 35.0
    with pytest.raises(ValueError, match="BayesOpt"):
        make_agent("hilofi-ei", SimpleNamespace(unwrapped=SimpleNamespace(num_actions=1, task="bo")))

    class Mine(BanditAgent):
        pass

    assert type(make_agent("lofi-ucb", _env("mlp"), agent_class=Mine)) is Mine
    with pytest.raises(TypeError, match="BanditAgent subclass"):
        make_agent("lofi-ucb", _env("mlp"), agent_class=dict)


def test_subspace_warmup_round_robin_then_fit():
    if not hasattr(bk.posteriors, "subspace_ekf"):
        pytest.fail("bk.posteriors.subspace_ekf is missing")
    tau = 4
    agent = BanditAgent(
        MLP(features=(4,), out=2),
        "subspace_ekf",
        "thompson",
        warmup_steps=tau,
        posterior_kwargs=dict(init_cov=0.5, dim=3, sgd=dict(n_iters=20, skip=2)),
    )
    assert agent.warmup_rounds == tau  # the backend refits: the agent buffers the warm-up rounds
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    actions = []
    for t, x in enumerate(XS[:6]):
        a, state = agent.act(jax.random.PRNGKey(t), state, x)
        if t == tau:  # the warm-up fit has just happened
            rows = np.asarray(state.posterior.basis_rows)  # (d, P)
            np.testing.assert_allclose(rows @ rows.T, np.eye(3), atol=1e-4)
            assert np.all(np.isfinite(np.asarray(state.posterior.inner.mean)))
        actions.append(int(a))
        state = agent.observe(state, x, a, float(np.tanh(x[int(a)])))
    assert actions[:tau] == [0, 1, 0, 1]
    # the buffer holds the warm-up rounds
    np.testing.assert_array_equal(np.asarray(state.warmup.actions), [0, 1, 0, 1])
    np.testing.assert_allclose(np.asarray(state.warmup.contexts), XS[:tau])
    flat = jax.flatten_util.ravel_pytree(agent.posterior.mean(state.posterior))[0]
    expect = state.posterior.offset + state.posterior.basis_rows.T @ state.posterior.inner.mean
    np.testing.assert_allclose(np.asarray(flat), np.asarray(expect), rtol=1e-5, atol=1e-6)


def _warmed_up(agent, tau):
    """The agent's state after τ round-robin rounds on ``XS`` and its warm-up fit (key 7)."""
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    for t in range(tau):
        state = agent.observe(state, XS[t], t % agent.num_actions_of(state), float(REWARDS[t]))
    return agent.warmup(jax.random.PRNGKey(7), state)


def test_subspace_random_basis_goes_through_the_warmup_fit():
    """``fit_basis="random"``: θ* is the warm-up SGD fit (as for the SVD basis), the basis a random draw."""
    tau, k = 4, 2
    post = dict(init_cov=0.5, dim=3, sgd=dict(n_iters=20, skip=2))
    svd = BanditAgent(MLP(features=(4,), out=k), "subspace_ekf", "thompson", warmup_steps=tau, posterior_kwargs=post)
    rnd = BanditAgent(MLP(features=(4,), out=k), "subspace_ekf", "thompson", warmup_steps=tau,
                      posterior_kwargs=dict(post, fit_basis="random"))
    s_svd, s_rnd = (_warmed_up(agent, tau) for agent in (svd, rnd))
    np.testing.assert_allclose(np.asarray(s_rnd.posterior.offset), np.asarray(s_svd.posterior.offset), atol=1e-6)
    rows = np.asarray(s_rnd.posterior.basis_rows)
    np.testing.assert_allclose(rows @ rows.T, np.eye(3), atol=1e-5)
    assert not np.allclose(rows, np.asarray(s_svd.posterior.basis_rows), atol=1e-3)
    with pytest.raises(ValueError, match="fit_basis"):
        BanditAgent(MLP(features=(4,), out=k), "subspace_ekf", "thompson", posterior_kwargs=dict(fit_basis="pca"))


def test_deprecated_subspace_arguments_forward_to_the_backend():
    """``subspace_dim`` / ``subspace_basis`` / ``sgd_kwargs`` still work (a DeprecationWarning naming the
    posterior_kwargs to use) and give the same agent as the backend's own ``dim`` / ``fit_basis`` / ``sgd``."""
    tau, k = 4, 2
    model = MLP(features=(4,), out=k)
    with pytest.warns(DeprecationWarning, match=r"posterior_kwargs=dict\(dim=\.\.\., fit_basis=\.\.\., sgd="):
        old = BanditAgent(model, "subspace_ekf", "thompson", warmup_steps=tau, subspace_dim=3,
                          subspace_basis="random", sgd_kwargs=dict(n_iters=20, skip=2))
    new = BanditAgent(model, "subspace_ekf", "thompson", warmup_steps=tau,
                      posterior_kwargs=dict(dim=3, fit_basis="random", sgd=dict(n_iters=20, skip=2)))
    assert old.posterior.hyper == new.posterior.hyper and old.posterior.hyper["dim"] == 3
    states = [_warmed_up(agent, tau) for agent in (old, new)]
    for a, b in zip(jax.tree_util.tree_leaves(states[0]), jax.tree_util.tree_leaves(states[1]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.raises(ValueError, match="subspace_basis"):
        BanditAgent(model, "subspace_ekf", "thompson", subspace_basis="pca")
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="only posterior_kwargs"):
        BanditAgent(model, "subspace_ekf", "thompson", subspace_dim=3, posterior_kwargs=dict(dim=4))
    with pytest.warns(DeprecationWarning):  # a backend without these settings ignores them, as before
        assert BanditAgent(model, "ekf", "thompson", subspace_dim=3).warmup_rounds == 0


def test_subspace_warmup_with_full_targets_fits_every_arm():
    """``warmup(key, state, targets)`` regresses all K outputs on the warm-up contexts (loss averaged over them),
    with the filter still fed the pulled arms only; the bandit-feedback default fits a different trajectory."""
    tau, k = 4, 2
    agent = BanditAgent(MLP(features=(4,), out=k), "subspace_ekf", "thompson", warmup_steps=tau, reward_scale=2.0,
                        posterior_kwargs=dict(init_cov=0.5, dim=3, sgd=dict(n_iters=20, skip=2)))
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    params = agent.posterior.mean(state.posterior)  # the initial weights: the warm-up does not move the posterior
    for t in range(tau):
        state = agent.observe(state, XS[t], t % k, float(REWARDS[t]))
    targets = RNG.normal(size=(tau, k)).astype(np.float32)
    key = jax.random.PRNGKey(7)
    full = agent.warmup(key, state, targets)
    basis, offset = bk.posteriors.subspace_from_sgd(
        agent.model.apply, params, XS[:tau], targets / 2.0, dim=3, key=key, n_iters=20, skip=2,
        mask=np.full((tau, k), 1.0 / k),
    )
    np.testing.assert_allclose(np.asarray(full.posterior.basis_rows), np.asarray(basis).T, atol=1e-5)
    np.testing.assert_allclose(np.asarray(full.posterior.offset), np.asarray(offset), atol=1e-6)
    bandit = agent.warmup(key, state)
    assert not np.allclose(np.asarray(bandit.posterior.offset), np.asarray(offset), atol=1e-4)
    with pytest.raises(ValueError, match=r"shape \(4, 2\)"):
        agent.warmup(key, state, targets[:, :1])


def _outside_rows(delta, rows):
    """Relative size of the part of ``delta (P,)`` outside the row space of ``rows (d, P)``."""
    delta, rows = np.asarray(delta, np.float64), np.asarray(rows, np.float64)
    inside = rows.T @ np.linalg.lstsq(rows.T, delta, rcond=None)[0]
    return np.linalg.norm(delta - inside) / np.linalg.norm(delta)


@pytest.mark.parametrize("name", ["lrkf", "lolofi"])
def test_default_low_rank_agents_learn_outside_their_initial_factor(name):
    """With q = 0 a low-rank factor's row space never grows, so the weights move only inside the initial random
    subspace (benchmarks/results/diag_dynamics.md); make_agent's LRKF and LoLoFi default to q = 1e-4 so they don't."""
    blocks = [("mean", "cov")] if name == "lrkf" else [("mean_hidden", "cov_hidden"), ("mean_last", "cov_last")]
    for post, moves_out in ((None, True), (dict(dynamics_cov=0.0), False)):
        # a fixed variance and scale: the test is about the dynamics (a learned scale moves the mean by its ratio)
        agent = make_agent(f"{name}-thompson", _env("mlp"), posterior_kwargs=post, obs_noise=0.01, reward_scale=1.0)
        hyper = agent.posterior.hyper
        q = [hyper["dynamics_cov"]] if name == "lrkf" else [hyper["dynamics_cov_hidden"], hyper["dynamics_cov_last"]]
        assert q == [1e-4 if post is None else 0.0] * len(q)
        s0 = agent.init(jax.random.PRNGKey(0), XS[0])
        s = s0
        for _ in range(5):  # 40 rounds: the part outside grows with the rounds observed
            for x, a, r in zip(XS, ACTIONS, REWARDS, strict=True):
                s = agent.observe(s, x, a, r)
        for mean, cov in blocks:
            delta = getattr(s.posterior, mean) - getattr(s0.posterior, mean)
            outside = _outside_rows(delta, getattr(s0.posterior, cov).dense())
            assert np.linalg.norm(delta) > 0
            if moves_out:
                assert outside > 1e-3, (name, mean, outside)
            else:
                assert outside < 1e-4, (name, mean, outside)  # float32 rounding only
