"""benchmarks/common.write_outputs(merge=True): re-running some agents keeps the others' rows, judges floors on the
merged table and carries the hand-written run notes."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks import common  # noqa: E402


def _result(rewards: dict[str, float], steps: int = 20, seeds: int = 2) -> common.Result:
    """Agent ``a`` earns ``rewards[a]`` every step (oracle reward 1)."""
    rows = []
    for agent, r in rewards.items():
        for seed in range(seeds):
            for t in range(steps):
                rows.append(dict(agent=agent, seed=seed, step=t, reward=r, cumulative_regret=(1 - r) * (t + 1)))
    timing = {a: dict(compile_s=1.0, run_s=2.0, per_step_s=0.1, wall_s=3.0) for a in rewards}
    return common.Result(pd.DataFrame(rows), timing)


def _floors(s: pd.DataFrame) -> list:
    if not {"a", "b"} <= set(s.index):
        return []
    return [common.Floor("a beats b", bool(s.loc["a", "cum_reward"] > s.loc["b", "cum_reward"]),
                         f"a {s.loc['a', 'cum_reward']:.1f}, b {s.loc['b', 'cum_reward']:.1f}")]


def _write(tmp_path, res, merge, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", argv)
    return common.write_outputs(res, str(tmp_path), "t", title="T", protocol="p", full_command="full",
                                floors=_floors, merge=merge)


def test_merge_keeps_rows_judges_floors_on_the_merged_table_and_keeps_run_notes(tmp_path, monkeypatch):
    _write(tmp_path, _result({"a": 0.5, "b": 0.25}), False, ["bench.py", "--first"], monkeypatch)
    md = (tmp_path / "t.md").read_text()
    assert "a beats b: **MET** — a 10.0, b 5.0" in md
    (tmp_path / "t.md").write_text(md + "\n**Run note (by hand):** b was run before a fix.\n")

    s = _write(tmp_path, _result({"b": 0.75}), True, ["bench.py", "--agents", "b", "--merge"], monkeypatch)
    np.testing.assert_allclose(s.loc[["a", "b"], "cum_reward"], [10.0, 15.0])  # a kept, b replaced
    md = (tmp_path / "t.md").read_text()
    assert "a beats b: **NOT MET** — a 10.0, b 15.0" in md  # judged with a's kept row
    assert "**Run note (by hand):** b was run before a fix." in md
    assert "`python bench.py --first`" in md and "re-ran b" in md
    seeds = pd.read_csv(tmp_path / "t_seeds.csv")
    assert list(seeds["agent"]) == ["a", "a", "b", "b"]
    assert (tmp_path / "t_regret.png").stat().st_size > 0


def test_merged_rows_with_other_seed_counts_are_named_on_the_protocol_line(tmp_path, monkeypatch):
    _write(tmp_path, _result({"a": 0.5, "b": 0.25}, seeds=3), False, ["bench.py"], monkeypatch)
    assert "**Protocol run:** p\n" in (tmp_path / "t.md").read_text()
    _write(tmp_path, _result({"b": 0.75}, seeds=5), True, ["bench.py", "--merge"], monkeypatch)
    md = (tmp_path / "t.md").read_text()
    assert "**Protocol run:** p (this command; the table's rows have 3–5 seeds, see `seeds`)" in md
    _write(tmp_path, _result({"a": 0.5}, seeds=5), True, ["bench.py", "--merge"], monkeypatch)
    assert "**Protocol run:** p\n" in (tmp_path / "t.md").read_text()  # every row has 5 seeds again
