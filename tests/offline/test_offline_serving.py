"""Serving: action masks, logged propensities (exact for ε-greedy, Monte-Carlo for Thompson), batched / delayed
rewards, a persistent agent, runs that produce logs, and the ``evaluate`` / ``warmstart`` commands."""

import os

import jax
import numpy as np
import pandas as pd
import pytest

import banditkit as bk
import banditkit.offline as off
from banditkit.agents import BanditAgent
from banditkit.cli import main
from banditkit.models import MLP
from banditkit.offline import simulate as sim
from banditkit.offline.serving import ServingAgent
from banditkit.policies import epsilon_greedy

K, D = 4, 3
RNG = np.random.default_rng(0)
XS = RNG.normal(size=(30, D)).astype(np.float32)


def _agent(policy="thompson", **kw):
    return BanditAgent(MLP(features=(), out=K), "ekf", policy, obs_noise=0.1, posterior_kwargs=dict(init_cov=1.0),
                       **kw)


def _trained(agent, n=20):
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    acts = np.arange(n) % K
    return agent.observe_batch(state, XS[:n], acts, XS[:n, 0] * (acts == 1) + 0.5 * (acts == 2))


def test_masked_arms_are_never_chosen_even_in_the_warm_up():
    mask = np.array([True, False, True, False])
    for policy in ("thompson", epsilon_greedy(0.5)):
        agent = _agent(policy)
        state = _trained(agent)
        chosen = {int(agent.act(jax.random.PRNGKey(i), state, XS[i], mask=mask)[0]) for i in range(25)}
        assert chosen <= {0, 2}, (policy, chosen)
        probs = np.asarray(agent.action_probabilities(jax.random.PRNGKey(1), state, XS[0], mask=mask, num_draws=64))
        assert probs[~mask].sum() == 0 and probs.sum() == pytest.approx(1.0, abs=1e-6)
    warm = _agent("greedy", warmup_steps=8)
    state = warm.init(jax.random.PRNGKey(0), XS[0])
    pulled = []
    for t in range(8):
        a, state = warm.act(jax.random.PRNGKey(t), state, XS[t], mask=mask)
        assert float(warm.propensity(jax.random.PRNGKey(9), state, XS[t], a, mask=mask)) == 1.0
        pulled.append(int(a))
        state = warm.observe(state, XS[t], a, 0.0)
    assert pulled == [0, 2, 2, 0, 0, 2, 2, 0]  # round-robin over the available arms only
    with pytest.raises(ValueError, match="no arm available"):
        warm.act(jax.random.PRNGKey(0), state, XS[0], mask=np.zeros(K, bool))
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        warm.act(jax.random.PRNGKey(0), state, XS[0], mask=np.ones(3, bool))


def test_propensities_exact_for_epsilon_greedy_and_monte_carlo_for_thompson():
    eps = 0.3
    agent = _agent(epsilon_greedy(eps))
    state = _trained(agent)
    for i in range(5):
        key = jax.random.PRNGKey(i)
        a, _ = agent.act(key, state, XS[i])
        probs = np.asarray(agent.action_probabilities(key, state, XS[i]))
        greedy = int(np.argmax(probs))
        want = 1 - eps + eps / K if int(a) == greedy else eps / K
        assert float(agent.propensity(agent.propensity_key(key), state, XS[i], a)) == pytest.approx(want)
    ts = _agent("thompson")
    ts_state = _trained(ts, n=4)
    m = 99
    p = float(ts.propensity(jax.random.PRNGKey(5), ts_state, XS[0], 1, num_draws=m))
    assert 1 / (m + 1) <= p <= 1 and round(p * (m + 1)) == pytest.approx(p * (m + 1), abs=1e-4)


def test_run_records_exact_epsilon_greedy_propensities_and_makes_a_log():
    eps = 0.4
    env = "banditkit/Mushroom-v0"  # K = 2: the propensity is 1 - eps/2 (greedy arm) or eps/2
    spec = "linear-eps_greedy"
    kw = dict(steps=80, seeds=1, progress=False, propensities=True)
    df = bk.run(env, bk.agents.make_agent(spec, __import__("gymnasium").make(env), policy_kwargs=dict(epsilon=eps)),
                name=spec, **kw)
    assert df.attrs["timing"][spec]["propensity"] == "exact"
    np.testing.assert_allclose(np.sort(np.unique(df.propensity.round(6))), [eps / 2, 1 - eps / 2])
    assert 0.05 < np.mean(np.isclose(df.propensity, eps / 2)) < 0.45  # off-greedy rows: eps/2 = 20% expected
    log = sim.log_from_run(df, env)
    assert len(log) == 80 and log.propensities is not None
    np.testing.assert_array_equal(log.actions, df.action)
    with pytest.raises(ValueError, match="propensities must be"):
        bk.run(env, spec, steps=5, progress=False, propensities=-1)


