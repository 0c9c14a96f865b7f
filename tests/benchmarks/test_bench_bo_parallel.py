"""``python -m benchmarks bo_parallel``: worker processes on one JournalStorage, end to end at a tiny size; the
summary's ratios against one worker; clear errors for bad options.

The end-to-end run uses the small surrogate of tests/bo/test_optuna_sampler.py (HiLoFi rank 2 on a 2×16 MLP) and no
sleep; its worker processes inherit the test run's XLA compilation cache (tests/conftest.py)."""

import os

import numpy as np
import pandas as pd
import pytest

optuna = pytest.importorskip("optuna")

from benchmarks.suites import bo_parallel  # noqa: E402


def test_tiny_run_end_to_end_every_point_distinct(tmp_path):
    out, journals = tmp_path / "out", tmp_path / "journals"
    argv = ["--tasks", "ackley_mixed", "--workers", "1,2", "--seeds", "1", "--budget", "8", "--startup", "4",
            "--eval-seconds", "0", "--small-surrogate", "--no-warmup", "--first-trial-repeats", "0", "--out", str(out),
            "--keep-journals", str(journals)]
    assert bo_parallel.main(argv) == 0
    runs = pd.read_csv(out / "bo_parallel.csv")
    assert sorted(zip(runs.sampler, runs.workers, strict=True)) == [("banditkit", 1), ("banditkit", 2), ("tpe", 1),
                                                                     ("tpe", 2)]
    assert (runs.trials == 8).all() and (runs.distinct == 8).all() and (runs.failed == 0).all()
    assert (runs.wall_s > runs.span_s).all() and (runs.span_s > 0).all()
    assert np.allclose(runs.evals_per_s, 8 / runs.wall_s) and (runs.load_before >= 0).all()
    for _, r in runs.iterrows():
        counts = [int(v) for v in str(r.per_worker).split("/")]
        assert len(counts) == r.workers and sum(counts) == 8
    # the journals themselves: trials 0..7 complete, 8 distinct points, the regret the CSV gives (Ackley's minimum 0)
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    for _, r in runs.iterrows():
        path = journals / f"ackley_mixed_{r.sampler}_w{r.workers}_s0.log"
        trials = optuna.load_study(study_name=bo_parallel.STUDY,
                                   storage=JournalStorage(JournalFileBackend(str(path)))).trials
        done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert sorted(t.number for t in done) == list(range(8))
        assert len({tuple(sorted(t.params.items())) for t in done}) == 8
        assert {t.user_attrs["worker"] for t in done} <= set(range(r.workers))
        assert r.final_regret == r.final_best == min(t.value for t in done) >= 0.0
        assert len(trials) == 8 + r.pruned
    md = (out / "bo_parallel.md").read_text()
    assert "| ackley_mixed | banditkit (small surrogate) | 2 | 1 |" in md and "| ackley_mixed | tpe | 1 | 1 |" in md
    assert "0 s sleep" in md and "synthetic" in md and "--keep-journals" in md and "BLAS threads 1" in md
    # a second run of the same command skips the runs already there; --report rebuilds the table from the CSV
    assert bo_parallel.main(argv) == 0
    assert len(pd.read_csv(out / "bo_parallel.csv")) == 4
    os.remove(out / "bo_parallel.md")
    assert bo_parallel.main(["--report", "--out", str(out)]) == 0
    assert "| ackley_mixed | tpe | 2 | 1 |" in (out / "bo_parallel.md").read_text()


