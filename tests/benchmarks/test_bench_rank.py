"""The rank suite (benchmarks/suites/rank.py): the Pareto front, one run on a synthetic stream, and the table
written from the rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.suites import rank as bench_rank


def test_pareto_keeps_exactly_the_points_nothing_beats():
    cost = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 4.0])
    quality = np.array([0.5, 0.4, 0.7, 0.7, 0.9, 0.8])
    # 1: slower and worse than 0; 3: ties 2 on quality but slower; 5: ties 4 on cost but worse
    assert bench_rank.pareto(cost, quality).tolist() == [True, False, True, False, True, False]
    # equal points do not knock each other out
    assert bench_rank.pareto(np.array([1.0, 1.0]), np.array([0.5, 0.5])).tolist() == [True, True]


@pytest.mark.parametrize("method", list(bench_rank.LABELS))
def test_every_method_builds_the_notebook_settings(method):
    import banditkit as bk

    post = bench_rank.posterior(method, bk.models.LeNet5(out=10).apply, rank=3, seed=0)
    assert post.name.startswith(method.split("_")[0])
    # the _ref variants run the reference code's dynamics (q in the gain only); every other one the paper's
    assert post.hyper.get("dynamics_mode", "carry") == ("gain" if method.endswith("_ref") else "carry")
    assert bench_rank.style(method)["color"] == bench_rank.COLOURS[method.removesuffix("_ref")]
    # the Pareto line's short name drops the parenthesised detail but keeps the variant
    assert "(" not in bench_rank.short_label(method)
    assert bench_rank.short_label(method).endswith("q in the gain only") == method.endswith("_ref")
    with pytest.raises(SystemExit, match="unknown method"):
        bench_rank.posterior("ekf", None, rank=3, seed=0)


def synthetic_rows() -> pd.DataFrame:
    rows = []
    for method, base, ms in [("hilofi", 0.80, 5.0), ("lrkf", 0.70, 2.0)]:
        for rank, gain, extra in [(1, 0.0, 0.0), (10, 0.05, 3.0)]:
            for seed in range(3):
                rows.append(dict(method=method, rank=rank, seed=seed, steps=100, last=20,
                                 accuracy=base + gain - 0.1, accuracy_last=base + gain + 0.01 * seed,
                                 nlpd_last=1.0 - gain, compile_s=2.0, run_s=(ms + extra) / 10,
                                 ms_per_step=ms + extra + 0.1 * seed, nonfinite=0, command="python b.py",
                                 machine="test machine", load=1.0))
    return pd.DataFrame(rows)


def test_render_writes_the_table_the_front_and_keeps_hand_notes(tmp_path):
    (tmp_path / "rank_study.md").write_text("# old\n\n**Run note (by hand):** kept.\n")
    bench_rank.render(synthetic_rows(), str(tmp_path), "rank_study")
    md = (tmp_path / "rank_study.md").read_text()
    assert (tmp_path / "rank_study.png").stat().st_size > 10_000
    table = [line for line in md.splitlines() if line.startswith("| HiLoFi") or line.startswith("| LRKF")]
    assert len(table) == 4
    # seed means (ms, accuracy): hilofi 1 (5.1, 0.81), hilofi 10 (8.1, 0.86), lrkf 1 (2.1, 0.71), lrkf 10 (5.1, 0.76);
    # lrkf 10 is as slow as hilofi 1 and less accurate, so it alone is off the front
    front = [line.split(" | ")[0:2] for line in table if line.rstrip().endswith("| yes |")]
    assert front == [["| HiLoFi", "1"], ["| HiLoFi", "10"], ["| LRKF", "1"]]
    assert "LRKF rank 1 (2.1 ms, 0.710), HiLoFi rank 1 (5.1 ms, 0.810), HiLoFi rank 10 (8.1 ms, 0.860)" in md
    assert "0.810 ± 0.006" in md  # hilofi rank 1, accuracy over the last steps: mean and s.e. of 0.80/0.81/0.82
    assert "**Run note (by hand):** kept." in md
    assert "test machine; load 1.0–1.0 over 12 runs" in md


def test_one_run_on_a_synthetic_stream_reports_accuracy_and_time():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, 40)
    x = (rng.integers(0, 50, (40, 28, 28)) + 20 * y[:, None, None]).astype(np.uint8)
    row = bench_rank.run_one("lrkf", 2, 1, x, y, steps=30, last=10)
    assert row["method"] == "lrkf" and row["rank"] == 2 and row["seed"] == 1 and row["steps"] == 30
    assert 0.0 <= row["accuracy_last"] <= 1.0 and row["nonfinite"] == 0
    assert row["ms_per_step"] > 0 and row["compile_s"] > 0
    assert "BLAS threads" in row["machine"]
