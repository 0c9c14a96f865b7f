"""The hilofi_gap study (issue 55): the head-prior rule's arithmetic, the variants' keywords, the trace replaying the
compiled runner's own actions, the pre-registered verdict, and both parts at a tiny size."""

from __future__ import annotations

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import banditkit as bk
from banditkit.agents import priors
from benchmarks.harness import oracle_units as scales
from benchmarks.studies import hilofi_gap as study


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def test_head_prior_matches_its_formula_on_mushroom():
    env = gym.make("banditkit/Mushroom-v0", max_steps=16)
    got = study.head_prior(env)
    # the pieces, recomputed by hand: y = r / s of the uniform log, R, and φ by a forward pass of the two ELU layers
    s, r = scales.units(env.unwrapped)
    assert s == 15.0 and got["obs_noise"] == r == 0.1  # Mushroom's scale max|E r| = 15, R at its cap
    contexts, _, y = priors.logged_rounds(env.unwrapped, study.ROUNDS, 0, s)
    assert got["m2"] == pytest.approx(float(np.mean(np.asarray(y, np.float64) ** 2)), rel=1e-12)
    # every observed reward is 0, 1/3 or -7/3 (skip; eat an edible or a lucky poisonous one; an unlucky one)
    assert set(np.round(np.asarray(y) * 3).astype(int).tolist()) <= {0, 1, -7}
    model, _ = bk.agents.factory.default_model(env.unwrapped, "hilofi")
    params = model.init(jax.random.PRNGKey(0), contexts[0])["params"]
    h = np.asarray(contexts, np.float64)
    for layer in ("dense_0", "dense_1"):
        h = _elu(h @ np.asarray(params[layer]["kernel"], np.float64) + np.asarray(params[layer]["bias"], np.float64))
    phi2 = float(np.mean(np.sum(h**2, axis=1)) + 1.0)
    assert got["phi2"] == pytest.approx(phi2, rel=1e-4)
    # head_m2: the head's prior predictive variance plus R equals the observed reward's second moment
    assert got["init_cov_last"] * got["phi2"] + got["obs_noise"] == pytest.approx(got["m2"], rel=1e-12)
    assert 0.05 < got["init_cov_last"] < 0.2  # 0.11, the value the README pre-registered
    # head_unit: the head's prior predictive variance equals 1, the largest expected reward after scaling
    assert got["unit"] * got["phi2"] == pytest.approx(1.0, rel=1e-12) and 0.1 < got["unit"] < 0.25  # 0.16


def test_head_prior_floors_at_R_when_R_holds_the_whole_second_moment(monkeypatch):
    env = gym.make("banditkit/Mushroom-v0", max_steps=16)
    monkeypatch.setattr(study.scales, "units", lambda u: (15.0, 5.0))  # R far above E[y²] ≈ 0.8
    got = study.head_prior(env)
    assert got["m2"] < 5.0 and got["init_cov_last"] == pytest.approx(5.0 / got["phi2"], rel=1e-12)


def test_variant_keywords_change_one_setting_each():
    env = gym.make("banditkit/Mushroom-v0", max_steps=16)

    def settings(v):
        return study._settings(study.agent_factory(v)(env))

    base = settings("default")  # make_agent's default, whatever its head prior (1.0, or the unit-head rule)
    assert {k: v for k, v in base.items() if k != "init_cov_last"} == dict(init_cov_hidden=0.01, rank=10,
                                                                          obs_noise=0.1, reward_scale=15.0)
    assert settings("last=1.0") == {**base, "init_cov_last": 1.0}  # the constant default of the study's tables
    assert settings("last=0.3") == {**base, "init_cov_last": 0.3}
    assert settings("hidden=0.1") == {**base, "init_cov_hidden": 0.1}
    assert settings("rank=4") == {**base, "rank": 4}
    assert settings("R=0.45") == {**base, "obs_noise": 0.45}
    assert settings("head_m2")["init_cov_last"] == pytest.approx(study.head_prior(env)["init_cov_last"])
    assert settings("head_unit") == {**base, "init_cov_last": pytest.approx(study.head_prior(env)["unit"])}
    assert study.agent_factory("warmup=6")(env).warmup_steps == 6
    assert study.agent_factory("adaptive")(env).posterior_name != "hilofi"  # the learned-noise wrapper
    spread = settings("spread=4")
    assert spread["obs_noise"] == pytest.approx(0.4) and spread["init_cov_hidden"] == pytest.approx(0.04)
    assert spread["init_cov_last"] == pytest.approx(4.0 * base["init_cov_last"])
    assert study.agent_factory("linear")(env).posterior_name == "linear"
    with pytest.raises(ValueError, match="unknown variant"):
        study.variant_kwargs("temperature=2", env)


def test_head_range_centres_the_head_on_the_expected_rewards_range():
    env = gym.make("banditkit/Mushroom-v0", max_steps=40)
    lo, hi = study.reward_range(env)
    assert (lo, hi) == pytest.approx((-1.0, 1.0 / 3.0))  # E r in {-15, 0, 5} / s = 15: poisonous eaten, skip, edible
    default, ranged = study.agent_factory("default")(env), study.agent_factory("head_range")(env)
    # the head's variance: the default's unit-head prior times the squared half-range; the rest as make_agent sets it
    want = ((hi - lo) / 2) ** 2 * default.posterior.hyper["init_cov_last"]
    assert ranged.posterior.hyper["init_cov_last"] == pytest.approx(want)
    assert ranged.posterior.hyper["arms"] == default.posterior.hyper["arms"] == 2 and ranged.affine_head
    assert study._settings(ranged) == {**study._settings(default), "init_cov_last": pytest.approx(want)}
    # the prior mean: the same weights with the head's bias moved to the midpoint
    key, x = jax.random.PRNGKey(3), np.zeros(117, np.float32)
    p0, p1 = default.model.init(key, x), ranged.model.init(key, x)
    np.testing.assert_allclose(p1["params"]["head"]["bias"], p0["params"]["head"]["bias"] + (hi + lo) / 2)
    np.testing.assert_array_equal(p1["params"]["dense_0"]["kernel"], p0["params"]["dense_0"]["kernel"])