def test_summary_ratios_against_one_worker():
    """Speed-up = mean wall(1) / mean wall(w), regret ratio = mean regret(w) / mean regret(1), per sampler."""
    rows = []
    for sampler, walls, regrets in (("banditkit", {1: [40.0, 44.0], 2: [21.0, 23.0], 4: [15.0, 17.0]},
                                     {1: [1.0, 3.0], 2: [2.0, 4.0], 4: [1.0, 1.0]}),
                                    ("tpe", {1: [30.0, 30.0], 2: [20.0, 10.0], 4: [6.0, 6.0]},
                                     {1: [4.0, 4.0], 2: [2.0, 2.0], 4: [8.0, 8.0]})):
        for w in (1, 2, 4):
            for seed in (0, 1):
                rows.append(dict(task="ackley_mixed", sampler=sampler, workers=w, seed=seed, budget=40, startup=10,
                                 eval_s=1.0, surrogate="default" if sampler == "banditkit" else np.nan,
                                 wall_s=walls[w][seed], span_s=walls[w][seed] / 2, final_best=regrets[w][seed],
                                 final_regret=regrets[w][seed], trials=40, distinct=40, pruned=0, failed=0,
                                 per_worker="/".join(["10"] * w if seed else [str(40 // w)] * w),
                                 s_per_bo_trial=0.5, load=2.0 + w))
    s = bo_parallel.summary(pd.DataFrame(rows)).set_index(["sampler", "workers"])
    assert s.loc[("banditkit", 2), "speedup"] == pytest.approx(42.0 / 22.0)
    assert s.loc[("banditkit", 4), "span_speedup"] == pytest.approx(21.0 / 8.0)
    assert s.loc[("banditkit", 2), "regret_ratio"] == pytest.approx(3.0 / 2.0)
    assert s.loc[("tpe", 4), "speedup"] == pytest.approx(5.0) and s.loc[("tpe", 4), "regret_ratio"] == 2.0
    assert s.loc[("tpe", 1), "speedup"] == 1.0 and s.loc[("banditkit", 2), "wall_se"] == pytest.approx(1.0)
    assert s.loc[("banditkit", 2), "per_worker"] == "15/15"  # seed 0: 20/20, seed 1: 10/10
    assert s.loc[("tpe", 4), "load"] == 6.0
    assert list(s.index.get_level_values(0)) == ["banditkit"] * 3 + ["tpe"] * 3


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0,2"], "--workers must be a comma list of positive integers"),
    (["--workers", "two"], "--workers must be a comma list of positive integers"),
    (["--tasks", "branin"], "--tasks: unknown"),
    (["--samplers", "gp"], "--samplers: unknown"),
    (["--budget", "10", "--startup", "10"], "--budget > --startup"),
])
def test_bad_options_are_refused_with_what_to_do(argv, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        bo_parallel.main([*argv, "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def test_a_failing_worker_is_reported_with_its_output(tmp_path):
    spec = dict(task="no_such_task", sampler="tpe", seed=0, budget=8, startup=4, eval_s=0.0, surrogate="",
                blas_threads="1", journal=str(tmp_path / "journal.log"))
    with open(tmp_path / "worker0.log", "w+") as log:
        with pytest.raises(RuntimeError, match=r"(?s)no_such_task tpe workers=1 seed=0: worker 0 exited with status "
                                               r"1:.*KeyError: 'no_such_task'"):
            bo_parallel._start_and_wait(spec, 1, [log], bo_parallel.worker_env(str(tmp_path / "cache")), 300.0)


def test_first_trial_table_means_cold_and_warm(tmp_path):
    """``bo_first_trial.markdown``: one row per cache state, means ± s.e. over its processes and the load before."""
    from benchmarks.suites import bo_first_trial

    rows = [dict(repeat=0, cache=c, run=k, import_s=2.0, sampler_s=s_, first_bo_s=f, next_bo_s=0.05,
                 to_first_answer_s=t, load_before=l_)
            for k, (c, s_, f, t, l_) in enumerate([("cold", 5.0, 9.0, 20.0, 1.0), ("warm", 2.0, 1.0, 8.0, 2.0),
                                                   ("warm", 2.0, 2.0, 10.0, 4.0)])]
    csv = tmp_path / "bo_first_trial.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    md = "\n".join(bo_first_trial.markdown(str(csv)))
    assert "| 0 | cold | 1 | 2.00 ± 0.00 | 5.00 ± 0.00 | 9.00 ± 0.00 | 0.050 | 20.00 ± 0.00 | 1.0 |" in md
    assert "| 0 | warm | 2 | 2.00 ± 0.00 | 2.00 ± 0.00 | 1.50 ± 0.50 | 0.050 | 9.00 ± 1.00 | 3.0 |" in md
    assert bo_first_trial.markdown(str(tmp_path / "none.csv")) == []
