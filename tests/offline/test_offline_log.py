"""The logged-feedback format: round trips through DataFrames and Parquet, and a clear error for every bad log."""

import warnings

import numpy as np
import pandas as pd
import pytest

import banditkit.offline as off
from banditkit.offline import LogError

N, K = 12, 4


def _frame(n=N, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "x0": rng.normal(size=n), "x1": rng.normal(size=n), "x2": rng.normal(size=n),
        "action": rng.integers(0, K - 1, size=n),  # arm K-1 never logged
        "reward": rng.normal(size=n),
        "propensity": rng.uniform(0.1, 1.0, size=n),
        "session": [f"s{i}" for i in range(n)],
    })


def test_frame_parquet_round_trip_keeps_everything(tmp_path):
    df = _frame()
    log = off.from_frame(df, num_actions=K)
    assert log.contexts.shape == (N, 3) and log.contexts.dtype == np.float32
    assert log.num_actions == K and not log.per_arm and log.has_propensities
    assert log.extra.columns.tolist() == ["session"]
    path = off.write_parquet(log, tmp_path / "sub" / "log.parquet")
    back = off.read_parquet(path)  # K from the file's metadata, though arm K-1 was never logged
    assert back.num_actions == K
    for f in ("contexts", "actions", "rewards", "propensities"):
        np.testing.assert_array_equal(getattr(back, f), getattr(log, f))
    assert back.extra["session"].tolist() == df["session"].tolist()
    np.testing.assert_array_equal(off.load(back.to_frame()).rewards, log.rewards)
    assert not [p for p in tmp_path.joinpath("sub").iterdir() if p.name.startswith(".tmp")]  # atomic write


def test_per_arm_layout_with_shared_features(tmp_path):
    rng = np.random.default_rng(1)
    cols = {"x0": rng.normal(size=N)}
    for k in range(K):
        for j in range(2):
            cols[f"a{k}_x{j}"] = rng.normal(size=N)
    cols.update(action=rng.integers(0, K, N), reward=rng.normal(size=N), propensity=np.full(N, 1 / K))
    for k in range(K):
        cols[f"available_{k}"] = True
    df = pd.DataFrame(cols)
    log = off.from_frame(df)
    assert log.per_arm and log.contexts.shape == (N, K, 3) and log.num_actions == K
    np.testing.assert_allclose(log.contexts[:, 2, 0], df["x0"], rtol=1e-6)  # the shared feature, repeated
    np.testing.assert_allclose(log.contexts[:, 2, 1:], df[["a2_x0", "a2_x1"]], rtol=1e-6)
    back = off.read_parquet(off.write_parquet(log, tmp_path / "arms.parquet"))
    np.testing.assert_array_equal(back.contexts, log.contexts)
    assert back.available.all() and back.shared_width == 1


def test_missing_propensity_warns_and_loads():
    df = _frame().drop(columns="propensity")
    with pytest.warns(off.MissingPropensityWarning, match="only the direct method"):
        log = off.from_frame(df, num_actions=K)
    assert log.propensities is None


def test_every_problem_reported_with_its_rows_and_nothing_dropped():
    df = _frame()
    df.loc[[3, 7], "propensity"] = [0.0, 1.5]
    df.loc[5, "propensity"] = np.nan
    df.loc[9, "action"] = 7
    df.loc[2, "reward"] = np.nan
    df.loc[4, "reward"] = np.inf
    df.loc[6, "x1"] = np.nan
    with pytest.raises(LogError) as err:
        off.from_frame(df, num_actions=K)
    msg = str(err.value)
    assert len(err.value.problems) == 4
    assert "propensity must lie in (0, 1]" in msg and "rows 3, 5, 7 (values 0.0, nan, 1.5)" in msg
    assert "action out of range [0, 4) (4 arms): row 9 (value 7.0)" in msg
    assert "reward is NaN or infinite: rows 2, 4 (values nan, inf)" in msg
    assert "context features are NaN or infinite in column x1: row 6" in msg
    assert "Nothing was dropped" in msg


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.assign(action=d.action.astype(float).where(d.index != 1, 1.5)),
         r"action must be an integer arm index: row 1 \(value 1.5\)"),
        (lambda d: d.assign(action=d.action.where(d.index != 8, -1)), r"out of range \[0, 4\).*row 8"),
        (lambda d: d.drop(columns="reward"), r"missing column 'reward'"),
        (lambda d: d.drop(columns="x1"), r"mismatched context width.*missing x1"),
        (lambda d: d.drop(columns=["x0", "x1", "x2"]), r"no context columns"),
        (lambda d: d.iloc[:0], r"the log has no rows"),
        (lambda d: d.assign(x1=["a"] + [0.0] * (len(d) - 1)), r"context column 'x1' is not numeric.*row 0"),
        (lambda d: d.assign(reward=d.reward.astype(object).where(d.index != 2, "high")),
         r"reward must be numeric: row 2"),
    ],
)
def test_bad_logs_get_clear_errors(mutate, match):
    with pytest.raises(LogError, match=match):
        off.from_frame(mutate(_frame()), num_actions=K)


def test_per_arm_width_and_arm_count_mismatches():
    base = {"action": [0, 1], "reward": [0.0, 1.0], "propensity": [0.5, 0.5]}
    uneven = pd.DataFrame(base | {"a0_x0": [1.0, 2.0], "a0_x1": [1.0, 2.0], "a1_x0": [3.0, 4.0]})
    with pytest.raises(LogError, match=r"feature widths \(every arm needs the same F\): arm 0: 2, arm 1: 1"):
        off.from_frame(uneven)
    missing_arm = pd.DataFrame(base | {"a0_x0": [1.0, 2.0], "a2_x0": [3.0, 4.0]})
    with pytest.raises(LogError, match=r"arms \[1\] have no a\{k\}_x\{j\} columns"):
        off.from_frame(missing_arm)
    arms = pd.DataFrame(base | {"a0_x0": [1.0, 2.0], "a1_x0": [3.0, 4.0]})
    with pytest.raises(LogError, match=r"mismatched number of arms: num_actions says 3, per-arm feature blocks say"):
        off.from_frame(arms, num_actions=3)
    unavailable = pd.DataFrame(base | {"x0": [1.0, 1.0], "available_0": [1, 1], "available_1": [1, 0]})
    with pytest.raises(LogError, match=r"logged action is marked unavailable: row 1"):
        off.from_frame(unavailable)


def test_from_arrays_checks_lengths_and_shapes():
    x = np.zeros((5, 2))
    with pytest.raises(LogError, match=r"mismatched lengths.*contexts has 5, actions has 4"):
        off.from_arrays(x, [0, 1, 0, 1], np.zeros(5), np.full(5, 0.5), num_actions=2)
    with pytest.raises(LogError, match=r"mismatched number of arms: num_actions says 2, available"):
        off.from_arrays(x, np.zeros(5, int), np.zeros(5), np.full(5, 0.5), available=np.ones((5, 3)), num_actions=2)
    with pytest.warns(UserWarning, match=r"using max\(action\) \+ 1 = 2"):
        log = off.from_arrays(x, [0, 1, 0, 1, 1], np.zeros(5), np.full(5, 0.5))
    assert log.num_actions == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = log.split(0.6)
    assert (len(a), len(b)) == (3, 2)
    np.testing.assert_array_equal(b.actions, [1, 1])
