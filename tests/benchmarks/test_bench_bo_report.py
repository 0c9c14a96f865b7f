"""The BO suite's report pieces (benchmarks/suites/bo.py, benchmarks/harness/tables.py): average ranks, the
time-against-quality Pareto front, the per-run machine line, and a whole report (Markdown + plots) rebuilt from small
CSVs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.harness import tables
from benchmarks.suites import bo as bench_bo


def test_pareto_front_keeps_exactly_the_non_dominated():
    cost = pd.Series({"fast_bad": 0.01, "mid_good": 0.1, "slow_best": 1.0, "slow_bad": 2.0, "tie_cost": 0.1})
    loss = pd.Series({"fast_bad": 8.0, "mid_good": 3.0, "slow_best": 1.0, "slow_bad": 5.0, "tie_cost": 4.0})
    # tie_cost: as fast as mid_good and worse, so dominated; slow_bad: dominated by mid_good and slow_best
    assert tables.pareto_front(cost, loss) == ["fast_bad", "mid_good", "slow_best"]
    # an exact duplicate dominates nothing: both stay
    assert tables.pareto_front(pd.Series({"a": 1.0, "b": 1.0}), pd.Series({"a": 2.0, "b": 2.0})) == ["a", "b"]


def test_avg_ranks_rank_only_the_methods_run_on_each_task():
    mean = pd.Series({("t1", "a"): 1.0, ("t1", "b"): 2.0, ("t1", "c"): 3.0, ("t2", "a"): 5.0, ("t2", "c"): 4.0})
    r = tables.avg_ranks(mean, ["t1", "t2"], ["a", "b", "c"])
    assert r == {"a": [1.0, 2.0], "b": [2.0], "c": [3.0, 1.0]}
    # ties share the average rank
    tie = tables.avg_ranks(pd.Series({("t", "a"): 1.0, ("t", "b"): 1.0, ("t", "c"): 0.5}), ["t"], ["a", "b", "c"])
    assert tie == {"a": [2.5], "b": [2.5], "c": [1.0]}


def test_pareto_points_group_tasks_so_ranks_are_comparable():
    # gp skipped t3: one group ranks a / b on all three tasks, the other ranks all three methods on t1, t2
    mean = pd.Series({("t1", "a"): 1.0, ("t1", "b"): 2.0, ("t1", "gp"): 0.5,
                      ("t2", "a"): 3.0, ("t2", "b"): 1.0, ("t2", "gp"): 0.1,
                      ("t3", "a"): 1.0, ("t3", "b"): 2.0})
    iters = pd.DataFrame({"task": ["t1", "t2", "t3"] * 3, "method": ["a"] * 3 + ["b"] * 3 + ["gp", "gp", "gp"],
                          "time_s": [0.01, 0.03, 0.02, 0.2, 0.2, 0.2, 1.0, 3.0, np.nan]})
    groups = bench_bo.pareto_points(iters, mean, ["t1", "t2", "t3"], ["a", "b", "gp"])
    (t_all, all3), (t_common, common) = groups
    assert "all 3 tasks" in t_all and list(all3.index) == ["a", "b"]
    assert all3.avg_rank.tolist() == [np.mean([1, 2, 1]), np.mean([2, 1, 2])]
    assert all3.s_per_iter.tolist() == [0.02, 0.2]
    assert all3.on_front.tolist() == [True, False]  # a: faster and better
    assert "2 tasks" in t_common and list(common.index) == ["a", "b", "gp"]
    assert common.avg_rank["gp"] == 1.0 and common.s_per_iter["gp"] == 2.0  # median over t1, t2 only
    assert common.on_front.tolist() == [True, False, True]


def test_machine_line_lists_each_runs_load(tmp_path):
    pd.DataFrame({"machine": ["old box", "x86_64 CPU; python 3.11"], "load_average": [0.5, 2.25]}).to_csv(
        tmp_path / "bo_machine.csv", index=False)
    line = bench_bo._machine_md(str(tmp_path), lambda: "now")
    assert line == "x86_64 CPU; python 3.11 (load average at the end of each run: 0.5, 2.2)"
    empty = tmp_path / "none"
    empty.mkdir()
    assert bench_bo._machine_md(str(empty), lambda: "the machine now") == "the machine now (at report time)"


def test_report_writes_the_pareto_section_and_plot(tmp_path):
    rows, its = [], []
    for task, budget in [("branin", 3), ("ackley2", 3)]:
        for m, reg, sec in [("hilofi_ts", 1.0, 0.02), ("botorch", 0.5, 1.0), ("random", 2.0, 1e-6)]:
            for seed in (0, 1):
                rows.append(dict(task=task, method=m, seed=seed, budget=budget, final_regret=reg + 0.1 * seed,
                                 compile_s=0.0, median_iter_s=sec, run_s=sec * budget))
                its += [dict(task=task, method=m, seed=seed, iter=k + 1, n=2 + k, regret=reg + 0.1 * seed,
                             time_s=sec) for k in range(budget)]
    pd.DataFrame(rows).to_csv(tmp_path / "bo_runs.csv", index=False)
    pd.DataFrame(its).to_csv(tmp_path / "bo_iters.csv", index=False)  # an older version's uncompressed file
    bench_bo.report(str(tmp_path), "python -m benchmarks bo --quick", {}, None)
    assert not (tmp_path / "bo_iters.csv").exists()  # compressed in place, nothing lost
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "bo_iters.csv.gz"), pd.DataFrame(its))
    md = (tmp_path / "bo.md").read_text()
    assert "## Time against quality" in md
    front = [ln for ln in md.splitlines() if ln.startswith("- all 2 tasks")]
    assert len(front) == 1 and "`random`" in front[0] and "`hilofi_ts`" in front[0] and "`botorch`" in front[0]
    for png in ("bo_curves.png", "bo_curves_all.png", "bo_time.png", "bo_pareto.png"):
        assert (tmp_path / png).stat().st_size > 10_000


def test_method_names_pin_the_maximiser():
    """Every bench method passes its maximiser and trust region explicitly, so a row keeps meaning what it was run
    with after BayesOpt's defaults changed; ``gp20_ei`` keeps both its buffer and the ascent; suffixes combine."""
    plain = dict(maximizer="ascent", trust_region=False)
    assert bench_bo.parse_method("gp20_ei") == ("gp", "ei", dict(plain, surrogate_kwargs=dict(buffer_size=20)), False)
    assert bench_bo.parse_method("gp_ei_lbfgs") == ("gp", "ei", dict(plain, maximizer="lbfgs"), False)
    assert bench_bo.parse_method("hilofi_ts_grad") == ("hilofi", "thompson", plain, True)
    assert bench_bo.parse_method("hilofi_ts_tr") == ("hilofi", "thompson", dict(plain, trust_region=True), False)
    assert bench_bo.parse_method("hilofi_ei_lbfgs_tr") == ("hilofi", "ei", dict(maximizer="lbfgs", trust_region=True),
                                                          False)
    assert all({"maximizer", "trust_region"} <= set(bench_bo.parse_method(m)[2]) for m in bench_bo.OURS)


