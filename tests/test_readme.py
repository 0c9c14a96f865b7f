"""The README's quick tour runs as written (in a temporary directory, so its files land there)."""

import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_quick_tour_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python block"
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)  # noqa: S102 - our own README
    assert (tmp_path / "regret.png").stat().st_size > 10_000
    assert (tmp_path / "run.bk").exists()
    assert np.all(np.isfinite(np.asarray(ns["mean"]))) and float(ns["cov"][0, 0]) > 0
    x_best, y_best = ns["opt"].best
    assert np.isfinite(y_best) and len(x_best) == 2
    assert set(ns["df"]["agent"]) == {"hilofi-ts", "linear-ts"}
