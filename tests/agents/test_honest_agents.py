"""Agents that see only what a deployed agent sees (issue 69, API.md §14): make_agent reads no oracle, the compiled
loop plays from the stream, and the defaults that adapt to the stream have known answers."""

from __future__ import annotations

import warnings

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.agents import BanditAgent, make_agent
from banditkit.likelihoods import Gaussian
from banditkit.models import MLP
from banditkit.posteriors import linear
from banditkit.posteriors.mixture import evidence_mixture, noise_mixture


class OracleTouched(AssertionError):
    pass


def _small_problem(seed: int = 0, t: int = 64, d: int = 4, k: int = 3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(t, d)).astype(np.float32)
    w = rng.normal(size=(d, k)).astype(np.float32)
    expected = 3.0 * np.tanh(x @ w)
    rewards = expected + 0.1 * rng.normal(size=expected.shape).astype(np.float32)
    return x, rewards, expected


class PoisonedEnv(gym.Env):
    """Plays a stream; every route to the simulator's answers raises (``functional``, ``oracle``, ``episode``)."""

    def __init__(self, inner):
        self._inner = inner
        self.observation_space = inner.observation_space
        self.action_space = inner.action_space
        self.num_actions = inner.num_actions
        self.has_oracle = False

    def stream(self, seed, steps):
        return self._inner.stream(seed, steps)

    def functional(self, seed, steps):
        raise OracleTouched("functional (expected rewards) read")

    def oracle(self, seed, steps):
        raise OracleTouched("oracle read")

    def episode(self, seed, steps=None):
        raise OracleTouched("episode read")


class Twin(gym.Env):
    """An oracle-free twin of an env: the same spaces, nothing else."""

    def __init__(self, inner):
        self.observation_space = inner.observation_space
        self.action_space = inner.action_space


def _same_tree(a, b) -> bool:
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True))


@pytest.mark.parametrize("spec", ["hilofi-thompson", "linear-thompson", "lofi-ucb"])
def test_make_agent_is_the_same_from_a_shipped_env_and_its_oracle_free_twin(spec):
    env = gym.make("banditkit/Mushroom-v0", max_steps=50)
    a, b = make_agent(spec, env), make_agent(spec, Twin(env.unwrapped))
    assert (a.posterior.name, dict(a.posterior.hyper), a.likelihood, a.auto_scale, a.head_prior) == \
           (b.posterior.name, dict(b.posterior.hyper), b.likelihood, b.auto_scale, b.head_prior)
    fb = env.unwrapped.stream(3, 20)
    key = jax.random.PRNGKey(3)
    sa = a.init(key, fb.contexts[fb.index[0]])
    sb = b.init(key, fb.contexts[fb.index[0]])
    for t in range(6):  # the same actions and states round by round
        ctx = fb.contexts[fb.index[t]]
        act_a, sa = a.act(jax.random.fold_in(key, t), sa, ctx)
        act_b, sb = b.act(jax.random.fold_in(key, t), sb, ctx)
        assert int(act_a) == int(act_b)
        sa = a.observe(sa, ctx, act_a, fb.rewards[t, act_a])
        sb = b.observe(sb, ctx, act_b, fb.rewards[t, act_b])
    assert _same_tree(sa, sb)


def test_a_compiled_run_never_touches_the_oracle_with_every_default_agent():
    x, r, _ = _small_problem()
    env = PoisonedEnv(bk.environments.from_arrays(x, r))
    specs = ["hilofi-thompson", "lofi-thompson", "lrkf-thompson", "linear-thompson", "neural_linear-thompson",
             "eps_greedy", "hilofi-ucb"]  # the demo's and the headline's default agents, and a UCB
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for spec in specs:
            agent = make_agent(spec, env)  # raises OracleTouched if make_agent reads the simulator
            df = bk.run(env, agent, steps=12, seeds=[0, 1], progress=False)
            assert len(df) == 24 and np.isfinite(df["reward"]).all(), spec
            assert df["regret"].isna().all() and df.attrs["regret"] is False, spec


def test_from_arrays_replays_each_seed_as_a_permutation_and_pays_the_chosen_arm_only():
    x, r, e = _small_problem(t=10)
    env = bk.environments.from_arrays(x, r, expected=e)
    s0, s1 = env.stream(0, 10), env.stream(1, 10)
    assert sorted(np.asarray(s0.index).tolist()) == list(range(10))
    assert not np.array_equal(np.asarray(s0.index), np.asarray(s1.index))
    np.testing.assert_array_equal(np.asarray(s0.rewards), r[np.asarray(s0.index)])
    np.testing.assert_array_equal(np.asarray(env.oracle(0, 10)), e[np.asarray(s0.index)])
    again = bk.environments.from_arrays(x, r, shuffle=False).stream(5, 13)
    assert np.asarray(again.index).tolist() == [*range(10), 0, 1, 2]
    # a run's regret is the oracle's, computed after the play
    df = bk.run(env, "linear-thompson", steps=10, seeds=[0], progress=False)
    idx = np.asarray(s0.index)
    a = df["action"].to_numpy()
    np.testing.assert_allclose(df["regret"], e[idx].max(1) - e[idx, a], rtol=1e-6)
    np.testing.assert_allclose(df["reward"], r[idx, a], rtol=1e-6)