def test_trace_replays_the_compiled_runners_actions():
    steps, seeds = 30, [0, 1]
    env = gym.make("banditkit/Mushroom-v0", max_steps=steps)
    agent = study.agent_factory("default")(env)
    df = bk.run(env, agent, steps, seeds, compiled=True, progress=False)
    for seed in seeds:
        tr = study.trace(agent, env, seed, steps, draws=4)
        ran = df[df.seed == seed].sort_values("step")
        np.testing.assert_array_equal(tr["action"], ran["action"].to_numpy())
        np.testing.assert_allclose(tr["reward"], ran["reward"].to_numpy())
        assert tr["mean"].shape == tr["spread"].shape == (steps, 2) and np.all(tr["spread"] > 0)


def test_trace_rows_count_each_kind_of_wrong_arm():
    # 4 rounds, two arms: best arm 1, 1, 0, 0; played 0, 1, 1, 0 -> one "0 over 1", one "1 over 0"
    expected = np.array([[0.0, 5.0], [0.0, 5.0], [0.0, -15.0], [0.0, -15.0]])
    tr = dict(action=np.array([0, 1, 1, 0]), reward=np.array([0.0, 5.0, -35.0, 0.0]), expected=expected,
              mean=expected / 15.0 + 0.1, spread=np.full((4, 2), 0.1))
    (row,) = study.trace_rows(tr, 15.0)
    assert row["rounds"] == 4 and row["worse_arm"] == 2 and row["played_1_best_0"] == 1 and row["played_0_best_1"] == 1
    assert row["regret"] == 20.0 and row["reward"] == -30.0
    assert row["rms_z"] == pytest.approx(1.0) and row["abs_err_best"] == pytest.approx(0.1)
    # the two wrong rounds' (μ_best − μ_played) / √(2 · 0.1²): (1/3 + 0.1 − 0.1) / 0.1414 and (0.1 + 0.9) / 0.1414
    assert row["gap_z_worse"] == pytest.approx(np.median([1 / 3, 1.0]) / np.hypot(0.1, 0.1))


def test_verdict_applies_the_preregistered_rule():
    def rows(diffs):
        out = []
        for env, d in diffs.items():
            for seed, x in enumerate(d):
                out += [dict(env=env, variant="default", seed=seed, cum_reward=100.0),
                        dict(env=env, variant="head_m2", seed=seed, cum_reward=100.0 + x)]
        return pd.DataFrame(out)

    up, flat, down = [4.0, 6.0, 5.0], [1.0, -1.0, 0.5], [-4.0, -6.0, -5.0]
    assert study.paired(rows(dict(A=up)), "A", "head_m2")[2] == pytest.approx(5.0 / (1.0 / np.sqrt(3)))
    assert "ACCEPTED" in study.verdict(rows(dict(A=up, B=flat)), "head_m2", ["A", "B"])
    assert "REJECTED" in study.verdict(rows(dict(A=up, B=down)), "head_m2", ["A", "B"])  # one set worse
    assert "REJECTED" in study.verdict(rows(dict(A=flat, B=flat)), "head_m2", ["A", "B"])  # none better
    assert "not decided" in study.verdict(rows(dict(A=up)), "head_m2", ["A", "B"])


def test_study_runs_both_parts_at_a_tiny_size(tmp_path):
    argv = ["--envs", "Mushroom", "--variants", "last=0.1", "--steps", "8", "--seeds", "2", "--out", str(tmp_path)]
    study.main(argv)
    df = pd.read_csv(tmp_path / "hilofi_gap.csv")
    assert len(df) == 4 and set(df.variant) == {"default", "last=0.1"} and set(df.seed) == {0, 1}  # default added
    study.main(argv)  # rows already there are not run again
    assert len(pd.read_csv(tmp_path / "hilofi_gap.csv")) == 4
    table = (tmp_path / "hilofi_gap.md").read_text()
    assert "| Mushroom | `last=0.1` | 2 × 8 | 0.1 |" in table
    study.main(["--part", "trace", "--envs", "Mushroom", "--variants", "default,linear", "--steps", "8", "--seeds", "1",
                "--draws", "2", "--out", str(tmp_path)])
    tr = pd.read_csv(tmp_path / "hilofi_gap_trace.csv")
    assert set(tr.variant) == {"default", "linear"} and set(tr.window) == {"0-8"}
    assert "| Mushroom | `linear` | 0-8 | 1 |" in (tmp_path / "hilofi_gap_trace.md").read_text()
    study.main(["--render", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown variant"):
        study.main(["--variants", "temperature=2", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--envs"):
        study.main(["--envs", "Nowhere", "--out", str(tmp_path)])


def test_head_features_is_the_heads_input():
    env = gym.make("banditkit/Shuttle-v0", max_steps=4)
    model, _ = bk.agents.factory.default_model(env.unwrapped, "hilofi")
    x = jnp.ones((3, 9))
    params = model.init(jax.random.PRNGKey(1), x[0])
    phi = study.head_features(model, params, x)
    head = params["params"]["head"]
    out = phi @ np.asarray(head["kernel"]) + np.asarray(head["bias"])
    np.testing.assert_allclose(out, np.asarray(jax.vmap(lambda c: model.apply(params, c))(x)), rtol=1e-5, atol=1e-6)
