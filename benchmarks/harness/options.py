"""The command-line options every suite shares, and what they select.

A bandit suite's parser (:func:`parser`) takes ``--steps``, ``--seeds``, ``--first-seed``, ``--agents``, ``--out``,
``--chunk``, ``--max-agent-s``, ``--progress``, ``--merge`` / ``--add-seeds`` / ``--render`` (:mod:`.merge`) and
``--blas-threads``; ``--check ROUNDS`` is added by :func:`add_check`.  A study whose processes append their rows to one
CSV takes ``--out``, ``--tag``, ``--render``, ``--blas-threads`` (:func:`add_csv_study_options`).  Every suite and
study takes ``--blas-threads`` (default 1, as the ``banditkit`` command): ``tests/core/test_threads.py`` checks it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import pandas as pd

import banditkit.runtime

#: the committed results of the suites (``--out``'s default); a study's own outputs live in its folder
RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")

#: ``--check``: the rounds to re-make (None: not a check) and ``"TAG: agent"`` of each row found to differ; set by
#: :func:`check_args` for the command, read by :func:`.report.write_outputs` and :func:`.merge.check_exit_status`
CHECK: dict = {"rounds": None, "differs": []}


def parser(description: str, *, steps: int, seeds: int) -> argparse.ArgumentParser:
    """``--steps``, ``--seeds``, ``--out``, ``--agents`` (comma list, default all), ``--progress``, and the rest."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help=f"rounds per seed (paper protocol: {steps})")
    p.add_argument("--seeds", type=int, default=seeds, help=f"number of seeds 0..n-1 (default {seeds}; at least 3)")
    p.add_argument("--out", default=RESULTS, help="output folder (default benchmarks/results)")
    p.add_argument("--agents", default="", help="comma-separated subset of agent names (default: all)")
    p.add_argument("--progress", action="store_true", help="show a progress bar per agent")
    p.add_argument("--max-agent-s", type=float, default=None,
                   help="run-time cap per agent (s, counted from the end of its first chunk, so compilation is "
                        "excluded): an agent past it is stopped at the end of the current chunk and reported with the "
                        "rounds it finished (marked 'truncated')")
    p.add_argument("--first-seed", type=int, default=0,
                   help="run seeds FIRST..FIRST+SEEDS-1 (default 0); with --add-seeds, to add seeds to a table")
    p.add_argument("--merge", action="store_true",
                   help="keep the agents of the existing table that this run does not re-run (their rows in "
                        "TAG_seeds.csv and TAG_curve.csv and their command); the agents run now replace their old rows")
    p.add_argument("--add-seeds", action="store_true",
                   help="--merge, but the agents run now keep their old rows too: this run's seeds (which must be "
                        "new to each agent's rows, e.g. --first-seed 3 after seeds 0-2, with the same --steps) are "
                        "pooled with them into mean ± s.e. over all seeds")
    p.add_argument("--render", action="store_true",
                   help="run nothing: rewrite TAG.md and its plot from the existing TAG_seeds.csv / TAG_curve.csv with "
                        "this code's floors and notes (its commands and machines kept)")
    p.add_argument("--chunk", type=int, default=None,
                   help="rounds per compiled chunk (default max(25, steps // 40)); the time cap and SIGUSR1 act "
                        "at chunk ends, so a smaller chunk stops a slow agent sooner")
    add_blas_threads(p)
    return p


def add_check(p: argparse.ArgumentParser) -> None:
    """``--check ROUNDS``: re-make the start of a committed table's rows and compare, writing nothing
    (:func:`.merge.check_against_table`)."""
    p.add_argument("--check", type=int, default=None, metavar="ROUNDS",
                   help="write nothing: run each agent for its first ROUNDS rounds (to the end of that chunk) of the "
                        "table's streams (give the table's --steps, --seeds and --chunk) and compare its mean "
                        "cumulative reward and regret with TAG_curve.csv in --out at every point of it up to there; "
                        "exit status 1 where an agent's rows differ (the code does not re-make them)")


def add_blas_threads(p: argparse.ArgumentParser) -> None:
    """``--blas-threads N|system`` (default 1, as the ``banditkit`` command): see :mod:`banditkit.runtime.threads`."""
    p.add_argument("--blas-threads", default="1",
                   help="cap BLAS / LAPACK at this many threads before running (banditkit.runtime.limit_blas_threads; "
                        "default 1, as the banditkit command does), or 'system' to leave the library's default")


def apply_blas_threads(value: str) -> None:
    """Apply ``--blas-threads``: an integer ``>= 1`` caps every BLAS library, ``system`` changes nothing."""
    if str(value).strip().lower() == "system":
        return
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise SystemExit(f"--blas-threads must be an integer >= 1 or 'system', got {value!r}")
    banditkit.runtime.limit_blas_threads(n)