def test_from_arrays_without_expected_reports_rewards_and_says_so():
    x, r, _ = _small_problem(t=20)
    env = bk.environments.from_arrays(x, r)
    assert not env.has_oracle
    with pytest.raises(ValueError, match="expected"):
        env.oracle(0, 5)
    with pytest.warns(UserWarning, match="no expected rewards"):
        df = bk.run(env, "linear-thompson", steps=20, seeds=[0], progress=False)
    assert df["regret"].isna().all() and np.isfinite(df["reward"]).all()


@pytest.mark.parametrize("bad, match", [
    (dict(contexts=np.zeros((5, 2)), rewards=np.zeros((4, 3))), "one row per context"),
    (dict(contexts=np.zeros((5, 2)), rewards=np.zeros((5, 1))), "at least 2 arms"),
    (dict(contexts=np.full((5, 2), np.nan), rewards=np.zeros((5, 3))), r"NaN .* rows \[0, 1, 2, 3, 4\]"),
    (dict(contexts=np.zeros((5, 2)), rewards=np.zeros((5, 3)), expected=np.zeros((5, 2))), "shape of rewards"),
])
def test_from_arrays_refuses_bad_tables_with_the_reason(bad, match):
    with pytest.raises(ValueError, match=match):
        bk.environments.from_arrays(**bad)