def test_replace_runs_the_named_runs_again_and_keeps_the_others(tmp_path):
    out = str(tmp_path)
    bench_bo.main(["--quick", "--methods", "random,tpe", "--out", out])
    before = pd.read_csv(tmp_path / "bo_runs.csv")
    its_before = pd.read_csv(tmp_path / "bo_iters.csv.gz")
    assert len(before) == 4  # branin × {random, tpe} × seeds {0, 1}
    assert bench_bo.drop_runs(out, {("branin", "tpe", 1), ("branin", "nothing", 0)}) == 1
    assert len(pd.read_csv(tmp_path / "bo_runs.csv")) == 3 and len(pd.read_csv(tmp_path / "bo_iters.csv.gz")) == 3 * 8
    bench_bo.main(["--quick", "--methods", "random,tpe", "--append", "--out", out])  # puts the dropped run back
    bench_bo.main(["--quick", "--methods", "tpe", "--replace", "--out", out])
    after = pd.read_csv(tmp_path / "bo_runs.csv")
    key = ["task", "method", "seed"]
    assert len(after) == 4 and not after.duplicated(key).any()
    merged = before.merge(after, on=key, suffixes=("_before", "_after"))
    np.testing.assert_array_equal(merged.final_regret_before, merged.final_regret_after)  # seeded: the same runs
    its_after = pd.read_csv(tmp_path / "bo_iters.csv.gz")
    assert len(its_after) == len(its_before) and not its_after.duplicated(key + ["iter"]).any()
    commands = (tmp_path / "bo_command.txt").read_text().splitlines()
    assert commands[-1].endswith("--replace --out " + out) and "--replace" in (tmp_path / "bo.md").read_text()


