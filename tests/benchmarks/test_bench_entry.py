"""``python -m benchmarks``: the one entry point lists every suite and study, runs a bandit suite end to end into a
temporary folder (the table names the command that made it), and ``benchmarks/results/INDEX.md`` accounts for every
committed result file."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pandas as pd

from benchmarks import __main__ as entry
from benchmarks import catalog

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_list_names_every_suite_and_study_and_what_it_writes():
    out = _run("--list", timeout=120)
    assert out.returncode == 0, out.stderr
    for e in catalog.SUITES + catalog.STUDIES:
        assert re.search(rf"^  {e.name} +\S", out.stdout, re.M), e.name
        assert f"writes {e.writes}" in out.stdout
    assert "python -m benchmarks study NAME" in out.stdout
    assert {e.name for e in catalog.SUITES} >= {"mnist", "showdown", "movielens", "kuairec", "bo", "speed", "rank",
                                               "soak", "bong", "nonstationary", "inbetween", "arm_blocks", "compile"}


def test_an_unknown_name_is_refused_with_the_names(capsys):
    assert entry.main(["nowhere"]) == 2
    assert "no suite 'nowhere'" in capsys.readouterr().err
    assert entry.main(["study", "nothing"]) == 2
    assert "the study names: lowrank_mnist" in capsys.readouterr().err


def test_showdown_runs_end_to_end_through_the_entry_point(tmp_path):
    """A tiny showdown run on Mushroom, in a fresh process: the table, both CSVs, the plot and the overview are
    written, and the table names the command as typed."""
    argv = ["showdown", "--datasets", "Mushroom", "--steps", "50", "--seeds", "1", "--agents", "linear,hilofi_ts",
            "--out", str(tmp_path)]
    out = _run(*argv)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for name in ("showdown_mushroom.md", "showdown_mushroom_seeds.csv", "showdown_mushroom_curve.csv",
                 "showdown_mushroom_regret.png", "showdown.md"):
        assert (tmp_path / name).stat().st_size > 0, name
    md = (tmp_path / "showdown_mushroom.md").read_text()
    assert f"**Command (this table):** `python -m benchmarks {' '.join(argv)}`" in md
    assert "**Full protocol:** `python -m benchmarks showdown --datasets Mushroom --steps 5000 --seeds 10`" in md
    assert "**Machine:** " in md and "BLAS threads 1" in md
    assert "| linear | 1 | 50 |" in md and "| hilofi_ts | 1 | 50 |" in md
    seeds = pd.read_csv(tmp_path / "showdown_mushroom_seeds.csv")
    assert sorted(seeds.agent) == ["hilofi_ts", "linear"] and (seeds.steps == 50).all()
    assert set(pd.read_csv(tmp_path / "showdown_mushroom_curve.csv").agent) == {"linear", "hilofi_ts"}
    assert "| Mushroom | linear | 1 | 50 |" in (tmp_path / "showdown.md").read_text()


def test_results_index_accounts_for_every_committed_result_file():
    """``results/INDEX.md`` names each file it keeps (linked), and every file under ``results/`` is named there."""
    results = ROOT / "benchmarks" / "results"
    index = (results / "INDEX.md").read_text()
    linked = set(re.findall(r"\]\(([^)#\s]+)\)", index))
    missing = sorted(p for p in linked if not (results / p).exists())
    assert not missing, f"INDEX.md links files that do not exist: {missing}"
    named = set(re.findall(r"`([\w.\-]+\.(?:md|csv|png|txt|gz|log))`", index)) | {pathlib.Path(p).name for p in linked}
    files = {p.name for p in results.iterdir() if p.is_file() and p.name != "INDEX.md"}
    assert not files - named, f"result files INDEX.md does not account for: {sorted(files - named)}"


def test_old_script_paths_map_to_the_entry_point_and_no_committed_table_names_one():
    from benchmarks.harness import commands

    for stem, (words, path) in commands.OLD.items():  # each old script became a suite or study that exists
        study, _, name = words.rpartition(" ")
        assert catalog.find(name, study=bool(study)) is not None, stem
        assert (ROOT / path).exists(), path
    old = "`python benchmarks/bench_showdown.py --steps 5000 --seeds 10` 4879 ± 2; `taskset -c 0 python " \
          "benchmarks/diag_dynamics.py --render`; docstring of `benchmarks/bench_rank.py`; [t](diag_x.md)"
    assert commands.rewrite(old) == (
        "`python -m benchmarks showdown --steps 5000 --seeds 10` 4879 ± 2; `taskset -c 0 python -m benchmarks study "
        "dynamics --render`; docstring of `benchmarks/suites/rank.py`; [t](diag_x.md)")
    assert commands.rewrite("../benchmarks/results/diag_dynamics.md, benchmarks/results/mnist_seed002_warmup_fit.md") \
        == "../benchmarks/studies/dynamics/results/diag_dynamics.md, benchmarks/results/mnist_seed002_warmup_fit.md"
    for folder in [ROOT / "benchmarks" / "results", *(ROOT / "benchmarks" / "studies").glob("*/results")]:
        for f in folder.iterdir():
            if f.suffix in (".md", ".csv", ".txt", ".log"):
                assert "python benchmarks/" not in f.read_text(encoding="utf-8"), f


def test_every_benchmark_file_the_readmes_link_exists():
    """README.md's links into benchmarks/, and every relative link of benchmarks/README.md, FINDINGS.md, INDEX.md and
    the studies' write-ups, point at a file that is there."""
    pages = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "FINDINGS.md",
             ROOT / "benchmarks" / "results" / "INDEX.md", *(ROOT / "benchmarks" / "studies").glob("*/README.md")]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or (page.name == "README.md" and page.parent == ROOT
                                                  and not target.startswith("benchmarks/")):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken
