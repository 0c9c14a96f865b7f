"""The BONG suite's final-checkpoint table (benchmarks/suites/bong.py): seeds that diverged are counted but not
averaged in."""

from __future__ import annotations

import argparse
import math

import pandas as pd

from benchmarks.suites import bong as bench_bong

NAN = float("nan")


def _rows():
    rows = []
    # "good": three seeds reach step 400
    for seed, v in enumerate([1.0, 2.0, 3.0]):
        rows += [dict(method="good", seed=seed, step=100, seconds=1.0, nlpd=9.0, rmse=9.0),
                 dict(method="good", seed=seed, step=400, seconds=2.0 + seed, nlpd=v, rmse=v / 10)]
    # "flaky": seed 1 diverges at step 200 (its run stops there with NaN)
    rows += [dict(method="flaky", seed=0, step=400, seconds=4.0, nlpd=0.5, rmse=0.05),
             dict(method="flaky", seed=1, step=100, seconds=1.0, nlpd=0.1, rmse=0.01),
             dict(method="flaky", seed=1, step=200, seconds=1.5, nlpd=NAN, rmse=NAN)]
    # "dead": every seed diverges
    rows += [dict(method="dead", seed=s, step=100 * (s + 1), seconds=1.0, nlpd=NAN, rmse=NAN) for s in range(2)]
    return pd.DataFrame(rows)


def test_final_table_averages_only_the_seeds_that_finished():
    t = bench_bong.final_table(_rows(), ["nlpd", "rmse"])
    assert list(t.index) == ["flaky", "good", "dead"]  # sorted by the first metric, no finished seed last
    good = t.loc["good"]
    assert (good["seeds"], good["finished"], good["step"]) == (3, 3, 400)
    assert math.isclose(good["nlpd"], 2.0) and math.isclose(good["nlpd_se"], 1.0 / math.sqrt(3))
    assert math.isclose(good["rmse"], 0.2) and math.isclose(good["seconds"], 3.0)
    flaky = t.loc["flaky"]
    # the diverged seed is counted, not averaged in (a NaN-skipping mean would have hidden it)
    assert (flaky["seeds"], flaky["finished"], flaky["step"]) == (2, 1, 400)
    assert flaky["nlpd"] == 0.5 and math.isnan(flaky["nlpd_se"]) and flaky["seconds"] == 4.0
    dead = t.loc["dead"]
    assert (dead["seeds"], dead["finished"], dead["step"]) == (2, 0, 200)
    assert math.isnan(dead["nlpd"])


def test_markdown_shows_how_many_seeds_finished(tmp_path):
    args = argparse.Namespace(out=str(tmp_path / "bong"), seeds=3)
    df = _rows().rename(columns={"nlpd": "nlpd_plugin", "rmse": "rmse"}).assign(task="regression", nlpd_lin=1.0)
    bench_bong.write_markdown(df, args, [], 1.0)
    text = (tmp_path / "bong.md").read_text()
    assert "| flaky | 1 / 2 | 400 | 0.500 |" in text
    assert "| good | 3 / 3 | 400 | 2.000 ± 0.577 |" in text
    assert "| dead | 0 / 2 | 200 | nan |" in text


def test_reuse_takes_only_complete_runs_at_the_same_checkpoints_and_settings():
    S = "test=1000;init_cov=0.01;lin_mc=10;data=MNIST"
    old = _rows().rename(columns={"nlpd": "nlpd_plugin"}).assign(task="mnist", settings=S)
    cps = [100, 200, 300, 400]
    # "good" seed 0 has steps 100, 400: not this run's checkpoints in order (made with other steps) -> re-run
    assert bench_bong.finished_rows(old, "mnist", "good", 0, cps, S) == []
    assert [r["step"] for r in bench_bong.finished_rows(old, "mnist", "good", 0, [100, 400], S)] == [100, 400]
    # a run that diverged at 200 is complete: its NaN row is kept, so the table counts it as not finished
    got = bench_bong.finished_rows(old, "mnist", "flaky", 1, [100, 200, 400], S)
    assert [r["step"] for r in got] == [100, 200] and math.isnan(got[-1]["nlpd_plugin"])
    # interrupted (finite, short of the last checkpoint) or absent, or another task: run again
    short = old[(old.method == "flaky") & (old.seed == 1) & (old.step == 100)]
    assert bench_bong.finished_rows(short, "mnist", "flaky", 1, [100, 200, 400], S) == []
    assert bench_bong.finished_rows(old, "mnist", "good", 7, [100, 400], S) == []
    assert bench_bong.finished_rows(old, "regression", "good", 0, [100, 400], S) == []
    assert bench_bong.finished_rows(pd.DataFrame(), "mnist", "good", 0, [100, 400], S) == []
    # made with other flags (another test-set size), or before the settings column existed: run again
    flags = argparse.Namespace(mnist_test=1000, mnist_init_cov=0.01, lin_mc=10)
    other = bench_bong.mnist_settings(argparse.Namespace(**dict(vars(flags), mnist_test=500)), "MNIST")
    assert other != S and bench_bong.finished_rows(old, "mnist", "good", 0, [100, 400], other) == []
    assert bench_bong.finished_rows(old.drop(columns="settings"), "mnist", "good", 0, [100, 400], S) == []
    assert bench_bong.mnist_settings(flags, "MNIST") == S
    assert bench_bong.mnist_settings(flags, "synthetic") != S  # the cache was empty: not the same data
