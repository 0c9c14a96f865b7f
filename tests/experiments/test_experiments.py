"""The experiment runner: compiled (scan × vmap × sharding) and Gymnasium loops agree; the frame; summarize."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pandas as pd
import pytest
from toys import TESTS_DIR, ToyBandit

import banditkit as bk
from banditkit.agents import BanditAgent
from banditkit.experiments import COLUMNS, compare, run, summarize
from banditkit.models import MLP

STEPS, SEEDS = 40, [0, 1, 2]


def _agent():
    return BanditAgent(MLP(features=(), out=3), "ekf", "thompson", obs_noise=0.1)


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory):
    csv = tmp_path_factory.mktemp("run") / "partial.csv"
    chunks = []
    df = run(
        ToyBandit(),
        _agent(),
        STEPS,
        SEEDS,
        compiled=True,
        progress=False,
        chunk_size=15,
        csv_path=csv,
        on_chunk=chunks.append,
        name="ekf-ts",
    )
    return df, csv, chunks


def test_frame_columns_and_regret_bookkeeping(compiled_run):
    df, _, _ = compiled_run
    assert list(df.columns) == COLUMNS
    assert len(df) == STEPS * len(SEEDS) and set(df["agent"]) == {"ekf-ts"}
    for _, g in df.groupby("seed"):
        assert list(g["step"]) == list(range(STEPS))
        np.testing.assert_allclose(g["regret"], g["optimal_reward"] - g["expected_reward"], atol=1e-6)
        np.testing.assert_allclose(g["cumulative_regret"], np.cumsum(g["regret"]), rtol=1e-9, atol=1e-9)
    assert (df["regret"] >= -1e-6).all()
    assert df["action"].between(0, 2).all()
    t = df.attrs["timing"]["ekf-ts"]
    assert t["mode"] == "compiled" and t["compile_s"] > 0 and t["run_s"] > 0
    assert t["per_step_s"] == pytest.approx(t["run_s"] / STEPS)


def test_seed_tables_are_the_envs(compiled_run):
    df, _, _ = compiled_run
    for s in SEEDS:
        fb = ToyBandit().functional(s, STEPS)
        g = df[df["seed"] == s]
        a = g["action"].to_numpy()
        np.testing.assert_allclose(g["reward"], fb.rewards[np.arange(STEPS), a], rtol=1e-6)
        np.testing.assert_allclose(g["optimal_reward"], fb.expected.max(axis=1), rtol=1e-6)


def test_compiled_and_gymnasium_loops_agree_and_seeds_are_independent(compiled_run):
    df, _, _ = compiled_run
    gym_df = run(ToyBandit(), _agent(), STEPS, [2, 0], compiled=False, progress=False, name="ekf-ts")
    assert gym_df.attrs["timing"]["ekf-ts"]["mode"] == "gymnasium"
    for s in (0, 2):
        c, g = df[df["seed"] == s].reset_index(drop=True), gym_df[gym_df["seed"] == s].reset_index(drop=True)
        np.testing.assert_array_equal(c["action"], g["action"])
        np.testing.assert_allclose(c[COLUMNS[4:-1]], g[COLUMNS[4:-1]], rtol=1e-5, atol=1e-5)  # the numbers
        assert COLUMNS[-1] == "synthetic" and not c["synthetic"].any() and not g["synthetic"].any()
    # different seeds are different runs (vmap did not share a key or a table)
    a0, a1 = (df[df["seed"] == s]["action"].to_numpy() for s in (0, 1))
    assert not np.array_equal(a0, a1)


def test_incremental_csv_and_on_chunk(compiled_run):
    df, csv, chunks = compiled_run
    assert len(chunks) == 3 and [len(c) for c in chunks] == [15 * 3, 15 * 3, 10 * 3]
    saved = pd.read_csv(csv).sort_values(["seed", "step"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(saved, df, check_dtype=False)


def test_summarize_is_mean_and_standard_error(compiled_run):
    df, _, _ = compiled_run
    table = summarize(df)
    final = df[df["step"] == STEPS - 1]["cumulative_regret"].to_numpy()
    row = table.loc["ekf-ts"]
    assert row["final_cumulative_regret"] == pytest.approx(final.mean())
    assert row["final_cumulative_regret_se"] == pytest.approx(final.std(ddof=1) / np.sqrt(3))
    assert row["mean_reward"] == pytest.approx(df["reward"].mean())
    assert row["ms_per_step"] == pytest.approx(1e3 * df.attrs["timing"]["ekf-ts"]["per_step_s"])
    assert row["seeds"] == 3 and row["steps"] == STEPS
    md = bk.experiments.to_markdown(table)
    assert md.startswith("| agent |") and "±" in md


def test_compare_names_agents_and_keeps_timing():
    agent = _agent()
    df = compare({"a": agent, "b": agent}, ToyBandit(), steps=5, seeds=[0], compiled=False, progress=True)
    assert list(df["agent"].unique()) == ["a", "b"] and len(df) == 10
    assert set(df.attrs["timing"]) == {"a", "b"}
    np.testing.assert_array_equal(df[df.agent == "a"]["action"], df[df.agent == "b"]["action"])
    assert list(summarize(df).index) == sorted(
        ["a", "b"], key=lambda n: summarize(df).loc[n, "final_cumulative_regret"]
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="banditkit/"):
        run("banditkit/NoSuchEnv-v0", "ekf-ts", steps=5)
    with pytest.raises(ValueError, match="steps"):
        run(ToyBandit(), _agent(), steps=0)
    with pytest.raises(ValueError, match="seeds"):
        run(ToyBandit(), _agent(), steps=5, seeds=[])
    with pytest.raises(TypeError, match="spec string"):
        run(ToyBandit(), object(), steps=5)
    with pytest.raises(ValueError, match="max_steps"):
        run(ToyBandit(max_steps=3), _agent(), steps=5, compiled=False)


@pytest.mark.parametrize("chunk", [None, 4, 6])
def test_subspace_warmup_same_in_both_loops(chunk):
    """The compiled runner fits the subspace between two scan segments (τ = 6 mid-chunk for chunk 4, on a chunk
    boundary for 6); actions and regret must match the Gymnasium loop, where ``act`` fits it at t = τ."""

    def make():
        return BanditAgent(
            MLP(features=(4,), out=3),
            "subspace_ekf",
            "thompson",
            warmup_steps=6,
            posterior_kwargs=dict(dim=3, sgd=dict(n_iters=20, skip=2)),
        )

    c = run(ToyBandit(), make(), 13, [1, 2], compiled=True, progress=False, chunk_size=chunk)
    g = run(ToyBandit(), make(), 13, [1, 2], compiled=False, progress=False)
    assert len(c) == 26
    assert list(c["action"][:6]) == [0, 1, 2, 0, 1, 2]
    np.testing.assert_array_equal(c["action"], g["action"])
    np.testing.assert_allclose(c["cumulative_regret"], g["cumulative_regret"], rtol=1e-5)


def test_compiled_segments_end_at_the_warmup_round():
    from banditkit.experiments.compiled_loop import _segments

    assert _segments(10, 4, 0) == [(0, 4), (4, 4), (8, 4)]
    assert _segments(13, 4, 6) == [(0, 4), (4, 2), (6, 4), (10, 4)]
    assert _segments(13, 3, 6) == [(0, 3), (3, 3), (6, 3), (9, 3), (12, 3)]
    assert _segments(5, 4, 6) == [(0, 4), (4, 4)]  # τ ≥ steps: the fit never runs


def test_real_env_compiled_equals_gymnasium():
    df_c = run("banditkit/Mushroom-v0", "linear-ucb", steps=25, seeds=[3], compiled=True, progress=False)
    df_g = run("banditkit/Mushroom-v0", "linear-ucb", steps=25, seeds=[3], compiled=False, progress=False)
    np.testing.assert_array_equal(df_c["action"], df_g["action"])
    np.testing.assert_allclose(df_c["cumulative_regret"], df_g["cumulative_regret"], rtol=1e-5)


SHARDED = textwrap.dedent(
    """
    import json, sys
    import jax
    sys.path[:0] = {paths!r}
    from toys import ToyBandit
    from test_experiments import _agent, STEPS, SEEDS
    from banditkit.experiments import run
    assert len(jax.local_devices()) == 2, jax.local_devices()
    df = run(ToyBandit(), _agent(), STEPS, SEEDS, compiled=True, progress=False, chunk_size=15, name="ekf-ts")
    print("JSON" + json.dumps(dict(actions=df["action"].tolist(), regret=df["cumulative_regret"].tolist(),
                                   devices=df.attrs["timing"]["ekf-ts"]["devices"])))
    """
)


def test_seeds_sharded_over_two_devices_give_the_same_runs(compiled_run):
    df, _, _ = compiled_run
    # the suite's compiler flags (tests/conftest.py) kept, the device count added: the child compiles as the
    # reference run in this process did, with the cheap pipeline
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2".strip()
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    code = SHARDED.format(paths=[os.path.dirname(os.path.abspath(__file__)), TESTS_DIR])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.split("JSON", 1)[1])
    assert res["devices"] == 2
    np.testing.assert_array_equal(res["actions"], df["action"].to_numpy())
    np.testing.assert_allclose(res["regret"], df["cumulative_regret"].to_numpy(), rtol=1e-5, atol=1e-5)


def test_healthy_compiled_run_reports_no_nonfinite_state(compiled_run):
    df, _, _ = compiled_run
    assert df.attrs["timing"]["ekf-ts"]["nonfinite"] == {}


def _nl_agent(optimizer):
    return BanditAgent(MLP(features=(8,), out=3), "neural_linear", "thompson",
                       posterior_kwargs=dict(optimizer=optimizer, train_every=5, n_train_steps=3, buffer_size=16))


@pytest.mark.parametrize("compiled", [True, False])
def test_runner_warns_when_most_neural_linear_retrainings_are_discarded(compiled):
    """A body optimiser that only makes the fit worse leaves finite, untrained features (the guard discards every
    retraining), so nothing else would tell the user: the runner counts the discarded retrainings per seed and warns,
    in both loops and with the same counts."""
    import optax

    shove = optax.GradientTransformation(lambda p: optax.EmptyState(),
                                         lambda g, s, p=None: (jax.tree_util.tree_map(lambda v: v * 0 + 1e3, g), s))
    match = r"nl: seed\(s\) \[0, 1\]: .*discarded in most retrainings \(6 of 6\)"  # the backend's diagnostics
    with pytest.warns(RuntimeWarning, match=match):
        df = run(ToyBandit(), _nl_agent(shove), 30, [0, 1], compiled=compiled, chunk_size=10, progress=False,
                 name="nl")
    assert df.attrs["timing"]["nl"]["discarded_retrainings"] == {0: [6, 6], 1: [6, 6]}


def test_runner_counts_retrainings_without_warning_when_they_are_kept():
    import warnings

    import optax

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        df = run(ToyBandit(), _nl_agent(optax.adam(1e-3)), 30, [0, 1], compiled=True, chunk_size=10,
                 progress=False, name="nl")
    counts = df.attrs["timing"]["nl"]["discarded_retrainings"]
    assert set(counts) == {0, 1} and all(t == 6 and 2 * r <= t for r, t in counts.values())
    other = run(ToyBandit(), _agent(), 10, [0], progress=False, name="ekf").attrs["timing"]["ekf"]
    assert "discarded_retrainings" not in other  # recorded for neural-linear agents only


def test_compiled_run_warns_when_the_agent_state_goes_nonfinite():
    """A diverging point estimate (plain SGD at lr 1e8) still picks arms (argmax of NaN scores), so its rewards would
    pass for a result: the runner must say which seeds broke and by which round."""
    import optax

    agent = BanditAgent(MLP(features=(8,), out=3), "replay_sgd", "greedy",
                        posterior_kwargs=dict(optimizer=optax.sgd(1e8), buffer_size=4, n_inner=5))
    chunks = []
    with pytest.warns(RuntimeWarning, match=r"non-finite.*seed\(s\) \[0, 1\]"):
        df = run(ToyBandit(), agent, 30, [0, 1], compiled=True, chunk_size=10, name="diverges",
                 on_chunk=lambda c: chunks.append(dict(c.attrs["nonfinite"])))
    bad = df.attrs["timing"]["diverges"]["nonfinite"]
    assert set(bad) == {0, 1} and all(r in (10, 20, 30) for r in bad.values())
    # each chunk says what was known when it finished (a caller that stops early still learns it)
    assert len(chunks) == 3 and chunks[-1] == bad and all(c.items() <= bad.items() for c in chunks)
