"""The kuairec suite (benchmarks/suites/kuairec.py) on a sized synthetic look-alike: the output says it is synthetic
and of which size, carries the random / oracle reference rows of the daily table, is re-made by --check; a malformed
size, --render and --merge are refused with the reason."""

from __future__ import annotations

import sys

import pytest

from benchmarks.harness import merge
from benchmarks.suites import kuairec as bench_kuairec


def test_sized_lookalike_run_is_labelled_and_has_reference_rows(tmp_path, monkeypatch, capsys):
    argv = ["bench_kuairec.py", "--seeds", "3", "--steps", "30", "--agents", "hilofi_ts",
            "--lookalike-size", "12,20,3,10", "--out", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", argv)
    bench_kuairec.main(argv[1:])
    md = (tmp_path / "kuairec.md").read_text()
    assert "SYNTHETIC look-alike (12 users × 20 videos × 3 days, 10 videos per user-day" in md
    assert "30 rounds (time order) × 3 seeds" in md
    daily = md[md.index("**Average daily reward**"):]
    rows = {line.split("|")[1].strip(): line for line in daily.splitlines() if line.startswith("| ")}
    assert {"hilofi_ts", "uniform-random policy (reference)", "oracle (reference)"} <= set(rows)
    rnd = float(rows["uniform-random policy (reference)"].split("|")[2].split("±")[0])
    orc = float(rows["oracle (reference)"].split("|")[2].split("±")[0])
    assert 0 < rnd < orc  # the best of 10 videos beats their average on every round of this look-alike

    # --check re-makes the table just written and writes nothing (its DIFFERS path: test_bench_diagnostics)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    capsys.readouterr()
    bench_kuairec.main([*argv[1:], "--check", "15"])
    assert "[check kuairec] hilofi_ts: re-made: 25 points up to round 25 equal" in capsys.readouterr().out
    assert merge.check_exit_status() == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("size", ["12,20,3", "12,20,3,30", "a,b,c,d"])
def test_malformed_lookalike_size_is_refused(size, capsys):
    with pytest.raises(SystemExit):
        bench_kuairec.main(["--seeds", "3", "--lookalike-size", size])
    assert "--lookalike-size" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--render", "--merge"])
def test_render_and_merge_are_refused_with_the_reason(flag, capsys):
    with pytest.raises(SystemExit):
        bench_kuairec.main(["--seeds", "3", flag])
    assert "daily-reward table" in capsys.readouterr().err
