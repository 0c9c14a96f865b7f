"""The ``lofi_svd`` study (``python -m benchmarks study lofi_svd``) runs end to end at a tiny size."""

from __future__ import annotations

import pandas as pd

from benchmarks.studies import lofi_svd


def test_lofi_svd_study_runs_and_its_accuracy_part_ranks_the_methods(tmp_path):
    assert lofi_svd.main(["--configs", "mlp10k:2", "--rounds", "1", "--reps", "1", "--accuracy-p", "80",
                          "--accuracy-rank", "6", "--out", str(tmp_path)]) == 0
    profile = pd.read_csv(tmp_path / "lofi_svd_profile.csv")
    assert profile.loc[0, "params"] == 10_465 and profile.loc[0, "step_ms"] > 0 and profile.loc[0, "hlo_mflops"] > 0
    methods = pd.read_csv(tmp_path / "lofi_svd_methods.csv")
    assert set(methods.method) == set(lofi_svd.METHODS)
    acc = pd.read_csv(tmp_path / "lofi_svd_accuracy.csv").set_index(["case", "method"])
    for case in ("random", "ill-conditioned 1e+03", "ill-conditioned 1e+06"):
        # every method attains the optimum up to float32 rounding; none beats the float64 SVD (Eckart–Young)
        optimal = acc.loc[(case, "gram_eig"), "optimal"]
        for method in (*lofi_svd.METHODS, "rounded_input"):
            assert acc.loc[(case, method), "error"] >= optimal * (1 - 1e-6)
            assert acc.loc[(case, method), "error"] <= optimal + 50 * 1.2e-7
    assert (tmp_path / "lofi_svd_accuracy.md").read_text().count("| gram_eig |") == 3
    layout = pd.read_csv(tmp_path / "lofi_svd_layout.csv")
    assert len(layout) == 7 and (layout.column_ms > 0).all() and (layout.row_ms > 0).all()


def test_lofi_svd_layouts_compute_the_same_products():
    """Each row-layout pass the layout part times computes its column twin's product (a timing of a different
    computation would compare nothing); both short-row and long-row projections."""
    import jax
    import numpy as np

    for rank in (4, 20):  # rows shorter and longer than linalg.SHORT_ROW
        ups, w, c = lofi_svd._inputs(300, rank)
        v = jax.random.normal(jax.random.PRNGKey(1), (rank, rank))
        passes = lofi_svd.layout_passes(ups, w, c[:, 0], v)
        assert len(passes) == 7
        for name, (col_fn, col_args, row_fn, row_args) in passes.items():
            col, row = np.asarray(col_fn(*col_args)), np.asarray(row_fn(*row_args))
            row = row.T if name in ("copy", "rotation W V") else row  # (L, P) results of the row layout
            np.testing.assert_allclose(row, col, rtol=1e-4, atol=1e-4, err_msg=name)


def test_lofi_svd_study_refuses_bad_configs():
    import pytest

    with pytest.raises(SystemExit, match="NAME:RANK"):
        lofi_svd.main(["--configs", "lenet"])
    with pytest.raises(SystemExit, match="--parts"):
        lofi_svd.main(["--parts", "profile,nothing"])
