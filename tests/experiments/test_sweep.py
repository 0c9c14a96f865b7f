"""bk.sweep: a hyper-parameter × seed grid in one compiled program equals the same points run one by one."""


import numpy as np
import pandas as pd
import pytest
from toys import ToyBandit

import banditkit as bk
from banditkit.experiments import grid as G
from banditkit.experiments.sweep import sweep
from banditkit.models import MLP


def TinyBandit():  # noqa: N802  (the sweep tests' bandit: a smaller pool, noisier rewards)
    return ToyBandit(pool=40, noise=0.3)


SPEC = "ekf-ts"
STEPS, SEEDS, CHUNK = 30, [0, 1], 10
GRID = {"obs_noise": [0.05, 0.5], "init_cov": [0.3, 1.0]}


def model():
    return MLP(features=(5,), out=3)


def run_sweep(**kwargs):
    return sweep(SPEC, TinyBandit(), GRID, seeds=SEEDS, steps=STEPS, model=model(), chunk_size=CHUNK, progress=False,
                 **kwargs)


@pytest.fixture(scope="module")
def swept():
    return run_sweep()


def test_frame_has_one_column_per_axis_and_every_lane(swept):
    df = swept
    assert list(df.columns[:3]) == ["agent", "obs_noise", "init_cov"]
    assert set(bk.experiments.COLUMNS) <= set(df.columns)
    assert len(df) == 4 * len(SEEDS) * STEPS
    assert df.attrs["sweep_axes"] == ["obs_noise", "init_cov"]
    sizes = df.groupby(["obs_noise", "init_cov", "seed"]).size()
    assert len(sizes) == 4 * len(SEEDS) and (sizes == STEPS).all()
    t = df.attrs["timing"][SPEC]
    assert (t["configs"], t["seeds"], t["lanes"]) == (4, 2, 8)


@pytest.mark.parametrize("point", [(0.05, 1.0), (0.5, 0.3)])
def test_each_grid_point_equals_its_own_run(swept, point):
    """Same seeds, same numbers: the actions are identical and the regrets equal to float32 rounding (a traced
    hyper-parameter may round differently in the last bit from a constant that XLA folds)."""
    obs_noise, init_cov = point
    env = TinyBandit()
    agent = bk.agents.make_agent(SPEC, env, model=model(), obs_noise=obs_noise,
                                 posterior_kwargs=dict(init_cov=init_cov))
    ref = bk.run(env, agent, STEPS, SEEDS, chunk_size=CHUNK, progress=False)
    got = swept[(swept.obs_noise == obs_noise) & (swept.init_cov == init_cov)]
    np.testing.assert_array_equal(got["seed"].to_numpy(), ref["seed"].to_numpy())
    np.testing.assert_array_equal(got["step"].to_numpy(), ref["step"].to_numpy())
    np.testing.assert_array_equal(got["action"].to_numpy(), ref["action"].to_numpy())
    np.testing.assert_array_equal(got["reward"].to_numpy(), ref["reward"].to_numpy())
    np.testing.assert_allclose(got["cumulative_regret"].to_numpy(), ref["cumulative_regret"].to_numpy(), rtol=1e-6)


def test_the_grid_changes_the_runs(swept):
    """Different hyper-parameters act differently (a sweep that ignored its grid would repeat one run)."""
    by_cfg = {k: g["action"].to_numpy() for k, g in swept.groupby(["obs_noise", "init_cov"])}
    assert len({a.tobytes() for a in by_cfg.values()}) > 1


def test_summarize_groups_by_the_axes(swept):
    s = bk.summarize(swept)
    assert s.index.names == ["agent", "obs_noise", "init_cov"]
    assert len(s) == 4 and (s["seeds"] == len(SEEDS)).all()
    last = swept[swept.step == STEPS - 1].groupby(["obs_noise", "init_cov"])["cumulative_regret"].mean()
    for (_, on, ic), row in s.iterrows():
        assert row["final_cumulative_regret"] == pytest.approx(last[(on, ic)])
    md = bk.experiments.to_markdown(s)
    assert md.splitlines()[0].startswith("| agent | obs_noise | init_cov |")


