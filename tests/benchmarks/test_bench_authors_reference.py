"""benchmarks.peers.authors_lrlli and ``speed --reference-dir``: the authors' HiLoFi / LRKF are built from a user's
checkout with the arguments their code takes (``update(bel, y, x)``, the last layer named ``last_layer``), and a
wrong folder or a missing dependency is a clear error.  The authors' code is not in banditkit and cannot be fetched
here, so the adapter's plumbing is checked against a stand-in checkout that records how it is called; the real
timing is the speed suite's (``benchmarks/results/speed_authors.md``)."""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import pytest

from benchmarks.peers import authors_lrlli
from benchmarks.suites import speed

STAND_IN = '''
CALLS = []

class _Filter:
    def __init__(self, mean_fn, cov_fn, **kw):
        self.mean_fn_tree, self.cov_fn, self.kw = mean_fn, cov_fn, kw
        CALLS.append(("new", type(self).__name__, kw))

    def init_bel(self, params, **kw):
        CALLS.append(("init_bel", sorted(params["params"]), kw))
        self.params = params
        return {"n": 0.0}

    def predict(self, bel):
        return bel

    def update(self, bel, y, x):
        CALLS.append(("update", float(y[0]), float(x[0])))
        out = self.mean_fn_tree(self.params, x)
        return {"n": bel["n"] + 1.0 + 0.0 * out.sum()}
'''


@pytest.fixture
def checkout(tmp_path):
    methods = tmp_path / "experiments" / "methods"
    methods.mkdir(parents=True)
    (methods / "__init__.py").write_text("")
    (methods / "low_rank_last_layer.py").write_text(STAND_IN + "\nclass LowRankLastLayer(_Filter):\n    pass\n")
    (methods / "low_rank_filter_revised.py").write_text(
        "from .low_rank_last_layer import _Filter, CALLS\n\nclass LowRankCovarianceFilter(_Filter):\n    pass\n")
    yield tmp_path
    for name in [m for m in sys.modules if m == "methods" or m.startswith("methods.")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]


def _model():
    from banditkit.models.nets import MLP

    model = MLP(features=(4,), out=1)
    return model, model.init(jax.random.PRNGKey(0), jnp.zeros(3))


def test_the_adapter_calls_the_authors_api_with_their_names_and_argument_order(checkout):
    model, params = _model()
    for name, cls, kw in (("authors_hilofi", "LowRankLastLayer",
                           dict(rank=5, dynamics_hidden=0.0, dynamics_last=0.0, rank_last=None)),
                          ("authors_lrkf", "LowRankCovarianceFilter", dict(dynamics_covariance=0.0, rank=5))):
        f = authors_lrlli.make(name, str(checkout), model.apply, params, rank=5)
        calls = sys.modules["methods.low_rank_last_layer"].CALLS
        calls.clear()
        state = f.init(params)
        state = f.update(f.predict(state), jnp.array([7.0, 0, 0]), jnp.array([3.0]))
        assert calls[0][0] == "init_bel" and "last_layer" in calls[0][1] and "head" not in calls[0][1]
        assert calls[1] == ("update", 3.0, 7.0)  # their order: y, then x
        assert f.filter.kw == kw and type(f.filter).__name__ == cls
        # the wrapped model function takes their parameter names and computes banditkit's model
        theirs = authors_lrlli.rename_last(params, "head", "last_layer")
        x = jnp.array([0.5, -1.0, 2.0])
        assert jnp.allclose(f.filter.mean_fn_tree(theirs, x), model.apply(params, x))
        assert jnp.allclose(f.filter.cov_fn(), 0.1 * jnp.eye(1))


def test_wrong_folder_and_unknown_names_are_clear_errors(tmp_path, checkout):
    model, params = _model()
    with pytest.raises(FileNotFoundError, match="not a checkout of gerdm/low-rank-last-layer-inference"):
        authors_lrlli.make("authors_hilofi", str(tmp_path / "nowhere"), model.apply, params, rank=2)
    with pytest.raises(ValueError, match="unknown reference backend"):
        authors_lrlli.make("authors_lofi", str(checkout), model.apply, params, rank=2)
    with pytest.raises(KeyError, match="no layer 'last'"):
        authors_lrlli.rename_last(params, "last", "x")
    with pytest.raises(SystemExit):
        speed.main(["--reference-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])


def test_a_missing_dependency_of_the_checkout_names_what_to_install(tmp_path):
    methods = tmp_path / "experiments" / "methods"
    methods.mkdir(parents=True)
    (methods / "__init__.py").write_text("")
    for f in ("low_rank_last_layer.py", "low_rank_filter_revised.py"):
        (methods / f).write_text("import a_dependency_that_is_not_installed_xyz\n")
    try:
        with pytest.raises(ImportError, match="pip install chex distrax"):
            authors_lrlli.load_modules(str(tmp_path))
    finally:
        for name in [m for m in sys.modules if m == "methods" or m.startswith("methods.")]:
            del sys.modules[name]
        sys.path[:] = [p for p in sys.path if not p.startswith(str(tmp_path))]


def test_same_run_lines_compare_the_authors_rows_with_banditkits():
    import pandas as pd

    df = pd.DataFrame([dict(config="lenet", rank=50, backend="hilofi", step_ms=5.0),
                       dict(config="lenet", rank=50, backend="authors_hilofi", step_ms=20.0),
                       dict(config="lenet", rank=50, backend="lrkf", step_ms=4.0)])
    lines = speed.same_run_lines(df)
    assert any("lenet, rank 50, HiLoFi" in line and "authors / banditkit = 4.00" in line for line in lines)
    assert not any("LRKF" in line for line in lines)  # no authors' LRKF row: nothing to compare
    assert speed.same_run_lines(df[df.backend != "authors_hilofi"]) == []


def test_windows_are_interleaved_and_merged_to_medians():
    ws = [dict(step_ms=1.0, step_p10_ms=1.0, step_min_ms=1.0, grad_ms=1.0, gemm_gflops=10.0, floor_window_ms=2.0,
               other_cores_step=0.1, finite=True, compile_s=3.0),
          dict(step_ms=5.0, step_p10_ms=2.0, step_min_ms=1.0, grad_ms=3.0, gemm_gflops=30.0, floor_window_ms=2.0,
               other_cores_step=0.4, finite=True, compile_s=1.0),
          dict(step_ms=2.0, step_p10_ms=3.0, step_min_ms=1.0, grad_ms=2.0, gemm_gflops=20.0, floor_window_ms=2.0,
               other_cores_step=0.2, finite=True, compile_s=1.0),
          dict(note="error: X")]
    m = speed._merge_windows(ws)
    assert m["step_ms"] == 2.0 and m["step_p10_ms"] == 2.0 and m["windows"] == 3
    assert m["other_cores_step"] == 0.4 and m["compile_s"] == 3.0
    assert m["grad_ms"] == 2.0 and m["gemm_gflops"] == 20.0 and not any(k.startswith("_") for k in m)
    assert speed._merge_windows([dict(note="error: Y")]) == dict(note="error: Y")
