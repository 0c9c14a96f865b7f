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
