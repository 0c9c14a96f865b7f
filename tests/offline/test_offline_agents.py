"""Learning from logs and frozen agents on logged contexts: warm start = observe row by row, exact and Monte-Carlo
action probabilities, reward predictions, cross-fitting, and the OPE table with banditkit agents."""

import jax
import numpy as np
import pandas as pd
import pytest

import banditkit.offline as off
from banditkit.agents import BanditAgent
from banditkit.models import MLP
from banditkit.policies import epsilon_greedy

K, D, N = 3, 2, 40
RNG = np.random.default_rng(0)
W_TRUE = RNG.normal(size=(D, K))


def _log(n=N, seed=0, per_arm=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    p0 = np.array([0.5, 0.3, 0.2])
    a = rng.choice(K, size=n, p=p0)
    r = (x @ W_TRUE)[np.arange(n), a] + 0.1 * rng.normal(size=n)
    cols = {f"x{j}": x[:, j] for j in range(D)}
    if per_arm:  # arm k's features: x scaled by (k + 1)
        cols = {f"a{k}_x{j}": (k + 1) * x[:, j] for k in range(K) for j in range(D)}
    return off.from_frame(pd.DataFrame(cols | {"action": a, "reward": r, "propensity": p0[a]}), num_actions=K)


def _agent(policy="greedy", **kw):
    return BanditAgent(MLP(features=(), out=K), "ekf", policy, obs_noise=0.1,
                       posterior_kwargs=dict(init_cov=1.0), **kw)


def test_warm_start_equals_observe_row_by_row_then_continues_online():
    log = _log()
    agent = _agent()
    key = jax.random.PRNGKey(3)
    state = off.warm_start(agent, log, key)
    ref = agent.init(jax.random.split(key)[0], log.contexts[0])
    for x, a, r in zip(log.contexts, log.actions, log.rewards, strict=True):
        ref = agent.observe(ref, x, int(a), float(r))
    assert int(state.step) == int(ref.step) == N
    for got, want in zip(jax.tree_util.tree_leaves(state), jax.tree_util.tree_leaves(ref), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)
    action, state = agent.act(jax.random.PRNGKey(0), state, log.contexts[0])  # online from here
    state = agent.observe(state, log.contexts[0], action, 0.5)
    assert int(state.step) == N + 1


def test_importance_resampling_draws_rows_by_inverse_propensity():
    log = _log(n=3000, seed=1)
    rows = off.resample_rows(log, seed=0)
    assert np.all(np.diff(rows) >= 0) and len(rows) == len(log)  # log order kept
    share = np.bincount(log.actions[rows], minlength=K) / len(rows)
    np.testing.assert_allclose(share, np.full(K, 1 / K), atol=0.04)  # the resampled design looks uniform
    with pytest.raises(ValueError, match="weights must be"):
        off.resample_rows(log, weights=np.ones(3))


def test_agent_probabilities_exact_for_epsilon_greedy_and_monte_carlo_for_thompson():
    log = _log()
    eps = 0.2
    agent = _agent(epsilon_greedy(eps), reward_scale=2.0)
    state = off.warm_start(agent, log)
    q = off.predicted_rewards(agent, state, log.contexts)
    mean = agent.posterior.mean(state.posterior)["params"]["head"]
    want_q = 2.0 * (log.contexts @ np.asarray(mean["kernel"]) + np.asarray(mean["bias"]))
    np.testing.assert_allclose(q, want_q, rtol=1e-4, atol=1e-5)
    probs = off.agent_probabilities(agent, state, log.contexts)
    np.testing.assert_allclose(probs, (1 - eps) * np.eye(K)[q.argmax(1)] + eps / K, atol=1e-6)
    avail = np.ones((N, K), bool)
    avail[:, q.argmax(1)[0]] = False  # the greedy arm of row 0 unavailable everywhere
    masked = off.agent_probabilities(agent, state, log.contexts, available=avail)
    assert np.all(masked[~avail] == 0) and np.allclose(masked.sum(1), 1)

    ts = _agent("thompson")
    ts_state = off.warm_start(ts, log.subset(np.arange(5)))  # a vague belief: a spread-out choice
    draws = 2000
    p_ts = off.agent_probabilities(ts, ts_state, log.contexts[:1], jax.random.PRNGKey(1), num_draws=draws)
    assert np.allclose(p_ts.sum(1), 1) and np.allclose(p_ts * draws, np.round(p_ts * draws))
    acts = [int(ts.act(jax.random.PRNGKey(100 + i), ts_state, log.contexts[0])[0]) for i in range(300)]
    freq = np.bincount(acts, minlength=K) / len(acts)
    np.testing.assert_allclose(freq, p_ts[0], atol=4 * np.sqrt(0.25 / len(acts)))


def test_cross_fitted_reward_model_never_sees_the_row_it_predicts():
    log = _log()
    agent = _agent()
    q = off.reward_predictions(agent, log, folds=2)
    rewards = log.rewards.copy()
    rewards[0] += 100.0  # row 0 is in fold 0: its prediction comes from fold 1 only
    changed = off.from_arrays(log.contexts, log.actions, rewards, log.propensities, num_actions=K)
    q2 = off.reward_predictions(agent, changed, folds=2)
    np.testing.assert_allclose(q2[0], q[0], rtol=1e-6)
    assert np.abs(q2[1] - q[1]).max() > 1.0  # row 1 (fold 1) was predicted from fold 0, which holds row 0


def test_evaluate_with_agents_per_arm_log():
    log = _log(per_arm=True)
    assert log.per_arm
    agent = off.agent_for_log("ekf-greedy", log, model=MLP(features=(), out=1))  # a linear per-arm model
    assert agent.per_arm
    state = off.warm_start(agent, log)
    table = off.evaluate(log, {"greedy": (agent, state), "arm0": np.zeros(N, int)}, reward_model=(agent, state))
    assert table.attrs["exact_probabilities"] == {"greedy": True}
    dr = table[(table.policy == "greedy") & (table.estimator == "dr")].iloc[0]
    assert np.isfinite(dr.value) and dr.lower <= dr.value <= dr.upper
    with pytest.raises(ValueError, match="per-arm"):
        off.predicted_rewards(_agent(), _agent().init(jax.random.PRNGKey(0), np.zeros(D)), log.contexts)