def test_delayed_batch_observe_equals_one_by_one():
    agent = _agent()
    state = agent.init(jax.random.PRNGKey(0), XS[0])
    acts, rewards = np.arange(12) % K, RNG.normal(size=12)
    batched = agent.observe_batch(state, XS[:12], acts, rewards)
    one = state
    for x, a, r in zip(XS[:12], acts, rewards, strict=True):
        one = agent.observe(one, x, int(a), float(r))
    for got, want in zip(jax.tree_util.tree_leaves(batched), jax.tree_util.tree_leaves(one), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="one context, action and reward per round"):
        agent.observe_batch(state, XS[:3], acts[:2], rewards[:3])


def test_serving_agent_save_load_gives_the_same_next_action(tmp_path):
    srv = ServingAgent(_agent(), example_context=XS[0], seed=7)
    d = [srv.act(XS[i], available=[1, 1, 0, 1]) for i in range(4)]
    assert all(x.action != 2 for x in d) and all(0 < x.propensity <= 1 for x in d)
    srv.observe_many([d[2].ticket, d[0].ticket], [0.5, -0.2])  # late, out of order, in one batch
    path = srv.save(tmp_path / "srv" / "agent.bk")
    assert [p.name for p in (tmp_path / "srv").iterdir()] == ["agent.bk"]  # atomic: no temporary file left
    nxt = srv.act(XS[5])
    back = ServingAgent.load(path, _agent())
    assert back.pending == [d[1].ticket, d[3].ticket]
    assert back.act(XS[5]) == nxt
    back.observe(d[1].ticket, 1.0)
    with pytest.raises(KeyError, match="no pending decision with ticket 0"):
        back.observe(d[0].ticket, 1.0)
    hist = back.history()
    assert len(hist) == 1 and hist.available is not None and not hist.available[0, 2]


def _write_log(path, n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    p0 = np.array([0.4, 0.3, 0.2, 0.1])
    a = rng.choice(K, size=n, p=p0)
    r = x[:, 0] * (a == 1) + 0.5 * (a == 2) + 0.1 * rng.normal(size=n)
    df = pd.DataFrame({f"x{j}": x[:, j] for j in range(D)} | {"action": a, "reward": r, "propensity": p0[a]})
    return off.write_parquet(off.from_frame(df, num_actions=K), path), df


def test_evaluate_and_warmstart_commands(tmp_path, capsys):
    path, df = _write_log(tmp_path / "log.parquet")
    out = tmp_path / "ev"
    assert main(["evaluate", "--log", str(path), "--agents", "linear-greedy", "--out", str(out), "--quiet"]) == 0
    assert sorted(os.listdir(out)) == ["evaluate.csv", "evaluate.md", "evaluate.png"]
    table = pd.read_csv(out / "evaluate.csv")
    assert set(table.estimator) == {"dm", "ips", "snips", "dr", "sndr", "switch_dr", "on_policy"}
    assert "| linear-greedy | dr |" in capsys.readouterr().out
    assert main(["warmstart", "--log", str(path), "--agent", "linear-thompson", "--out", str(tmp_path)]) == 0
    srv = ServingAgent.load(tmp_path / "linear-thompson.bk")
    assert 0 <= srv.act(np.zeros(D)).action < K
    assert "s] read 120 rows, 4 arms" in capsys.readouterr().err  # progress lines on stderr (not with --quiet)
    bad = df.copy()
    bad.loc[[4, 9], "propensity"] = [0.0, 2.0]
    bad.to_csv(tmp_path / "bad.csv", index=False)
    assert main(["evaluate", "--log", str(tmp_path / "bad.csv"), "--agents", "linear", "--num-actions", "4"]) == 2
    err = capsys.readouterr().err
    assert "propensity must lie in (0, 1]" in err and "rows 4, 9" in err and len(err.strip().splitlines()) == 1
