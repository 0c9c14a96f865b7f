"""The lofi_noise study (issue 55): the variants' observation variances (make_agent's rule, the rule capped at 1e-3),
the pre-registered verdict, and the study at a tiny size."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from paired_rows import paired_rows

import banditkit as bk
from benchmarks.harness import oracle_units as scales
from benchmarks.studies import lofi_noise as study


def test_variants_build_the_rule_the_capped_rule_and_linear_ts():
    env = gym.make("banditkit/Mushroom-v0", max_steps=40)
    rule, capped = study.agent_factory("rule")(env), study.agent_factory("lofi_cap")(env)
    # Mushroom: the rule sits at its cap 0.1 (the reward's noise variance is 0.42); the variant caps it at 1e-3
    assert scales.default_obs_noise(env) == pytest.approx(0.1)
    assert study._settings(rule) == dict(obs_noise=pytest.approx(0.1), init_cov=pytest.approx(0.01), rank=10,
                                         reward_scale=15.0)
    assert study._settings(capped) == {**study._settings(rule), "obs_noise": pytest.approx(1e-3)}  # nothing else
    # an environment whose rule is below the cap keeps it (the cap is a min, not a constant)
    wheel = gym.make("banditkit/Wheel-v0", max_steps=40)
    assert study.capped_noise(wheel) == min(scales.default_obs_noise(wheel), 1e-3)
    assert np.isnan(study._settings(study.agent_factory("linear")(env))["rank"])
    runs = {v: bk.run(env, study.agent_factory(v)(env), 40, [0, 1], compiled=True, progress=False)
            for v in ("rule", "lofi_cap")}
    assert not np.array_equal(runs["rule"].action, runs["lofi_cap"].action)  # the capped variance is used
    with pytest.raises(ValueError, match="unknown variant"):
        study.agent_factory("default")


def _rows(diffs):
    return paired_rows(diffs, "rule", "lofi_cap")


def test_verdict_applies_the_preregistered_rule():
    up, flat, down = [4.0, 6.0, 5.0], [1.0, -1.0, 0.5], [-4.0, -6.0, -5.0]
    ok = dict(Shuttle=up, Adult=up, Mushroom=flat, MovieLens=flat, Wheel=flat, FashionMNIST=flat)
    assert study.paired(_rows(dict(A=up)), "A")[2] == pytest.approx(5.0 / (1.0 / np.sqrt(3)))  # lofi_cap − rule
    assert "ACCEPTED" in study.verdict(_rows(ok))
    assert "REJECTED" in study.verdict(_rows({**ok, "Adult": flat}))  # one headline set better: two needed
    assert "REJECTED" in study.verdict(_rows({**ok, "Mushroom": down}))  # a headline set worse
    assert "REJECTED" in study.verdict(_rows({**ok, "FashionMNIST": down}))  # an outside set worse
    # gains outside the headline sets do not count towards the two
    assert "REJECTED" in study.verdict(_rows({**ok, "Adult": flat, "Wheel": up, "FashionMNIST": up}))
    assert "not decided" in study.verdict(_rows({k: v for k, v in ok.items() if k != "FashionMNIST"}))


def test_study_runs_at_a_tiny_size(tmp_path, capsys):
    argv = ["--envs", "Mushroom", "--variants", "lofi_cap,linear", "--steps", "8", "--seeds", "2", "--out",
            str(tmp_path)]
    study.main(argv)
    assert "Mushroom: R_rule 0.1, lofi_cap 0.001" in capsys.readouterr().out
    df = pd.read_csv(tmp_path / "lofi_noise.csv")
    assert len(df) == 6 and set(df.variant) == {"rule", "lofi_cap", "linear"}  # rule added: the pairing's base
    study.main(argv)  # rows already there are not run again
    assert len(pd.read_csv(tmp_path / "lofi_noise.csv")) == 6
    table = (tmp_path / "lofi_noise.md").read_text()
    assert "| Mushroom | `rule` | 2 × 8 | 0.1 | 0.01 | 10 |" in table
    assert "| Mushroom | `lofi_cap` | 2 × 8 | 0.001 | 0.01 | 10 |" in table and "not decided" in table
    study.main(["--render", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="unknown variant"):
        study.main(["--variants", "default", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--envs"):
        study.main(["--envs", "Nowhere", "--out", str(tmp_path)])
