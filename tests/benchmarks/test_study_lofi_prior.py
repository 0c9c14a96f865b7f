"""The lofi_prior study (issue 55): the per-layer prior tree against a hand forward pass, the per-layer path
reproducing the constant prior's run, the pre-registered verdict, the headline check, and both parts at a tiny size."""

from __future__ import annotations

import gymnasium as gym
import jax
import numpy as np
import pandas as pd
import pytest
from paired_rows import paired_rows

import banditkit as bk
from banditkit.agents import priors
from benchmarks.studies import lofi_prior as study


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def test_unit_tree_puts_the_unit_head_variance_on_the_head_and_the_constant_elsewhere():
    env = gym.make("banditkit/Mushroom-v0", max_steps=16)
    tree, value = study.unit_tree(env)
    model, _ = bk.agents.factory.default_model(env.unwrapped, "lofi")
    contexts = priors.logged_rounds(env.unwrapped, priors.ROUNDS)[0]
    params = model.init(jax.random.PRNGKey(0), contexts[0])
    assert jax.tree_util.tree_structure(tree) == jax.tree_util.tree_structure(params)
    # σ_ℓ² = 1 / E[‖φ‖² + 1] with φ by a forward pass of the two ELU layers at the initial weights
    h = np.asarray(contexts, np.float64)
    for layer in ("dense_0", "dense_1"):
        p = params["params"][layer]
        h = _elu(h @ np.asarray(p["kernel"], np.float64) + np.asarray(p["bias"], np.float64))
    assert value == pytest.approx(1.0 / (np.mean(np.sum(h**2, axis=1)) + 1.0), rel=1e-4)
    assert 0.1 < value < 0.25  # 0.16, the value the README pre-registered
    t = tree["params"]
    assert t["head"]["kernel"] == t["head"]["bias"] == value
    assert all(t[layer][w] == 0.01 for layer in ("dense_0", "dense_1") for w in ("kernel", "bias"))
    # the agent starts from Υ₀ = diag(1 / TREE): the head's precision 1 / σ_ℓ², every other weight 100
    agent = study.agent_factory("lofi_unit")(env)
    prec = np.asarray(agent.init(jax.random.PRNGKey(0), contexts[0]).posterior.prec_diag)
    head = np.asarray(jax.flatten_util.ravel_pytree(jax.tree_util.tree_map_with_path(
        lambda path, leaf: np.full(np.shape(leaf), "head" in jax.tree_util.keystr(path)), params))[0]).astype(bool)
    assert head.sum() == 102 and prec.size == 8552
    np.testing.assert_allclose(prec[head], 1.0 / value, rtol=1e-6)
    np.testing.assert_allclose(prec[~head], 100.0, rtol=1e-6)


def test_settings_and_the_per_layer_path_at_the_constant_reproduce_the_default_run():
    steps, seeds = 40, [0, 1]
    env = gym.make("banditkit/Mushroom-v0", max_steps=steps)
    base = study._settings(study.agent_factory("default")(env))
    assert base == dict(init_cov_head=0.01, init_cov_hidden=0.01, rank=10, obs_noise=0.1, reward_scale=15.0)
    assert study._settings(study.agent_factory("head=0.3")(env)) == {**base, "init_cov_head": 0.3}
    assert study._settings(study.agent_factory("lofi_unit")(env)) == {
        **base, "init_cov_head": pytest.approx(study.unit_tree(env)[1])}
    runs = {v: bk.run(env, study.agent_factory(v)(env), steps, seeds, compiled=True, progress=False)
            for v in ("default", "head=0.01", "head=0.3")}
    np.testing.assert_array_equal(runs["default"].action, runs["head=0.01"].action)  # the same prior, two paths
    assert not np.array_equal(runs["default"].action, runs["head=0.3"].action)  # the head's prior is used
    with pytest.raises(ValueError, match="unknown variant"):
        study.variant_kwargs("temperature=2", env)
    with pytest.raises(ValueError, match="per-arm"):
        study.default_params(_PerArm())  # one output per (context, arm): no per-arm head to split


class _PerArm:
    num_actions, per_arm_features, default_model = 3, True, "mlp"


def _rows(diffs, variant="lofi_unit"):
    return paired_rows(diffs, "default", variant)


