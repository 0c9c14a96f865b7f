"""Study bo_heldout (benchmarks/studies/bo_heldout): the pre-registered adoption rule's counts on hand-made runs, and
one tiny real run when COCO's package is installed (the bench extra)."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.studies import bo_heldout


def _runs(regrets: dict, times: dict) -> pd.DataFrame:
    rows = []
    for (task, method), values in regrets.items():
        for seed, v in enumerate(values):
            rows.append(dict(task=task, method=method, seed=seed, final_regret=v, s_per_bo_trial=times[method]))
    return pd.DataFrame(rows)


def test_the_adoption_rule_counts():
    times = {"bk_auto": 0.1, "tpe": 0.01, "gpsampler": 1.0}
    r = {
        # ahead of TPE; behind GPSampler by far more than one s.e. of the difference
        ("p1", "bk_auto"): [2.0, 2.0], ("p1", "tpe"): [3.0, 3.0], ("p1", "gpsampler"): [0.0, 0.0],
        # ahead of both
        ("p2", "bk_auto"): [1.0, 1.0], ("p2", "tpe"): [2.0, 2.0], ("p2", "gpsampler"): [1.5, 1.5],
        # behind TPE; level with GPSampler within one s.e. of the difference (s.e.s 1 and 0: 2.5 <= 2 + 1)
        ("p3", "bk_auto"): [1.5, 3.5], ("p3", "tpe"): [1.0, 1.0], ("p3", "gpsampler"): [2.0, 2.0],
    }
    s = bo_heldout.summary(_runs(r, times), "bk_auto")
    assert (s["problems"], s["ahead_of_tpe"], s["level_with_gp"]) == (3, 2, 2)
    assert s["time_ratio"] == pytest.approx(0.1)
    assert not s["passes"]  # 2 of 3 ahead of TPE < 80 %
    r[("p3", "bk_auto")] = [0.5, 0.5]
    s = bo_heldout.summary(_runs(r, times), "bk_auto")
    assert (s["ahead_of_tpe"], s["level_with_gp"], s["passes"]) == (3, 2, True)
    times["bk_auto"] = 0.3  # > 1/5 of GPSampler's seconds
    assert not bo_heldout.summary(_runs(r, times), "bk_auto")["passes"]


def test_a_coco_problem_through_optuna(tmp_path):
    task = bo_heldout.CocoMixint(2)
    assert task.n_int == 4 and task.lo.size == 5 and np.isfinite(task.optimum)
    assert bo_heldout.main(["--functions", "2", "--methods", "tpe", "--seeds", "1", "--budget", "12",
                            "--out", str(tmp_path)]) == 0
    runs = pd.read_csv(tmp_path / "bo_heldout_runs.csv")
    assert len(runs) == 1 and runs.final_regret[0] >= 0
