"""Runs on generated data say so: the ``synthetic`` column of run / compare / sweep frames, ``summarize`` and the
command line's summary."""

import warnings

import gymnasium as gym
import pandas as pd
import pytest

import banditkit as bk
from banditkit.cli import main
from banditkit.experiments import COLUMNS, compare, run, summarize, sweep, to_markdown
from banditkit.experiments.summary import synthetic_note

STEPS = 12


@pytest.mark.parametrize("compiled", [True, False])
def test_a_run_on_the_wheel_is_synthetic_and_on_shuttle_is_not(compiled):
    wheel = run("banditkit/Wheel-v0", "linear-thompson", STEPS, 2, compiled=compiled, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bk.environments.SyntheticDataWarning)
        shuttle = run("banditkit/Shuttle-v0", "linear-thompson", STEPS, 1, compiled=compiled, progress=False)
    assert list(wheel.columns) == COLUMNS and list(shuttle.columns) == COLUMNS
    assert wheel["synthetic"].dtype == bool and wheel["synthetic"].all() and len(wheel) == 2 * STEPS
    assert shuttle["synthetic"].dtype == bool and not shuttle["synthetic"].any()


def test_a_lookalike_run_is_synthetic():
    with pytest.warns(bk.environments.SyntheticDataWarning):
        env = gym.make("banditkit/Financial-v0", synthetic=True, max_steps=STEPS)
    df = run(env, "linear-thompson", STEPS, 1, progress=False)
    assert df["synthetic"].all()


@pytest.mark.filterwarnings("ignore:.*gave the same actions:RuntimeWarning")  # linear learns its noise: idle axis
def test_compare_and_sweep_frames_carry_the_column():
    df = compare(["linear-thompson", "linear-ucb"], "banditkit/Wheel-v0", STEPS, 1, progress=False)
    assert df["synthetic"].all() and set(df["agent"]) == {"linear-thompson", "linear-ucb"}
    swept = sweep("linear-thompson", "banditkit/Shuttle-v0", {"obs_noise": [0.1, 1.0]}, steps=STEPS, progress=False)
    assert swept["synthetic"].dtype == bool and not swept["synthetic"].any() and len(swept) == 2 * STEPS


def _frame(agent: str, synthetic: bool) -> pd.DataFrame:
    df = run("banditkit/Wheel-v0", "linear-thompson", STEPS, 1, progress=False, name=agent)
    return df.assign(synthetic=synthetic)


def test_summarize_keeps_it_and_the_markdown_shows_it_only_when_some_row_is_synthetic():
    real = summarize(pd.concat([_frame("a", False), _frame("b", False)], ignore_index=True))
    assert real["synthetic"].tolist() == [False, False]
    assert "synthetic" not in to_markdown(real) and synthetic_note(real) is None
    mixed = summarize(pd.concat([_frame("a", False), _frame("b", True)], ignore_index=True))
    assert mixed.loc["b", "synthetic"] and not mixed.loc["a", "synthetic"]
    md = to_markdown(mixed)
    assert "| synthetic |" in md.splitlines()[0]
    assert {line.split("|")[1].strip(): line.split("|")[-2].strip() for line in md.splitlines()[2:]} == {
        "a": "no", "b": "yes"}
    assert synthetic_note(mixed).endswith("for b")
    old = _frame("a", False).drop(columns="synthetic")  # a frame from before the column: nothing said
    assert "synthetic" not in summarize(old).columns


@pytest.mark.parametrize("env, said", [("wheel", True), ("shuttle", False)])
def test_the_command_line_summary_says_when_the_data_are_synthetic(env, said, tmp_path, capsys):
    out = str(tmp_path / "r")
    argv = ["run", "--env", env, "--agent", "linear", "--steps", str(STEPS), "--seeds", "1", "--out", out, "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    saved = open(f"{out}/run_summary.md").read()
    assert ("data: synthetic" in printed) is said and ("data: synthetic" in saved) is said
    assert pd.read_csv(f"{out}/run.csv")["synthetic"].tolist() == [said] * STEPS
