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
    """The row-layout forms the layout part times are the same products as the column ones (a timing of a
    different computation would compare nothing)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from banditkit.posteriors import linalg

    ups, w, c = lofi_svd._inputs(300, 4)
    wt = w.T
    b = wt * jax.lax.rsqrt(ups)
    np.testing.assert_allclose(b @ b.T, linalg.inv_weighted_gram(w, ups), rtol=1e-4)
    np.testing.assert_allclose(wt @ c[:, 0], linalg.tall_t_matmul(w, c[:, 0]), rtol=1e-4, atol=1e-4)
    v = jnp.eye(4)[::-1]
    np.testing.assert_allclose((v.T @ wt).T, w @ v, rtol=1e-6)


def test_lofi_svd_study_refuses_bad_configs():
    import pytest

    with pytest.raises(SystemExit, match="NAME:RANK"):
        lofi_svd.main(["--configs", "lenet"])
    with pytest.raises(SystemExit, match="--parts"):
        lofi_svd.main(["--parts", "profile,nothing"])
