"""The BO suite's query_loop (benchmarks/suites/bo.py): a peer's BO run (hours for BoTorch on DrawNN200)
checkpoints after every query, so a run killed after k queries resumes and ends exactly as the uninterrupted run
does."""

from __future__ import annotations

import os

import numpy as np
import pytest

from benchmarks.suites import bo as bench_bo


class _Sphere:
    """f(x) = ‖x − 0.3‖² on [0, 1]^d."""

    def value(self, x):
        x = np.asarray(x, np.float64)
        return np.sum((x - 0.3) ** 2, axis=-1)


class _Proposer:
    """Stateful random proposer: the best told point plus noise drawn from a counter-based stream (stands in for
    torch's global RNG), so resuming without restoring the RNG state would change every later query."""

    def __init__(self, seed: int):
        self.state = np.array([seed, 0], np.int64)  # (seed, draws so far)
        self.calls = 0

    def __call__(self, X: np.ndarray, G: np.ndarray):
        self.calls += 1
        noise = np.random.default_rng(self.state.tolist()).standard_normal(X.shape[1])
        self.state = self.state + np.array([0, 1])
        x = np.clip(X[np.argmax(G)] + 0.1 * noise, 0.0, 1.0)
        return x, dict(fit_s=0.01 * len(X), acq_s=0.002)

    def rng_pair(self):
        def put(state):
            self.state = np.asarray(state, np.int64).copy()

        return (lambda: self.state.copy()), put


class _Kill(Exception):
    pass


def _killing(proposer: _Proposer, after: int):
    def propose(X, G):
        if proposer.calls == after:
            raise _Kill
        return proposer(X, G)

    return propose


WARM = np.random.default_rng(0).random((3, 3))


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    f, budget = _Sphere(), 12
    ref = _Proposer(1)
    ys_ref, times_ref, parts_ref = bench_bo.query_loop(ref, f, WARM, budget, None, ref.rng_pair())
    assert len(ys_ref) == budget and set(parts_ref) == {"fit_s", "acq_s"}

    path = str(tmp_path / "ck" / "run.npz")
    first = _Proposer(1)
    with pytest.raises(_Kill):
        bench_bo.query_loop(_killing(first, 5), f, WARM, budget, path, first.rng_pair())
    saved = bench_bo.load_checkpoint(path)
    assert len(saved["ys"]) == 5 and saved["X"].shape == (3 + 5, 3)
    assert not [p for p in os.listdir(tmp_path / "ck") if "tmp" in p]  # atomic write: no half-written file left

    fresh = _Proposer(99)  # a new process: different RNG until the checkpoint restores it
    ys, times, parts = bench_bo.query_loop(fresh, f, WARM, budget, path, fresh.rng_pair())
    assert fresh.calls == budget - 5  # only the missing queries are asked
    np.testing.assert_array_equal(ys, ys_ref)
    assert len(times) == budget and len(parts["fit_s"]) == budget
    np.testing.assert_allclose(parts["fit_s"], parts_ref["fit_s"])  # the part timings follow n = 3, 4, ...

    # a finished checkpoint answers at once; a shorter budget is the run's prefix
    again = _Proposer(7)
    ys_short, _, _ = bench_bo.query_loop(again, f, WARM, 8, path, again.rng_pair())
    assert again.calls == 0
    np.testing.assert_array_equal(ys_short, ys_ref[:8])


def test_checkpoint_of_another_run_is_refused(tmp_path):
    f, path = _Sphere(), str(tmp_path / "run.npz")
    p = _Proposer(1)
    bench_bo.query_loop(p, f, WARM, 3, path, p.rng_pair())
    with pytest.raises(SystemExit, match="warm-up points differ"):
        bench_bo.query_loop(p, f, WARM + 0.01, 3, path, p.rng_pair())


def test_checkpoint_path_names_task_method_seed(tmp_path):
    assert bench_bo.checkpoint_path(None, "drawnn200", "botorch", 0) is None
    assert bench_bo.checkpoint_path(str(tmp_path), "drawnn200", "botorch", 2).endswith("drawnn200_botorch_seed2.npz")


def test_unfinished_checkpoint_is_reported_as_partial(tmp_path):
    """bo.md lists a checkpointed run with no row in bo_runs.csv as partial, with the regret the runner computes."""
    import pandas as pd

    from banditkit.environments.bo_functions import make_function

    f = make_function("branin")
    warm = np.random.default_rng(0).random((2, 2))
    p = _Proposer(3)
    with pytest.raises(_Kill):
        bench_bo.query_loop(_killing(p, 4), f, warm, 40, bench_bo.checkpoint_path(str(tmp_path), "branin", "botorch",
                                                                                  0), p.rng_pair())
    finished = pd.DataFrame(dict(task=["branin"], method=["botorch"], seed=[1]))  # another seed: done
    part = bench_bo.checkpointed_runs(str(tmp_path), finished)
    assert list(part.iter) == [1, 2, 3, 4] and set(part.budget) == {40} and set(part.seed) == {0}
    assert not part.finished.any()
    z = bench_bo.load_checkpoint(bench_bo.checkpoint_path(str(tmp_path), "branin", "botorch", 0))
    best = np.minimum.accumulate(np.minimum(f.value(warm).min(), z["ys"]))
    np.testing.assert_allclose(part.regret, best - f.minimum)
    done = pd.DataFrame(dict(task=["branin"], method=["botorch"], seed=[0]))
    assert bench_bo.checkpointed_runs(str(tmp_path), done).finished.all()  # finished: its checkpoint is not partial
    md = "\n".join(bench_bo._partials_md(part, pd.DataFrame(columns=["task", "iter", "method", "regret"]), "ck"))
    assert "| branin | botorch | 0 | 4 / 40 |" in md
    timing = "\n".join(bench_bo._ask_time_md(part))
    assert "| branin | botorch | 0 + 1 | 1–4 | 2–5 |" in timing  # fit_s = 0.01 n: median over n = 2..5
