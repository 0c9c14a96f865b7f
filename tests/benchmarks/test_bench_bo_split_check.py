"""The split-check study's renderer on hand-made run tables with a known answer: z, the worse-beyond-one-s.e. flag,
the seeds both tables share, ranks per task and their average, the worse-than-random flag."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.studies.bo_split_check import main, merge_runs, parse_folder
from benchmarks.studies.bo_split_check.compare import compare, ranks


def table(cells: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    return pd.DataFrame([dict(task=t, method=m, seed=s, final_regret=v)
                         for (t, m), vals in cells.items() for s, v in enumerate(vals)])


OLD = table({("t1", "a"): [1, 2, 3, 4], ("t1", "b"): [1, 2, 3, 4], ("t1", "c"): [2, 3, 4, 5],
             ("t1", "d"): [1, 2, 3, 4], ("t1", "gone"): [1, 1, 1, 1]})
NEW = table({("t1", "a"): [3, 4, 5, 6], ("t1", "b"): [1, 2, 3, 4], ("t1", "c"): [1, 2, 3, 4],
             ("t1", "d"): [1, 2, 3, 4, 100], ("t1", "added"): [1, 1, 1, 1]})


def test_compare_flags_a_method_worse_beyond_one_standard_error():
    cmp = compare(OLD, NEW).set_index("method")
    assert list(cmp.index) == ["a", "b", "c", "d"]  # cells in both tables only
    se = np.std([1, 2, 3, 4], ddof=1) / 2  # the same spread in every cell: s.e. 0.6455
    a = cmp.loc["a"]
    assert (a.old_mean, a.new_mean, a["diff"]) == (2.5, 4.5, 2.0)
    assert a.old_se == pytest.approx(se) and a.diff_se == pytest.approx(se * np.sqrt(2))
    assert a.z == pytest.approx(2 / (se * np.sqrt(2)))  # 2.19
    assert a.worse and not a.same
    assert cmp.loc["b"].z == 0 and cmp.loc["b"].same and not cmp.loc["b"].worse
    assert cmp.loc["c"].z == pytest.approx(-1 / (se * np.sqrt(2))) and not cmp.loc["c"].worse  # better, not worse
    d = cmp.loc["d"]  # seed 4 (100) is only in the new table: compared on seeds 0-3, where it is equal
    assert d.seeds == 4 and d.same and d.new_mean == 2.5


def test_compare_zero_spread_and_bad_tables():
    old = table({("t", "x"): [1.0, 1.0]})
    new = table({("t", "x"): [2.0, 2.0]})
    r = compare(old, new).iloc[0]
    assert r.z == np.inf and r.worse  # a difference with no spread at all is beyond any standard error
    one = compare(table({("t", "x"): [1.0]}), table({("t", "x"): [2.0]})).iloc[0]
    assert np.isnan(one.z) and not one.worse  # one seed in common: no standard error, so no verdict
    with pytest.raises(ValueError, match="needs the columns"):
        compare(old.drop(columns="final_regret"), new)
    with pytest.raises(ValueError, match="duplicate task × method × seed"):
        compare(pd.concat([old, old]), new)


RUNS = table({("t1", "default"): [1, 1], ("t1", "tpe"): [2, 2], ("t1", "random"): [3, 3],
              ("t2", "default"): [5, 5], ("t2", "tpe"): [1, 1], ("t2", "random"): [3, 3],
              ("t3", "default"): [1, 2], ("t3", "tpe"): [2, 1], ("t3", "random"): [9, 9],
              ("t4", "default"): [1, 1]})  # t4: tpe and random did not run there, so it is not ranked


def test_ranks_per_task_by_mean_and_worse_than_random():
    rk = ranks(RUNS, ["default", "tpe", "random"])
    assert list(dict.fromkeys(rk.task)) == ["t1", "t2", "t3"]
    r = rk.set_index(["task", "method"])["rank"]
    assert [r["t1", m] for m in ("default", "tpe", "random")] == [1, 2, 3]
    assert [r["t2", m] for m in ("default", "tpe", "random")] == [3, 1, 2]
    assert [r["t3", m] for m in ("default", "tpe", "random")] == [1.5, 1.5, 3]  # a tie shares the average rank
    avg = rk.groupby("method")["rank"].mean()
    assert avg["default"] == pytest.approx(5.5 / 3) and avg["tpe"] == pytest.approx(4.5 / 3)
    worse = rk.set_index(["task", "method"]).worse_than_random
    assert worse["t2", "default"] and not worse["t1", "default"] and not worse["t2", "tpe"]
    with pytest.raises(ValueError, match="baseline 'random' must be one of"):
        ranks(RUNS, ["default", "tpe"])


def test_main_renders_the_comparison_and_the_target(tmp_path):
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    OLD.to_csv(old, index=False)
    pd.concat([NEW, RUNS]).to_csv(new, index=False)
    main(["--old", str(old), "--new", str(new), "--out", str(tmp_path / "out")])
    md = (tmp_path / "out" / "bo_split_check.md").read_text()
    row_a = next(line for line in md.splitlines() if line.startswith("| t1 | a |"))
    assert "**WORSE**" in row_a and "+2.19" in row_a
    assert not any("**WORSE**" in line for line in md.splitlines() if line.startswith(("| t1 | b |", "| t1 | c |")))
    assert "**1 worse beyond one s.e.**" in md
    assert "| **average rank** (3 tasks) | **1.83** | **1.50** | **2.67** |" in md
    assert "NOT MET" in md and "worse than random on t2." in md
    cmp = pd.read_csv(tmp_path / "out" / "bo_split_check.csv")
    assert cmp.worse.tolist() == [True, False, False, False]


def test_merge_renames_and_refuses_a_run_twice(tmp_path):
    for name, df in (("a", table({("t1", "tpe"): [1, 2]})), ("b", table({("t1", "tpe"): [3, 4]}))):
        (tmp_path / name).mkdir()
        df.to_csv(tmp_path / name / "bo_runs.csv", index=False)
    assert parse_folder("/x/y:tpe=tpe_old+random=rnd") == ("/x/y", {"tpe": "tpe_old", "random": "rnd"})
    with pytest.raises(SystemExit, match="a rename is METHOD=NEW_NAME"):
        parse_folder("/x/y:tpe")
    with pytest.raises(SystemExit, match="t1 tpe seed 0 is there twice with different results"):
        merge_runs([str(tmp_path / "a"), str(tmp_path / "b")])
    same, _, _, _ = merge_runs([str(tmp_path / "a"), str(tmp_path / "a")])  # the same run twice: kept once
    assert len(same) == 2
    df, _, _, _ = merge_runs([str(tmp_path / "a") + ":tpe=tpe_old", str(tmp_path / "b")])
    assert sorted(set(df.method)) == ["tpe", "tpe_old"] and len(df) == 4
    with pytest.raises(SystemExit, match="does not exist"):
        merge_runs([str(tmp_path / "missing")])
