"""The warm-start suite: end to end at a tiny size, its scratch lanes equal the compiled runner, a log that already
names the best arm lowers the online regret, a NaN agent state is flagged, the paired summary's arithmetic, and
clear errors for bad options."""

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import banditkit as bk
from banditkit.agents import make_agent
from banditkit.offline import simulate as sim
from benchmarks.suites import warmstart as W

SPEC = "linear-thompson"
FACTORY = {SPEC: lambda env: make_agent(SPEC, env)}


def test_suite_runs_end_to_end_and_writes_its_table(tmp_path):
    W.main(["--envs", "shuttle", "--agents", SPEC, "--seeds", "1", "--log-rounds", "50", "--online-rounds", "50",
            "--out", str(tmp_path)])
    for suffix in (".md", ".csv", "_seeds.csv", "_curve.csv", ".png"):
        assert (tmp_path / f"warmstart{suffix}").exists(), suffix
    table = pd.read_csv(tmp_path / "warmstart.csv")
    assert list(table[["env", "agent", "seeds", "log_rounds", "online_rounds"]].itertuples(index=False, name=None)) \
        == [("shuttle", SPEC, 1, 50, 50)]
    seeds = pd.read_csv(tmp_path / "warmstart_seeds.csv")
    assert sorted(seeds.start) == ["scratch", "warm"]
    r = table.iloc[0]
    scratch, warm = (seeds.set_index("start").cum_regret[k] for k in ("scratch", "warm"))
    assert (r.scratch_regret, r.warm_regret, r.warm_minus_scratch) == pytest.approx((scratch, warm, warm - scratch))
    curve = pd.read_csv(tmp_path / "warmstart_curve.csv")
    last = curve[curve.step == 49].set_index("start").cum_regret
    assert (last["scratch"], last["warm"]) == pytest.approx((scratch, warm))
    md = (tmp_path / "warmstart.md").read_text()
    assert "**Command (this table):**" in md and "**Machine:**" in md and "| shuttle | real (UCI Statlog Shuttle" in md


def test_scratch_lanes_are_the_compiled_runner_and_share_its_keys():
    env = gym.make("banditkit/Shuttle-v0")
    _, curves = W.run_env(env, FACTORY, [0, 3], 20, 40)
    df = bk.run(gym.make("banditkit/Shuttle-v0", max_steps=40), make_agent(SPEC, env), 40, seeds=[0, 3],
                progress=False)
    for i, s in enumerate([0, 3]):
        ref = df[df.seed == s].sort_values("step").cumulative_regret.to_numpy()
        np.testing.assert_allclose(curves[(SPEC, "scratch")][i], ref, rtol=0, atol=1e-4)


def test_a_log_that_names_the_best_arm_lowers_the_online_regret():
    # the wheel bandit with delta = 1: no context reaches the outer ring, so arm 4 (mean 1.2) beats arms 0-3 (1.0)
    # in every round by 0.2 (noise s.d. 0.05); a 500-round uniform log shows each arm ~100 times, enough for the
    # posterior to put arm 4 first, while the agent from scratch still explores over the 40 online rounds
    env = gym.make("banditkit/Wheel-v0", delta=1.0)
    rows, curves = W.run_env(env, FACTORY, [0, 1], 500, 40)
    per = rows.pivot(index="seed", columns="start", values="cum_regret")
    assert np.all(per["warm"] < per["scratch"]), per
    # the warm agent already plays arm 4: at most two of its 40 rounds cost 0.2 each
    assert np.all(per["warm"] <= 0.2 * 2 + 1e-5), per
    assert np.all(per["scratch"] >= 0.2 * 10 - 1e-5), per  # scratch pulls a worse arm in at least 10 rounds
    np.testing.assert_allclose(rows.uniform_regret, 40 * 0.2 * 4 / 5, rtol=1e-6)


def test_summary_pairs_seeds():
    rows = pd.DataFrame(dict(
        env="e", data="real", agent="a", seed=[0, 1, 2, 0, 1, 2], start=["scratch"] * 3 + ["warm"] * 3,
        cum_regret=[10.0, 20.0, 30.0, 7.0, 19.0, 24.0], uniform_regret=50.0, finite=True, log_rounds=5,
        online_rounds=5, warm_start_s=0.0, online_s=1.0))
    s = W.summary(rows).iloc[0]
    d = np.array([-3.0, -1.0, -6.0])
    assert (s.scratch_regret, s.warm_regret, s.warm_minus_scratch) == pytest.approx((20.0, 50.0 / 3, d.mean()))
    assert s.warm_minus_scratch_se == pytest.approx(d.std(ddof=1) / np.sqrt(3))
    assert s.scratch_regret_se == pytest.approx(10.0 / np.sqrt(3))
    assert s.warm_better_seeds == 3


def test_bad_options_say_what_to_choose():
    with pytest.raises(SystemExit, match="unknown or no envs.*choose from"):
        W.main(["--envs", "shutle"])
    with pytest.raises(SystemExit, match="unknown or no agents.*choose from"):
        W.main(["--agents", "ucb"])
    with pytest.raises(SystemExit, match="--log-rounds must be >= 1"):
        W.main(["--log-rounds", "0"])


def test_online_lanes_flag_a_nan_agent_state():
    import jax
    import jax.numpy as jnp

    env = gym.make("banditkit/Wheel-v0", delta=1.0)
    agent = make_agent(SPEC, env)
    xs, rs, qs = sim.episode(env, 0, 3)
    good = agent.init(jax.random.PRNGKey(0), xs[0])
    bad = good._replace(posterior=jax.tree_util.tree_map(
        lambda v: jnp.full_like(v, jnp.nan) if jnp.issubdtype(v.dtype, jnp.floating) else v, good.posterior))
    lanes = lambda a: np.stack([np.asarray(a, np.float32)] * 2)
    finite, actions, regret = W.online_runner(agent)(
        W._stack([good, bad]), lanes(xs), lanes(rs), lanes(qs), jnp.stack([jax.random.PRNGKey(1)] * 2))
    assert np.asarray(finite).tolist() == [True, False]
    assert np.asarray(actions).shape == np.asarray(regret).shape == (2, 3)