def test_interrupted_sweep_resumes_where_it_stopped(swept, tmp_path):
    kept = []

    def stop_after_first(df):
        if kept:
            raise KeyboardInterrupt
        kept.append(df)

    with pytest.raises(KeyboardInterrupt):
        run_sweep(checkpoint_dir=tmp_path, save_every=0, on_chunk=stop_after_first)
    rest = run_sweep(checkpoint_dir=tmp_path, save_every=0)
    assert rest["step"].min() == CHUNK
    cols = ["obs_noise", "init_cov", "seed", "step"]
    whole = pd.concat([kept[0], rest]).sort_values(cols).reset_index(drop=True)
    ref = swept.sort_values(cols).reset_index(drop=True)
    np.testing.assert_array_equal(whole["action"].to_numpy(), ref["action"].to_numpy())
    np.testing.assert_array_equal(whole["cumulative_regret"].to_numpy(), ref["cumulative_regret"].to_numpy())


def test_structural_axis_in_the_scalar_grid_is_refused_with_the_way_out():
    with pytest.raises(ValueError, match=r"rank.*separate program: pass it as structural="):
        sweep("lofi-ts", TinyBandit(), {"rank": [2, 4]}, seeds=1, steps=5)
    with pytest.raises(ValueError, match="finite number"):
        sweep(SPEC, TinyBandit(), {"obs_noise": ["low", "high"]}, seeds=1, steps=5)


def test_axis_of_another_policy_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="epsilon_greedy policy"):
        sweep("ekf-ts", TinyBandit(), {"epsilon": [0.1, 0.2]}, seeds=1, steps=5, model=model(), progress=False)
    with pytest.raises(ValueError, match="init_cov"):  # the backend's own check, on the concrete value
        sweep("ekf-ts", TinyBandit(), {"init_cov": [1.0, -1.0]}, seeds=1, steps=5, model=model(), progress=False)


def test_grid_points_are_the_product_last_axis_fastest():
    assert G.points({"a": [1, 2], "b": [3, 4]}) == [dict(a=1, b=3), dict(a=1, b=4), dict(a=2, b=3), dict(a=2, b=4)]
    assert G.points({}) == [{}]
    with pytest.raises(ValueError, match="repeats"):
        G.check_scalar_grid({"beta": [1.0, 1]})
    with pytest.raises(ValueError, match="both"):
        G.check_structural({"beta": [1]}, {"beta": [1.0]})


def test_cli_sweep_structural_axis_writes_one_frame(tmp_path):
    """``banditkit sweep``: a scalar axis in one program and a structural one (the linear backend's noise model)
    as two programs; one CSV with a column per axis, the summary per grid point, the plot; and the warning that the
    NIG backend (which learns its noise variance) ignores obs_noise."""
    from banditkit.cli import main

    out = tmp_path / "out"
    argv = ["sweep", "--env", "wheel", "--agents", "linear", "--grid", "obs_noise=0.05,0.5", "--structural",
            "noise=nig,known", "--steps", "12", "--seeds", "2", "--out", str(out), "--quiet"]
    with pytest.warns(RuntimeWarning, match=r"linear-thompson \[noise=nig\]: every value of \['obs_noise'\]"):
        assert main(argv) == 0
    df = pd.read_csv(out / "sweep.csv")
    assert list(df.columns[:3]) == ["agent", "obs_noise", "noise"]
    assert len(df) == 2 * 2 * 2 * 12
    assert set(df.noise) == {"nig", "known"}
    known = df[df.noise == "known"]
    assert not known[known.obs_noise == 0.05]["action"].reset_index(drop=True).equals(
        known[known.obs_noise == 0.5]["action"].reset_index(drop=True))  # with a known variance it matters
    summary = (out / "sweep_summary.md").read_text()
    assert summary.startswith("| agent | obs_noise | noise |") and summary.count("\n| linear-thompson |") == 4
    assert (out / "sweep_regret.png").stat().st_size > 0
    assert not (out / "sweep_state").exists()


def test_cli_sweep_refuses_a_structural_grid_axis(capsys):
    from banditkit.cli import main

    assert main(["sweep", "--env", "wheel", "--agents", "lofi", "--grid", "rank=2,4", "--steps", "5"]) == 2
    assert "--structural rank=V1,V2,..." in capsys.readouterr().err


def test_axis_the_agent_needs_concrete_is_refused_naming_it():
    """The learned-noise wrapper reads its starting variance as a Python number: obs_noise cannot be a traced lane
    argument there, and the error names that axis (not the others) and the way out."""
    with pytest.raises(ValueError, match=r"cannot batch the axis\(es\) \['obs_noise'\].*structural="):
        sweep("ekf-ts-adaptive_noise", TinyBandit(), {"obs_noise": [0.1, 0.2], "init_cov": [0.5, 1.0]}, seeds=1,
              steps=4, model=model(), progress=False)