def check_args(args: argparse.Namespace) -> None:
    """Refuse bad ``--steps`` / ``--seeds``; apply ``--blas-threads``; set this command's ``--check`` state."""
    apply_blas_threads(args.blas_threads)
    if args.steps < 1:
        raise SystemExit(f"--steps must be >= 1, got {args.steps}")
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    if getattr(args, "first_seed", 0) < 0:
        raise SystemExit(f"--first-seed must be >= 0, got {args.first_seed}")
    CHECK.update(rounds=getattr(args, "check", None), differs=[])
    if CHECK["rounds"] is not None:
        if args.check < 1:
            raise SystemExit(f"--check must be >= 1 rounds, got {args.check}")
        if args.merge or args.add_seeds or args.render:
            raise SystemExit("--check writes nothing: it cannot be used with --merge, --add-seeds or --render")
    if getattr(args, "add_seeds", False):
        args.merge = True
    elif args.seeds < 3:
        print(f"warning: --seeds {args.seeds} < 3; standard errors will be unreliable", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)


def seed_list(args: argparse.Namespace) -> list[int]:
    """The seeds this command runs: ``--first-seed`` .. ``--first-seed + --seeds - 1``."""
    first = int(getattr(args, "first_seed", 0))
    return list(range(first, first + args.seeds))


def describe_seeds(seeds: list[int]) -> str:
    """``"5 seeds"`` for 0..4, ``"2 seeds (3–4)"`` for another run of consecutive seeds, else the list."""
    if seeds == list(range(len(seeds))):
        span = ""
    elif len(seeds) == 1:
        span = f" ({seeds[0]})"
    elif seeds == list(range(seeds[0], seeds[-1] + 1)):
        span = f" ({seeds[0]}–{seeds[-1]})"
    else:
        span = f" ({seeds})"
    return f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}{span}"


def seeds_text(args: argparse.Namespace) -> str:
    """The command's seeds, as :func:`.tables.seeds_description` words a table's: ``"5 seeds"``, ``"2 seeds (3–4)"``."""
    return describe_seeds(seed_list(args))


def names(text: str, allowed, what: str) -> list[str]:
    """The names of the comma list ``text`` (the option ``--what``), each one of ``allowed``; an unknown name or an
    empty list raises ``SystemExit`` with the choices."""
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in chosen if n not in allowed]
    if bad or not chosen:
        raise SystemExit(f"--{what}: unknown or no {what} {bad or text!r}; choose from {list(allowed)}")
    return chosen


def select(agents: dict, subset: str) -> dict:
    """The agents named in ``subset`` (comma list; empty = all but the opt-in ones, factories marked ``opt_in``:
    variants and diagnostics that run only when named); unknown names raise ``SystemExit``."""
    if not subset:
        return {n: f for n, f in agents.items() if not getattr(f, "opt_in", False)}
    names = [s.strip() for s in subset.split(",") if s.strip()]
    unknown = [n for n in names if n not in agents]
    if unknown:
        raise SystemExit(f"unknown agent(s) {unknown}; choose from {list(agents)}")
    return {n: agents[n] for n in names}


def add_csv_study_options(p: argparse.ArgumentParser, tag: str, writes: str = "TAG.md", out: str = RESULTS) -> None:
    """``--out`` (default ``out``), ``--tag`` (default ``tag``), ``--render`` and ``--blas-threads`` for a study whose
    processes append their rows to ``OUT/TAG.csv`` (one per core) and whose table (``writes``) is rendered from that
    CSV."""
    p.add_argument("--out", default=out)
    p.add_argument("--tag", default=tag)
    p.add_argument("--render", action="store_true", help=f"run nothing: rewrite {writes} from TAG.csv")
    add_blas_threads(p)


def start_csv_study(args: argparse.Namespace, render: Callable[[pd.DataFrame, str, str], None]) -> str | None:
    """Apply ``--blas-threads`` and return ``OUT/TAG.csv``; with ``--render``, call ``render(rows, out, tag)`` on that
    CSV instead and return ``None`` (an error naming the file when there is none yet)."""
    apply_blas_threads(args.blas_threads)
    csv = os.path.join(args.out, f"{args.tag}.csv")
    if not args.render:
        return csv
    if not os.path.exists(csv):
        raise SystemExit(f"--render: {csv} does not exist; run the study first (see its README)")
    render(pd.read_csv(csv), args.out, args.tag)
    print(f"rewrote the table of {csv}")
    return None
