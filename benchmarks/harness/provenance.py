"""Where a result came from: the command that made it, the machine, the load, the BLAS threads and the commit.

Every result file of every suite and study carries these lines, so that a number can be traced to the code and the
machine that made it.  :func:`machine` is the one line; :func:`command_line` the command as the user typed it
(``python -m benchmarks SUITE ...``); :func:`csv_provenance` the command and machine lines of a study whose processes
append their rows to one CSV.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Sequence

import pandas as pd

import banditkit as bk
import banditkit.runtime

#: the one entry point: ``python -m benchmarks SUITE [options]`` (``benchmarks/__main__.py`` puts ``PROG SUITE`` in
#: ``sys.argv[0]``, so argparse's usage line and :func:`command_line` name the command as typed)
PROG = "python -m benchmarks"


def command_line() -> str:
    """This process's command: ``python -m benchmarks SUITE ARGS`` when started through the entry point, else
    ``python ARGV`` (a suite's ``main`` called from elsewhere, e.g. a test)."""
    head, *rest = sys.argv
    return " ".join([head if head.startswith(PROG) else f"python {head}", *rest])


def suite_command(words: str, argv) -> str:
    """``python -m benchmarks WORDS ARGV``: the command of a suite whose ``main`` got ``argv`` (the BO, speed and
    BONG suites record the arguments they parsed, not ``sys.argv``)."""
    return " ".join([PROG, words, *map(str, argv)])


def blas_note() -> str:
    """``"BLAS threads 1"`` (the counts of the loaded BLAS libraries), for the machine line of a result."""
    counts = sorted(set(banditkit.runtime.blas_threads().values()))
    return "BLAS threads " + ("/".join(map(str, counts)) if counts else "n/a (no BLAS library loaded)")


def cores_note() -> str:
    """``", process on 1 of them"`` where this process may run on fewer cores than the machine has (``taskset``),
    else ``""``.  XLA:CPU sizes its thread pool by the cores a process may use, and how it splits a product over
    them changes the float rounding: a run pinned to one core and the same run on two differ (measured: Showdown
    Mushroom EKF-Sub-SVD from round 51, Branin LoFi-TS at the first query), so a result's line says which."""
    try:
        mine = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this OS
        return ""
    total = os.cpu_count() or mine
    return f", process on {mine} of them" if mine < total else ""


def cpu_note(cpuinfo: str | None = None) -> str:
    """``" (AMD EPYC, AVX-512)"``: the CPU's model name and widest vector extension (AVX-512, AVX2, AVX or SSE), from
    ``/proc/cpuinfo`` (``cpuinfo``: its text, for tests), for the machine line of a result; ``""`` where it cannot be
    read.  XLA:CPU compiles for the CPU it runs on, so the same code on another model can round differently (on
    2026-11-28 the commit whose check had re-made HiLoFi-TS's Shuttle row the day before did not re-make it on this
    project's machine of that day: ``results/reproduce_check.md``)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as fh:
                cpuinfo = fh.read()
        except OSError:
            return ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("model name", "flags") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    isa = next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse2", "SSE2"))
                if flag in flags), "")
    parts = [p for p in (fields.get("model name", ""), isa) if p]
    return f" ({', '.join(parts)})" if parts else ""


def load_average(minutes: int = 1) -> float | None:
    """The 1-, 5- or 15-minute load average now (None where the OS has none)."""
    if minutes not in (1, 5, 15):
        raise ValueError(f"load_average: minutes must be 1, 5 or 15, got {minutes!r}")
    return os.getloadavg()[(1, 5, 15).index(minutes)] if hasattr(os, "getloadavg") else None


def commit_note() -> str:
    """``"; banditkit at commit C"`` for the machine line of a result, so that a row names the code that made it.

    ``C`` is ``BANDITKIT_COMMIT`` where that is set, else the git commit of the checkout that holds the imported
    ``banditkit`` (:func:`code_commit`), with ``" plus uncommitted changes"`` where that checkout's ``banditkit/`` or
    ``benchmarks/**.py`` differ from it: such a row cannot be re-made from any commit.  ``""`` where neither tells
    (an installed wheel, no git)."""
    commit = os.environ.get("BANDITKIT_COMMIT", "") or code_commit()
    return f"; banditkit at commit {commit}" if commit else ""


def code_commit() -> str:
    """The short git commit of the checkout holding the imported ``banditkit`` plus ``" plus uncommitted changes"``
    where its code (``banditkit/``, every ``.py`` under ``benchmarks/``; not the results or write-ups) differs from
    that commit; ``""`` where it is not a git checkout or git cannot be run."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(bk.__file__)))

    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        # git's pathspec ``*`` crosses folders: benchmarks/*.py is every module of the package
        changed = git("status", "--porcelain", "--", "banditkit", "benchmarks/*.py")
    except (OSError, subprocess.SubprocessError):
        return ""
    return commit + (" plus uncommitted changes" if changed else "")


def package_versions(packages: Sequence[str]) -> str:
    """``", optuna 4.9.0, botorch 0.18.1"``: the installed version of each named distribution (the peers a suite
    races, whose results change between releases); ``"not installed"`` for one that is missing."""
    from importlib import metadata

    parts = []
    for name in packages:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} not installed")
    return "".join(f", {p}" for p in parts)


def machine(load: bool = True, packages: Sequence[str] = ()) -> str:
    """One line naming the machine and software a result came from; ``load=False`` leaves out the load average
    (for callers that record it apart, per run); ``packages``: distributions whose versions the line also names
    (:func:`package_versions`)."""
    import jax

    avg = load_average() if load else None
    load_txt = f", load average at the end {avg:.1f}" if avg is not None else ""
    return (f"{platform.machine()} CPU{cpu_note()}, {os.cpu_count()} cores shared with other users{cores_note()}"
            f"{load_txt}; "
            f"python {platform.python_version()}, jax {jax.__version__} ({jax.default_backend()})"
            f"{package_versions(packages)}, {blas_note()}"
            f"{commit_note()}")


def csv_provenance(rows: pd.DataFrame, unit: str = "runs") -> list[str]:
    """Markdown lines naming a CSV study's commands (in order) and machines (the load average after its rows, min–max,
    and how many ``unit`` each made), from the rows' ``command``, ``machine`` and ``load`` columns."""
    lines = ["**Commands (in order):**", ""] + [f"- `{c}`" for c in dict.fromkeys(rows.command)]
    lines += ["", "**Machines (load average after each run, min–max):**", ""]
    for m, g in rows.groupby("machine", sort=False):
        lines.append(f"- {m}; load {g['load'].min():.1f}–{g['load'].max():.1f} over {len(g)} {unit}")
    return lines


def row_provenance(packages: Sequence[str] = ()) -> dict:
    """``command``, ``machine`` (no load; naming the versions of ``packages``) and ``load``: the columns a CSV study's
    row carries for :func:`csv_provenance`."""
    return dict(command=command_line(), machine=machine(load=False, packages=packages), load=load_average())