def test_check_re_makes_runs_by_their_values_and_flags_a_changed_one(tmp_path, capsys):
    """--check: runs just written are re-made query by query (exit status 0, nothing written); an altered value is
    reported with exit status 1; a table without the values (older rows) is compared by best regret, and the
    verdict says how informative that was; a run not in the table is not comparable."""
    out = str(tmp_path)
    bench_bo.main(["--quick", "--methods", "random,tpe", "--out", out])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    check = ["--quick", "--methods", "random,tpe", "--check", "5", "--out", out]
    with pytest.raises(SystemExit) as ex:
        bench_bo.main(check)
    assert ex.value.code == 0
    printed = capsys.readouterr().out
    assert printed.count("re-made: 5 queries' values equal") == 4  # branin x {random, tpe} x seeds {0, 1}
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before

    its = pd.read_csv(tmp_path / "bo_iters.csv.gz")
    altered = its.copy()
    altered.loc[(altered.method == "tpe") & (altered.seed == 1) & (altered.iter == 3), "y"] += 1.0
    altered.to_csv(tmp_path / "bo_iters.csv.gz", index=False, compression="gzip")
    with pytest.raises(SystemExit) as ex:
        bench_bo.main(check)
    assert ex.value.code == 1
    assert "branin tpe seed 1: DIFFERS from query 3 (y " in capsys.readouterr().out

    its.drop(columns="y").to_csv(tmp_path / "bo_iters.csv.gz", index=False, compression="gzip")  # older rows
    with pytest.raises(SystemExit) as ex:
        bench_bo.main(["--tasks", "branin", "--budget-scale", "0.2", "--methods", "random,tpe", "--seed-list", "0,7",
                       "--check", "5", "--out", out])  # --quick's budget (8), seeds 0 and 7
    assert ex.value.code == 0
    printed = capsys.readouterr().out
    assert "branin random seed 0: re-made: 5 queries' best regrets (the best improved" in printed
    assert "branin tpe seed 7: not comparable (not in the table)" in printed


def test_append_to_an_older_iters_file_keeps_one_header(tmp_path):
    """bo_iters.csv.gz written before the ``y`` column: appending a run with it rewrites the file once with both
    sets of columns (old rows' y empty), so the table still reads as one."""
    path = str(tmp_path / "bo_iters.csv.gz")
    old = pd.DataFrame(dict(task="branin", method="random", seed=0, iter=[1, 2], regret=[3.0, 2.0]))
    tables.append_csv(path, old)
    new = pd.DataFrame(dict(task="branin", method="tpe", seed=0, iter=[1, 2], regret=[4.0, 1.0], y=[5.0, 2.0]))
    tables.append_csv(path, new)
    tables.append_csv(path, new.assign(seed=1))
    got = pd.read_csv(path)
    assert list(got.columns) == ["task", "method", "seed", "iter", "regret", "y"] and len(got) == 6
    assert got.y.isna().sum() == 2 and got.y.iloc[2:].tolist() == [5.0, 2.0, 5.0, 2.0]


def test_check_refuses_options_that_write(tmp_path):
    with pytest.raises(SystemExit, match="--check writes nothing"):
        bench_bo.main(["--quick", "--methods", "random", "--check", "3", "--append", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--check must be >= 1"):
        bench_bo.main(["--quick", "--methods", "random", "--check", "0", "--out", str(tmp_path)])