def test_verdict_applies_the_preregistered_rule_with_the_outside_sets():
    up, flat, down = [4.0, 6.0, 5.0], [1.0, -1.0, 0.5], [-4.0, -6.0, -5.0]
    ok = dict(Shuttle=up, Adult=flat, Mushroom=flat, MovieLens=flat, Wheel=flat, FashionMNIST=up)
    assert study.paired(_rows(dict(A=up)), "A", "lofi_unit")[2] == pytest.approx(5.0 / (1.0 / np.sqrt(3)))
    assert "ACCEPTED" in study.verdict(_rows(ok))
    assert "REJECTED" in study.verdict(_rows({**ok, "Adult": down}))  # a headline set worse
    assert "REJECTED" in study.verdict(_rows({**ok, "Shuttle": flat}))  # none better
    assert "REJECTED" in study.verdict(_rows({**ok, "Wheel": down}))  # an outside set worse
    assert "ACCEPTED" in study.verdict(_rows({**ok, "Shuttle": flat, "FashionMNIST": up, "MovieLens": up}))
    assert "not decided" in study.verdict(_rows({k: v for k, v in ok.items() if k != "FashionMNIST"}))
    # the headline's unpaired z: (m_a − m_b) / √(se_a² + se_b²)
    r = _rows(dict(A=up), variant="linear")
    se = np.std(100.0 + np.array(up), ddof=1) / np.sqrt(3)
    assert study.unpaired_z(r, "A", "default", "linear") == pytest.approx(-5.0 / se)


def test_headline_check_says_identical_or_names_the_seeds_that_differ(tmp_path):
    pd.DataFrame(dict(agent=["lofi_ts"] * 2 + ["linear_ts"] * 2, seed=[0, 1, 0, 1],
                      cum_reward=[100.0, 104.0, 90.0, 91.0])).to_csv(tmp_path / "headline_adult_seeds.csv")
    rows = pd.concat([_rows(dict(Adult=[4.0, 0.0])), pd.DataFrame(dict(
        env="Adult", variant="linear", seed=[0, 1], steps=5000, cum_reward=[90.0, 92.0]))])
    got = study.headline_check(rows, str(tmp_path / "headline_{}_seeds.csv"))
    assert len(got) == 2 and "`default`" in got[0] and "differs** on seeds [1]" in got[0]  # 100 vs 104 on seed 1
    assert "`linear`" in got[1] and "differs** on seeds [1]" in got[1]
    rows.loc[(rows.variant == "default") & (rows.seed == 1), "cum_reward"] = 104.0
    assert "**identical**" in study.headline_check(rows, str(tmp_path / "headline_{}_seeds.csv"))[0]


def test_study_runs_both_parts_at_a_tiny_size(tmp_path, capsys):
    argv = ["--envs", "Mushroom", "--variants", "lofi_unit,linear", "--steps", "8", "--seeds", "2",
            "--out", str(tmp_path)]
    study.main(argv)
    assert "lofi_unit on Mushroom: head prior variance 0.16" in capsys.readouterr().out  # the rule's value printed
    df = pd.read_csv(tmp_path / "lofi_prior.csv")
    assert len(df) == 6 and set(df.variant) == {"default", "lofi_unit", "linear"}  # default added
    study.main(argv)  # rows already there are not run again
    assert len(pd.read_csv(tmp_path / "lofi_prior.csv")) == 6
    table = (tmp_path / "lofi_prior.md").read_text()
    assert "| Mushroom | `lofi_unit` | 2 × 8 | 0.161 | 0.01 | 10 | 0.1 |" in table and "not decided" in table
    study.main(["--part", "trace", "--envs", "Mushroom", "--variants", "default,lofi_unit", "--steps", "8",
                "--seeds", "1", "--draws", "2", "--out", str(tmp_path)])
    tr = pd.read_csv(tmp_path / "lofi_prior_trace.csv")
    assert set(tr.variant) == {"default", "lofi_unit"} and set(tr.window) == {"0-8"}
    text = (tmp_path / "lofi_prior_trace.md").read_text()
    assert text.startswith("# LoFi-TS round by round") and "| Mushroom | `lofi_unit` | 0-8 | 1 |" in text
    study.main(["--render", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown variant"):
        study.main(["--variants", "temperature=2", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--envs"):
        study.main(["--envs", "Nowhere", "--out", str(tmp_path)])
