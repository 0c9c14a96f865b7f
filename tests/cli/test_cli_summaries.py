"""The summaries a command prints say what was measured: no ``± nan`` for one seed, a categorical ``None`` as
``None`` (not the ``nan`` a CSV reads back)."""

import csv

from banditkit.cli import main


def test_bo_space_summary_of_one_seed_with_a_none_choice(tmp_path, monkeypatch, capsys):
    (tmp_path / "space.json").write_text('{"x": {"type": "float", "low": 0, "high": 1}, '
                                         '"c": {"type": "categorical", "choices": [null, "a"]}}')
    (tmp_path / "obj.py").write_text("def f(p):\n    return p['x'] ** 2 + (0 if p['c'] is None else 1)\n")
    monkeypatch.chdir(tmp_path)
    argv = ["bo", "--space", "space.json", "--objective", "obj:f", "--evals", "4", "--seeds", "1", "--features", "8",
            "--rank", "2", "--candidates", "16", "--out", "o", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("| hilofi-thompson |")]
    assert len(row) == 1 and "nan" not in row[0] and "±" not in row[0], out
    with open(tmp_path / "o" / "bo.csv") as fh:
        rows = list(csv.DictReader(fh))
    best = min(rows, key=lambda r: float(r["y"]))
    assert f"c={(best['c'] or None)!r}" in row[0]  # the CSV writes None as an empty cell
    assert "best y (mean over 1 seed)" in out


def test_summary_table_shows_no_standard_error_for_one_seed():
    import numpy as np
    import pandas as pd

    from banditkit.experiments.summary import summarize, to_markdown

    rows = [dict(agent=a, seed=s, step=t, reward=1.0, cumulative_regret=float(r * (t + 1)))
            for a, seeds, r in (("two", (0, 1), 2.0), ("one", (0,), 3.0)) for s in seeds for t in range(3)]
    df = pd.DataFrame(rows)
    df.loc[(df.agent == "two") & (df.seed == 1), "cumulative_regret"] += np.array([0.0, 0.0, 2.0])
    md = to_markdown(summarize(df)).splitlines()
    assert md[2].startswith("| two | 2 | 3 | 7 ± 1 |")  # final regret 6 and 8: mean 7, s.e. 1
    assert md[3].startswith("| one | 1 | 3 | 9 |")
