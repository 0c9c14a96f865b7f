"""benchmarks.harness.report.write_outputs(merge=True): re-running some agents keeps the others' rows, judges floors
on the merged table and carries the hand-written run notes."""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
import pytest

from benchmarks.harness import merge, options, report, run, tables


def _result(rewards: dict[str, float], steps: int = 20, seeds: int = 2) -> run.Result:
    """Agent ``a`` earns ``rewards[a]`` every step (oracle reward 1)."""
    rows = []
    for agent, r in rewards.items():
        for seed in range(seeds):
            for t in range(steps):
                rows.append(dict(agent=agent, seed=seed, step=t, reward=r, cumulative_regret=(1 - r) * (t + 1)))
    timing = {a: dict(compile_s=1.0, run_s=2.0, per_step_s=0.1, wall_s=3.0) for a in rewards}
    return run.Result(pd.DataFrame(rows), timing)


def _floors(s: pd.DataFrame) -> list:
    if not {"a", "b"} <= set(s.index):
        return []
    return [tables.Floor("a beats b", bool(s.loc["a", "cum_reward"] > s.loc["b", "cum_reward"]),
                         f"a {s.loc['a', 'cum_reward']:.1f}, b {s.loc['b', 'cum_reward']:.1f}")]


def _write(tmp_path, res, merge, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", argv)
    return report.write_outputs(res, str(tmp_path), "t", title="T", protocol="p", full_command="full",
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


def _noisy(agents: list[str], seeds: list[int], steps: int = 30, run_s: float = 2.0) -> run.Result:
    """Each (agent, seed) earns a seed-dependent Bernoulli stream, so seeds differ and the curve's s.e. is not 0."""
    rows = []
    for k, agent in enumerate(agents):
        for seed in seeds:
            r = np.random.default_rng(100 * k + seed).random(steps) < 0.3 + 0.05 * seed
            regret = np.cumsum(1.0 - r)
            rows += [dict(agent=agent, seed=seed, step=t, reward=float(r[t]), cumulative_regret=float(regret[t]))
                     for t in range(steps)]
    run_id = f"test/{seeds}"  # run_agents stamps one id per call
    timing = {a: dict(compile_s=1.0, run_s=run_s, per_step_s=run_s / steps, wall_s=3.0, run_id=run_id)
              for a in agents}
    return run.Result(pd.DataFrame(rows), timing)


def _write_seeds(tmp_path, res, argv, monkeypatch, **kw):
    monkeypatch.setattr(sys, "argv", argv)
    return report.write_outputs(res, str(tmp_path), "t", title="T", protocol="p", full_command="full",
                                extra_md=lambda seeds: f"table seeds {seeds}", **kw)


def test_add_seeds_pools_seed_rows_and_curves_exactly(tmp_path, monkeypatch):
    _write_seeds(tmp_path, _noisy(["a", "b"], [0, 1, 2]), ["bench.py"], monkeypatch)
    more = _noisy(["a"], [3, 4], run_s=5.0)
    for _ in range(2):  # a run writes its table after every agent and at the end: pooled once, not twice
        s = _write_seeds(tmp_path, more, ["bench.py", "--add-seeds"], monkeypatch, add_seeds=True)
    direct = _noisy(["a", "b"], [0, 1, 2, 3, 4])
    want = tables.summary(tables.per_seed(direct), ["a", "b"])
    # a: the five seeds' mean ± s.e. (as if run at once); b: its three seeds, untouched
    np.testing.assert_allclose(s.loc["a", ["cum_reward", "cum_reward_se", "final_regret_se"]].astype(float),
                               want.loc["a", ["cum_reward", "cum_reward_se", "final_regret_se"]].astype(float))
    assert (s.loc["a", "seeds"], s.loc["b", "seeds"]) == (5, 3)
    assert (s.loc["a", "run_s"], s.loc["a", "compile_s"], s.loc["b", "run_s"]) == (7.0, 1.0, 2.0)  # runs summed
    np.testing.assert_allclose(s.loc["a", "ms_per_step"], 1e3 * (2.0 + 5.0) / 30)
    cur = pd.read_csv(tmp_path / "t_curve.csv")
    exact = tables.curve(direct)
    for agent, n in (("a", 5), ("b", 3)):
        got, ref = cur[cur["agent"] == agent].reset_index(drop=True), exact[exact["agent"] == agent]
        assert set(got["n"]) == {n}
        if agent == "a":
            cols = ["step", "cum_regret", "cum_regret_se", "cum_reward", "cum_reward_se"]
            np.testing.assert_allclose(got[cols].to_numpy(float), ref.reset_index(drop=True)[cols].to_numpy(float),
                                       rtol=1e-10, atol=1e-12)
    md = (tmp_path / "t.md").read_text()
    assert "added seeds to a" in md and "table seeds [0, 1, 2, 3, 4]" in md
    assert list(pd.read_csv(tmp_path / "t_seeds.csv").query("agent == 'a'")["seed"]) == [0, 1, 2, 3, 4]


def test_add_seeds_refuses_seeds_or_steps_an_agent_already_has(tmp_path, monkeypatch):
    _write_seeds(tmp_path, _noisy(["a"], [0, 1, 2]), ["bench.py"], monkeypatch)
    with pytest.raises(SystemExit, match=r"already has seed\(s\) \[2\].*--first-seed 3"):
        merge.check_add_seeds(str(tmp_path), "t", ["a"], [2, 3], 30)
    with pytest.raises(SystemExit, match="ran 30 rounds, this run 40"):
        merge.check_add_seeds(str(tmp_path), "t", ["a"], [3, 4], 40)
    merge.check_add_seeds(str(tmp_path), "t", ["a", "new_agent"], [3, 4], 30)  # fine: new seeds, same steps
    with pytest.raises(ValueError, match="old seeds \\[0, 1, 2\\]"):
        _write_seeds(tmp_path, _noisy(["a"], [2, 3]), ["bench.py", "--add-seeds"], monkeypatch, add_seeds=True)


def test_seed_list_and_its_protocol_text():
    args = options.parser("d", steps=10, seeds=3).parse_args(["--seeds", "2", "--first-seed", "3", "--add-seeds"])
    options.check_args(argparse.Namespace(**{**vars(args), "out": "/tmp", "blas_threads": "system"}))
    assert options.seed_list(args) == [3, 4] and options.seeds_text(args) == "2 seeds (3–4)"
    assert options.seeds_text(options.parser("d", steps=10, seeds=3).parse_args([])) == "3 seeds"
    with pytest.raises(SystemExit, match="--first-seed must be >= 0"):
        options.check_args(options.parser("d", steps=10, seeds=3).parse_args(["--first-seed", "-1",
                                                                             "--blas-threads", "system"]))


def test_seed002_ordering_floor_leaves_out_rows_with_a_nonfinite_seed_and_names_the_best():
    from benchmarks.suites import mnist as bench_mnist

    rows = {"ekf_sub_svd": (4000.0, 1), "ekf_sub_svd_clip0.1": (2400.0, 0), "ekf_sub_svd_fullwarm": (4900.0, 0),
            "neural_linear_unlim_mb": (3600.0, 0), "neural_linear_lim": (800.0, 0), "linear": (2200.0, 0)}
    s = pd.DataFrame({"cum_reward": [v for v, _ in rows.values()], "nonfinite_seeds": [b for _, b in rows.values()],
                      "steps": 5000}, index=list(rows))
    (floor,) = bench_mnist._floors_seed002(s, "mlp1")
    assert not floor.met and floor.assessed  # 2400 (the finite subspace row) < 3600; the NaN row's 4000 not used
    assert floor.detail.startswith("best subspace 2400.0 (ekf_sub_svd_clip0.1), best neural-linear 3600.0 "
                                   "(neural_linear_unlim_mb), linear 2200.0")
    assert "left out, NaN/inf state in a seed: ekf_sub_svd" in floor.detail  # the label-reading diagnostic never counts
    s.loc["ekf_sub_svd_clip0.1", "cum_reward"] = 3700.0
    assert bench_mnist._floors_seed002(s, "mlp1")[0].met


def test_seed002_lenet5_floor_says_when_seeds_went_nonfinite():
    from benchmarks.suites import mnist as bench_mnist

    s = pd.DataFrame(dict(cum_reward=[1600.0], cum_reward_se=[500.0], mean_reward=[0.32], mean_reward_se=[0.1],
                          steps=[5000], seeds=[5], nonfinite_seeds=[2]), index=["ekf_sub_svd"])
    (floor,) = bench_mnist._floors_seed002(s, "lenet5")
    assert not floor.met and "NaN/inf in 2 of 5 seeds" in floor.detail and "not a valid result" in floor.detail
    s["nonfinite_seeds"] = 0
    assert "NaN" not in bench_mnist._floors_seed002(s, "lenet5")[0].detail


def test_protocol_line_names_the_tables_seeds_and_render_rewrites_without_running(tmp_path, monkeypatch):
    def write(res, argv, **kw):
        monkeypatch.setattr(sys, "argv", argv)
        return report.write_outputs(res, str(tmp_path), "t", title="T", protocol="20 steps × {seeds}, model",
                                    full_command="full", floors=_floors, **kw)

    write(_noisy(["a", "b"], [0, 1, 2]), ["bench.py"])
    assert "**Protocol run:** 20 steps × 3 seeds, model\n" in (tmp_path / "t.md").read_text()
    write(_noisy(["a", "b"], [3, 4]), ["bench.py", "--add-seeds"], add_seeds=True)
    md = (tmp_path / "t.md").read_text()
    assert "**Protocol run:** 20 steps × 5 seeds, model (the last command above ran 2 seeds (3–4))\n" in md
    write(_noisy(["b"], [0, 1]), ["bench.py", "--merge"], merge=True)  # b re-run on two seeds: rows differ
    assert "× 2–5 seeds (per row: see `seeds`), model (the last command above ran 2 seeds)" in (
        tmp_path / "t.md").read_text()

    (tmp_path / "t.md").write_text((tmp_path / "t.md").read_text().replace("a beats b", "old floor text"))
    write(run.Result(pd.DataFrame(), {}, {}), ["bench.py", "--render"])  # what --render passes
    md = (tmp_path / "t.md").read_text()
    assert "old floor text" not in md and "a beats b: **" in md  # floors judged again by this code
    assert "--render" not in md and md.count("- `python bench.py") == 3  # no command added
    assert "× 2–5 seeds (per row: see `seeds`), model\n" in md
    with pytest.raises(SystemExit, match="--render: no"):
        report.write_outputs(run.Result(pd.DataFrame(), {}, {}), str(tmp_path / "none"), "t", title="T",
                             protocol="p", full_command="f")


def test_check_compares_a_re_made_start_with_the_committed_curve_and_writes_nothing(tmp_path, monkeypatch):
    """--check: the same rows re-made -> equal; other rewards -> DIFFERS (exit status 1); other seeds -> not
    comparable; the table's files are left as they were."""
    _write(tmp_path, _noisy(["a", "b"], [0, 1, 2]), False, ["bench.py"], monkeypatch)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    args = argparse.Namespace(steps=30, seeds=3, first_seed=0, out=str(tmp_path), blas_threads="1", merge=False,
                              add_seeds=False, render=False, check=10)
    options.check_args(args)
    start = _noisy(["a", "b"], [0, 1, 2])
    start = run.Result(start.frame[start.frame["step"] < 12], start.timing)  # the first 12 of 30 rounds
    v = merge.check_against_table(start, str(tmp_path), "t").set_index("agent")
    assert v.loc["a", "verdict"].startswith("re-made:") and v.loc["a", "points"] >= 5
    assert merge.check_exit_status() == 0

    other = _noisy(["b", "a"], [0, 1, 2])  # each agent gets the other's stream
    other = run.Result(other.frame[other.frame["step"] < 12], other.timing)
    v = merge.check_against_table(other, str(tmp_path), "t").set_index("agent")
    assert v.loc["a", "verdict"].startswith("DIFFERS from round") and v.loc["a", "first_step_differing"] >= 0
    assert merge.check_exit_status() == 1

    fewer = _noisy(["a"], [0, 1])
    v = merge.check_against_table(fewer, str(tmp_path), "t").set_index("agent")
    assert v.loc["a", "verdict"] == "not comparable (the table pools 3 seeds, this run 2)"
    _write(tmp_path, start, False, ["bench.py", "--check", "10"], monkeypatch)  # write_outputs in check mode
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    options.check_args(argparse.Namespace(**{**vars(args), "check": None}))  # the next command starts afresh
    assert merge.check_exit_status() == 0


def test_check_refuses_options_that_write():
    args = argparse.Namespace(steps=30, seeds=3, first_seed=0, out="x", blas_threads="1", merge=True,
                              add_seeds=False, render=False, check=10)
    with pytest.raises(SystemExit, match="--check writes nothing"):
        options.check_args(args)
    with pytest.raises(SystemExit, match="--check must be >= 1"):
        options.check_args(argparse.Namespace(**{**vars(args), "merge": False, "check": 0}))