class PlainEnv(gym.Env):
    """A user's own Gymnasium env: a Discrete action space, no banditkit attributes, no oracle info keys."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._rng = np.random.default_rng(0)

    def reset(self, *, seed=None, options=None):
        self._rng = np.random.default_rng(seed)
        return self._rng.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        obs = self._rng.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(action == 1), False, False, {}


def test_a_plain_gymnasium_env_runs_in_the_gym_loop_without_oracle_keys():
    with pytest.warns(UserWarning, match="no expected rewards"):
        df = bk.run(PlainEnv(), "linear-thompson", steps=15, seeds=[0, 1], progress=False)
    assert len(df) == 30 and df["regret"].isna().all()
    assert set(df["reward"].unique()) <= {0.0, 1.0}


# -- the stream-adaptive pieces, known answers -------------------------------------------------------------------


def _linear_agent(**kw):
    return BanditAgent(MLP(features=(), out=2), "linear", "greedy", obs_noise=0.5, **kw)


def test_auto_scale_is_the_largest_reward_observed_so_far():
    agent = _linear_agent(reward_scale="auto")
    ctx = jnp.ones(3)
    st = agent.init(jax.random.PRNGKey(0), ctx)
    seen = []
    for r in [0.0, 2.0, -5.0, 3.0]:
        st = agent.observe(st, ctx, 0, r)
        seen.append(float(agent.scale_of(st)))
    assert seen == [1.0, 2.0, 5.0, 5.0]  # 1 before any non-zero reward


def test_auto_scale_equals_the_fixed_scale_once_the_first_reward_is_the_largest():
    rng = np.random.default_rng(1)
    ctxs = rng.normal(size=(8, 3)).astype(np.float32)
    rewards = [-7.0, *rng.uniform(-6, 6, 7)]
    a, b = _linear_agent(reward_scale="auto"), _linear_agent(reward_scale=7.0)
    key = jax.random.PRNGKey(0)
    sa, sb = a.init(key, ctxs[0]), b.init(key, ctxs[0])
    for c, r in zip(ctxs, rewards, strict=True):
        sa, sb = a.observe(sa, c, 1, r), b.observe(sb, c, 1, r)
    for x, y in zip(jax.tree_util.tree_leaves(sa.posterior), jax.tree_util.tree_leaves(sb.posterior), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7)  # r / s: one ulp apart


def test_unit_head_prior_is_set_from_the_first_context_at_the_agents_own_weights():
    agent = make_agent("hilofi-thompson", Twin(gym.make("banditkit/Mushroom-v0").unwrapped))
    assert agent.head_prior == "unit"
    ctx = jnp.asarray(np.random.default_rng(0).uniform(0, 1, 117), jnp.float32)
    key = jax.random.PRNGKey(4)
    st = agent.init(key, ctx)
    params = agent.model.init(jax.random.split(key)[0], ctx)
    phi = agent.model.apply(params, ctx, return_features=True)
    want = 1.0 / (float(jnp.sum(phi**2)) + 1.0)
    member = st.posterior.members[0]  # the noise mixture's members share the prior
    blocks = np.asarray(member.cov_last)
    np.testing.assert_allclose(blocks[0], np.sqrt(want) * np.eye(blocks.shape[-1]), rtol=1e-5)


def test_evidence_mixture_weights_are_the_exact_marginal_likelihoods_of_linear_gaussian_members():
    """For exact (linear-Gaussian) members the summed one-step predictive log densities are the marginal likelihood
    ``log N(y; X w0, X P0 Xᵀ + R I)``, so the mixture's weights are the members' exact posterior probabilities."""
    rng = np.random.default_rng(2)
    n, d = 12, 3
    x = rng.normal(size=(n, d))
    y = x @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    apply = lambda p, xi: xi @ p  # noqa: E731
    noises = (0.01, 0.1, 1.0)
    post = noise_mixture(lambda f, lik, **kw: linear(f, lik, init_cov=2.0), noises)(apply, Gaussian(1.0))
    st = post.init(jnp.zeros(d))
    for xi, yi in zip(x, y, strict=True):
        st = post.predict(post.update(st, jnp.asarray(xi, jnp.float32), jnp.asarray([yi], jnp.float32)))
    from scipy.stats import multivariate_normal

    logml = np.array([multivariate_normal(np.zeros(n), 2.0 * x @ x.T + r * np.eye(n)).logpdf(y) for r in noises])
    want = logml - np.logaddexp.reduce(logml)
    np.testing.assert_allclose(np.asarray(st.log_weights), want, atol=2e-3)


def test_evidence_mixture_draws_members_by_weight_and_refuses_one_member():
    apply = lambda p, xi: xi @ p  # noqa: E731
    members = [linear(apply, Gaussian(r), init_cov=1.0) for r in (0.1, 1.0)]
    post = evidence_mixture(members)
    st = post.init(jnp.zeros(2))
    st = st._replace(log_weights=jnp.log(jnp.array([1.0, 0.0]) + 1e-30))
    draws = jax.vmap(lambda k: post.sample(k, st))(jax.random.split(jax.random.PRNGKey(0), 4))
    assert draws.shape == (4, 2)
    with pytest.raises(ValueError, match="at least two members"):
        evidence_mixture(members[:1])


@pytest.mark.parametrize("backend", ["hilofi", "linear"])
def test_rescale_multiplies_the_outputs_and_their_variance_exactly(backend):
    """``rescale(state, c)`` is the posterior of ``c f``: predictive mean ``c ŷ`` and covariance ``c² (S − R) + R``
    (an affine head, its covariance in its own block) — what a learned reward scale relies on when it grows."""
    rng = np.random.default_rng(3)
    model = MLP(features=(8,), out=2) if backend == "hilofi" else MLP(features=(), out=2)
    agent = BanditAgent(model, backend, "thompson", obs_noise=0.05,
                        posterior_kwargs=dict(rank=4) if backend == "hilofi" else dict(noise="known"))
    ctx = jnp.asarray(rng.normal(size=3), jnp.float32)
    st = agent.init(jax.random.PRNGKey(0), ctx)
    for t in range(5):
        c_t = jnp.asarray(rng.normal(size=3), jnp.float32)
        st = agent.observe(st, c_t, t % 2, float(rng.normal()))
    post, c = agent.posterior, 2.5
    x = (ctx, jax.nn.one_hot(1, 2))  # the selected-output input of arm 1
    (m0, s0), (m1, s1) = post.predictive(st.posterior, x), post.predictive(post.rescale(st.posterior, c), x)
    np.testing.assert_allclose(np.asarray(m1), c * np.asarray(m0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(s1), c**2 * (np.asarray(s0) - 0.05) + 0.05, rtol=1e-4)


def test_a_growing_learned_scale_keeps_the_models_predictions_in_reward_units():
    agent = BanditAgent(MLP(features=(8,), out=2), "hilofi", "thompson", obs_noise=0.05, reward_scale="auto",
                        posterior_kwargs=dict(rank=4), rescale="mean")
    rng = np.random.default_rng(5)
    ctx = jnp.asarray(rng.normal(size=3), jnp.float32)
    st = agent.init(jax.random.PRNGKey(1), ctx)
    for t in range(6):
        st = agent.observe(st, jnp.asarray(rng.normal(size=3), jnp.float32), t % 2, float(rng.uniform(-2, 2)))
    x = (ctx, jax.nn.one_hot(0, 2))  # the selected-output input of arm 0
    before = float(agent.posterior.predictive(st.posterior, x)[0][0] * agent.scale_of(st))
    grown = agent.update(st, ctx, jnp.int32(1), jnp.float32(40.0))  # the scale jumps to 40 on this round
    assert float(agent.scale_of(grown)) == 40.0
    for cov in (True, False):  # "exact" and "mean" keep the mean prediction in reward units alike
        rescaled = agent.posterior.rescale(st.posterior, float(agent.scale_of(st)) / 40.0, cov)
        np.testing.assert_allclose(float(agent.posterior.predictive(rescaled, x)[0][0] * 40.0), before, rtol=1e-5)
    mean_only = agent.posterior.rescale(st.posterior, 0.5, False)
    assert _same_tree(mean_only.cov_last, st.posterior.cov_last)  # "mean": the head's uncertainty left as it was
