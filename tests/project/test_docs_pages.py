"""The Python on the getting-started and own-problem pages runs as written (in a temporary folder), top to bottom,
one namespace per page, and its results are what the text says."""

import pathlib
import re

import numpy as np
import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


def _run_page(name: str, tmp_path, monkeypatch) -> dict:
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / name).read_text(), flags=re.S)
    assert blocks, f"docs/{name} has no python block"
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/{name} block {i + 1}", "exec"), ns)  # noqa: S102 - our own docs
    return ns


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_getting_started_runs(tmp_path, monkeypatch):
    ns = _run_page("getting_started.md", tmp_path, monkeypatch)
    assert set(ns["df"]["agent"]) == {"linear-TS", "linear-greedy"} and (tmp_path / "regret.png").exists()
    assert list(ns["table"].columns[:2]) == ["seeds", "steps"] and (ns["table"]["seeds"] == 2).all()
    assert np.isfinite(float(ns["mean"][0])) and float(ns["cov"][0, 0]) > 0
    x_best, y_best = ns["opt"].best
    assert len(x_best) == 2 and y_best == pytest.approx(float(np.sum((np.asarray(x_best) - 0.5) ** 2)))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_own_problem_runs(tmp_path, monkeypatch):
    ns = _run_page("own_problem.md", tmp_path, monkeypatch)
    assert ns["env"].num_actions == 10 and set(ns["df"]["agent"]) == {"linear-TS", "linear-greedy"}
    assert ns["df"]["reward"].isin([0.0, 1.0]).all() and ns["df"]["regret"].notna().all()
    sim = ns["sim_df"]
    assert len(sim) == 1000 and (sim["regret"] >= -1e-6).all()
    np.testing.assert_allclose(sim["regret"], sim["optimal_reward"] - sim["expected_reward"], atol=1e-5)
    prices = ns["prices"]
    assert len(prices) == 600 and prices["regret"].notna().all() and (prices["regret"] >= -1e-9).all()
    # the reported regret is the env's: the best expected revenue minus the chosen price's
    np.testing.assert_allclose(prices["regret"], prices["optimal_reward"] - prices["expected_reward"], atol=1e-6)
