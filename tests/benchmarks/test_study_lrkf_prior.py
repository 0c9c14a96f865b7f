"""The lrkf_prior study (issue 55): the variants' priors (the constant, the rule recomputed from the agent's own prior
rows), the pre-registered verdict and the unpaired z, and the study at a tiny size."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from paired_rows import paired_rows

import banditkit as bk
from banditkit.agents import priors
from banditkit.agents.factory import DEFAULT_HYPER
from benchmarks.studies import lrkf_prior as study


def test_variants_build_the_constant_the_rule_and_linear_ts():
    env = gym.make("banditkit/Mushroom-v0", max_steps=40)
    const, default = study.agent_factory("const")(env), study.agent_factory("lrkf_unit")(env)
    assert study.CONST == DEFAULT_HYPER["lrkf"]["init_cov"] == 0.1  # make_agent's constant (the rule not adopted)
    assert bk.agents.make_agent("lrkf-thompson", env).posterior.hyper["init_cov"] == 0.1
    assert study._settings(const) == dict(init_cov=pytest.approx(0.1), rank=10, obs_noise=0.1, reward_scale=15.0)
    # `lrkf_unit`'s prior variance is the rule on the constant agent's own prior rows (Q = C_0 / ‖C_0‖_row does not
    # depend on init_cov): 25.7 on Mushroom, the value the README pre-registered
    value = study._settings(default)["init_cov"]
    assert value == pytest.approx(priors.unit_lowrank_prior(env.unwrapped, const), rel=1e-6)
    assert value == pytest.approx(25.7, abs=0.05)
    assert study._settings(default) == {**study._settings(const), "init_cov": value}  # nothing else changed
    linear = study._settings(study.agent_factory("linear")(env))
    assert np.isnan(linear["rank"])
    runs = {v: bk.run(env, study.agent_factory(v)(env), 40, [0, 1], compiled=True, progress=False)
            for v in ("const", "lrkf_unit")}
    assert not np.array_equal(runs["const"].action, runs["lrkf_unit"].action)  # the rule's prior is used
    with pytest.raises(ValueError, match="unknown variant"):
        study.agent_factory("default")


def _rows(diffs):
    return paired_rows(diffs, "const", "lrkf_unit")


def test_verdict_applies_the_preregistered_rule_with_wheel_outside():
    up, flat, down = [4.0, 6.0, 5.0], [1.0, -1.0, 0.5], [-4.0, -6.0, -5.0]
    ok = dict(Shuttle=up, Adult=flat, Mushroom=flat, MovieLens=flat, Wheel=flat)
    assert study.paired(_rows(dict(A=up)), "A")[2] == pytest.approx(5.0 / (1.0 / np.sqrt(3)))  # lrkf_unit − const
    assert study.paired(_rows(dict(A=up)), "A")[0] == pytest.approx(5.0)
    assert "ACCEPTED" in study.verdict(_rows(ok))
    assert "REJECTED" in study.verdict(_rows({**ok, "Adult": down}))  # a headline set worse
    assert "REJECTED" in study.verdict(_rows({**ok, "Shuttle": flat}))  # none better
    assert "REJECTED" in study.verdict(_rows({**ok, "Wheel": down}))  # the outside set worse
    assert "ACCEPTED" in study.verdict(_rows({**ok, "Shuttle": flat, "Wheel": up, "MovieLens": up}))
    assert "not decided" in study.verdict(_rows({k: v for k, v in ok.items() if k != "Wheel"}))
    # the headline's unpaired z against linear: (m_a − m_b) / √(se_a² + se_b²)
    r = pd.concat([_rows(dict(A=up)), pd.DataFrame(dict(env="A", variant="linear", seed=[0, 1, 2],
                                                         cum_reward=[100.0 + x for x in down]))])
    se = np.std(np.array(up), ddof=1) / np.sqrt(3)
    assert study.unpaired_z(r, "A", "lrkf_unit", "linear") == pytest.approx(10.0 / np.hypot(se, se))


def test_study_runs_at_a_tiny_size(tmp_path, capsys):
    argv = ["--envs", "Mushroom", "--variants", "lrkf_unit,linear", "--steps", "8", "--seeds", "2", "--out",
            str(tmp_path)]
    study.main(argv)
    assert "rule on Mushroom: init_cov 25.68 (const 0.1)" in capsys.readouterr().out  # the rule's value printed
    df = pd.read_csv(tmp_path / "lrkf_prior.csv")
    assert len(df) == 6 and set(df.variant) == {"const", "lrkf_unit", "linear"}  # const added: the pairing's base
    study.main(argv)  # rows already there are not run again
    assert len(pd.read_csv(tmp_path / "lrkf_prior.csv")) == 6
    table = (tmp_path / "lrkf_prior.md").read_text()
    assert "| Mushroom | `const` | 2 × 8 | 0.1 | 10 | 0.1 |" in table
    assert "| Mushroom | `lrkf_unit` | 2 × 8 | 25.7 | 10 | 0.1 |" in table and "not decided" in table
    study.main(["--render", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown variant"):
        study.main(["--variants", "default", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--envs"):
        study.main(["--envs", "Nowhere", "--out", str(tmp_path)])
