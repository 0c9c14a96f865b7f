"""Shared harness for the bandit benchmark scripts (``benchmarks/bench_*.py``).

One experiment = one environment, several agents, the same seeds.  For every agent :func:`run_agents` calls the
compiled runner ``bk.run`` (``lax.scan`` over rounds, ``vmap`` over seeds), so compilation (``compile_s``) is
timed apart from execution (``run_s``; all seeds advance together).  Results per experiment ``TAG`` in ``--out``:

* ``TAG_seeds.csv``   one row per (agent, seed): cumulative reward, mean reward, final cumulative regret, timing;
* ``TAG_curve.csv``   mean ± standard error over seeds of the cumulative regret and reward, at ≤ 200 steps;
* ``TAG.md``          the table (``mean ± s.e.`` over seeds), the protocol actually run, the command for the full
                      protocol, and each floor with MET / NOT MET;
* ``TAG_regret.png``  cumulative-regret curves (``bk.plotting.plot_regret``: mean ± s.e. bands).

Standard error = ``std(ddof=1) / sqrt(n_seeds)``.  The per-step rows are not written (tens of MB); the curve CSV
keeps what the plots need.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

import banditkit as bk


# ------------------------------------------------------------------------------------------------ command line
def parser(description: str, *, steps: int, seeds: int) -> argparse.ArgumentParser:
    """``--steps``, ``--seeds``, ``--out``, ``--agents`` (comma list, default all), ``--progress``."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=steps, help=f"rounds per seed (paper protocol: {steps})")
    p.add_argument("--seeds", type=int, default=seeds, help=f"number of seeds 0..n-1 (default {seeds}; at least 3)")
    p.add_argument("--out", default="benchmarks/results", help="output folder")
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
    (:func:`check_against_table`)."""
    p.add_argument("--check", type=int, default=None, metavar="ROUNDS",
                   help="write nothing: run each agent for its first ROUNDS rounds (to the end of that chunk) of the "
                        "table's streams (give the table's --steps, --seeds and --chunk) and compare its mean "
                        "cumulative reward and regret with TAG_curve.csv in --out at every point of it up to there; "
                        "exit status 1 where an agent's rows differ (the code does not re-make them)")


def add_blas_threads(p: argparse.ArgumentParser) -> None:
    """``--blas-threads N|system`` (default 1, as the ``banditkit`` command): see :mod:`banditkit.threads`."""
    p.add_argument("--blas-threads", default="1",
                   help="cap BLAS / LAPACK at this many threads before running (banditkit.threads.limit_blas_threads; "
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
    bk.threads.limit_blas_threads(n)


def blas_note() -> str:
    """``"BLAS threads 1"`` (the counts of the loaded BLAS libraries), for the machine line of a result."""
    counts = sorted(set(bk.threads.blas_threads().values()))
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


def check_args(args: argparse.Namespace) -> None:
    """Refuse bad ``--steps`` / ``--seeds``; apply ``--blas-threads``."""
    apply_blas_threads(args.blas_threads)
    if args.steps < 1:
        raise SystemExit(f"--steps must be >= 1, got {args.steps}")
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    if getattr(args, "first_seed", 0) < 0:
        raise SystemExit(f"--first-seed must be >= 0, got {args.first_seed}")
    _CHECK.update(rounds=getattr(args, "check", None), differs=[])
    if _CHECK["rounds"] is not None:
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


def seeds_description(df: pd.DataFrame) -> str:
    """The seeds of a frame with ``agent`` and ``seed`` columns: ``"5 seeds"`` (0..4), ``"2 seeds (3–4)"``, or
    ``"3–5 seeds (per row: see `seeds`)"`` when the agents' seed sets differ."""
    if df.empty:
        return "no seeds"
    sets = {frozenset(int(v) for v in g) for _, g in df.groupby("agent")["seed"]}
    if len(sets) > 1:
        sizes = sorted(len(x) for x in sets)
        return f"{sizes[0]}–{sizes[-1]} seeds (per row: see `seeds`)"
    return _describe_seeds(sorted(next(iter(sets))))


def _describe_seeds(seeds: list[int]) -> str:
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
    """The command's seeds, as :func:`seeds_description` words a table's: ``"5 seeds"``, ``"2 seeds (3–4)"``."""
    return _describe_seeds(seed_list(args))


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


def command_line() -> str:
    return "python " + " ".join(sys.argv)


# ------------------------------------------------------------------------------------------------------- running
@dataclass
class Result:
    """What :func:`run_agents` returns: the per-step frame and the per-agent timing."""

    frame: pd.DataFrame
    timing: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)


class _TimeCap(Exception):
    pass


_STOP = {"flag": False}
_CHECK: dict = {"rounds": None, "differs": []}  # --check: the rounds to re-make, and "TAG: agent" of each mismatch
_RUN_COUNTER = itertools.count()


def _on_sigusr1(signum, frame) -> None:  # noqa: ARG001
    _STOP["flag"] = True


def install_stop_signal() -> None:
    """``kill -USR1 <pid>``: the running agent stops at the end of its current chunk (kept, marked truncated), the
    agents not started yet are listed as not run, and the outputs are written as usual."""
    import signal

    if hasattr(signal, "SIGUSR1"):
        signal.signal(signal.SIGUSR1, _on_sigusr1)


def run_agents(env, agents: dict[str, Callable], steps: int, seeds: int | Sequence[int], *, progress: bool = False,
               log: Callable[[str], None] = print, max_agent_s: float | None = None,
               chunk: int | None = None, on_agent: Callable[[Result], None] | None = None,
               stop_after: int | None = None) -> Result:
    """Run each ``agents[name](env)`` (a factory returning a ``BanditAgent``) with the compiled runner.

    An agent whose run raises is recorded in ``failures`` (the message) and the others go on: a benchmark must
    report a broken backend, not hide the other numbers.  With ``max_agent_s`` an agent is stopped after the
    first chunk that ends more than ``max_agent_s`` after its first chunk (so compilation does not count); its
    finished rounds are kept (``timing[name]["truncated"] = True``), with
    ``compile_s`` ≈ first chunk's time − one chunk's run time and ``run_s`` = the chunk times after the first
    (scaled to all finished chunks); stopped after its first chunk, ``compile_s`` is NaN and ``run_s`` that chunk's
    time, compilation included.  ``on_agent(partial)`` is called after every agent with the results so far
    (agents not finished yet listed in ``failures`` as pending), so a run that is killed or hangs keeps its tables.
    ``stop_after`` stops each agent at the end of the chunk in which it finishes that many rounds (``--check``).
    """
    frames, timing, failures = [], {}, {}
    run_id = f"{time.strftime('%Y-%m-%dT%H:%M:%S')}/{os.getpid()}/{next(_RUN_COUNTER)}"
    chunk = max(25, steps // 40) if chunk is None else max(1, min(int(chunk), steps))
    install_stop_signal()
    for name, factory in agents.items():
        if _STOP["flag"]:
            failures[name] = "not run: the benchmark was stopped (SIGUSR1) to fit its time box"
            continue
        tic = time.perf_counter()
        marks: list[float] = []
        parts: list[pd.DataFrame] = []

        health: dict = {}

        def on_chunk(df, tic=tic, marks=marks, parts=parts, health=health):
            marks.append(time.perf_counter())
            parts.append(df)
            health.update(df.attrs.get("nonfinite", {}))
            done = int(df["step"].max()) + 1
            if done < steps and (_STOP["flag"] or (max_agent_s is not None and marks[-1] - marks[0] > max_agent_s)
                                 or (stop_after is not None and done >= stop_after)):
                raise _TimeCap()

        try:
            agent = factory(env)
            t_agent = time.perf_counter()
            df = bk.run(env, agent, steps, seeds, name=name, progress=progress, compiled=True, chunk_size=chunk,
                        on_chunk=on_chunk)
            t = dict(df.attrs["timing"][name], truncated=False)
        except _TimeCap:
            df = pd.concat(parts, ignore_index=True).sort_values(["seed", "step"]).reset_index(drop=True)
            done = int(df["step"].max()) + 1
            gaps = np.diff([t_agent, *marks])
            # one chunk only: compilation cannot be told from running (compile_s NaN, run_s holds both)
            per_chunk = float(np.mean(gaps[1:])) if len(gaps) > 1 else float(gaps[0])
            run_s = per_chunk * len(gaps)
            compile_s = max(float(gaps[0]) - per_chunk, 0.0) if len(gaps) > 1 else float("nan")
            t = dict(compile_s=compile_s, run_s=run_s, per_step_s=run_s / done,
                     steps=done, seeds=int(df["seed"].nunique()), mode="compiled", truncated=True,
                     nonfinite=dict(health))
            why = "SIGUSR1" if _STOP["flag"] else "time cap" if stop_after is None or done < stop_after else "check"
            log(f"[{name}] stopped ({why}) after {done} of {steps} rounds")
        except Exception as e:  # noqa: BLE001 - reported in the table
            failures[name] = f"{type(e).__name__}: {e}"
            log(f"[{name}] FAILED after {time.perf_counter() - tic:.1f}s: {failures[name][:300]}")
            _partial(frames, timing, failures, agents, on_agent)
            continue
        t["wall_s"] = time.perf_counter() - tic
        t["run_id"] = run_id
        timing[name] = t
        frames.append(df)
        per_seed = df.groupby("seed")["reward"].sum()
        if t.get("nonfinite"):
            log(f"[{name}] WARNING: agent state non-finite for seeds {t['nonfinite']} (seed: by round)")
        times = (f"compile {t['compile_s']:.1f}s  run {t['run_s']:.1f}s" if np.isfinite(t["compile_s"])
                 else f"compile + run {t['run_s']:.1f}s (one chunk: not separable)")
        log(f"[{name}] cum. reward {per_seed.mean():.1f} ± {se(per_seed):.1f}  {times}  "
            f"({1e3 * t['per_step_s']:.2f} ms/step, all seeds)")
        sys.stdout.flush()
        _partial(frames, timing, failures, agents, on_agent)
    return _result(frames, timing, failures)


def run_or_render(args: argparse.Namespace, env, agents: dict[str, Callable],
                  on_agent: Callable[[Result], None] | None = None) -> Result:
    """:func:`run_agents` over ``--seeds`` / ``--first-seed`` with the command's options, or with ``--render`` an
    empty result (``write_outputs`` then rewrites the existing table as it is)."""
    if getattr(args, "render", False):
        print("--render: no agent runs; the table is rewritten from its CSVs", flush=True)
        return _result([], {}, {})
    check = getattr(args, "check", None)  # --check: the first rounds only, no time cap, no table written per agent
    return run_agents(env, agents, args.steps, seed_list(args), progress=args.progress,
                      max_agent_s=None if check is not None else args.max_agent_s, chunk=args.chunk,
                      on_agent=None if check is not None else on_agent, stop_after=check)


def _result(frames: list, timing: dict, failures: dict) -> Result:
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=bk.experiments.runner.COLUMNS)
    frame.attrs["timing"] = timing
    return Result(frame, dict(timing), dict(failures))


def _partial(frames, timing, failures, agents, on_agent) -> None:
    """Call ``on_agent`` with the results so far; agents not finished are listed as pending."""
    if on_agent is None:
        return
    pending = {n: "pending: not finished when this table was written (run still going, killed, or hung)"
               for n in agents if n not in timing and n not in failures}
    on_agent(_result(frames, timing, {**failures, **pending}))


def se(values) -> float:
    """Standard error ``std(ddof=1) / sqrt(n)`` (0 for one value)."""
    v = np.asarray(values, np.float64)
    return float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0


# ------------------------------------------------------------------------------------------------------- tables
def per_seed(res: Result, reward_fn: Callable[[pd.DataFrame], pd.Series] | None = None) -> pd.DataFrame:
    """One row per (agent, seed): ``cum_reward`` (of ``reward_fn(frame)`` if given, else the reward column),
    ``mean_reward``, ``final_regret`` and the agent's timing."""
    df = res.frame
    if df.empty:
        return pd.DataFrame()
    reward = reward_fn(df) if reward_fn is not None else df["reward"]
    df = df.assign(_r=reward)
    g = df.groupby(["agent", "seed"], sort=False)
    n_steps = g["step"].transform("max") + 1
    late = df[df["step"] >= 0.75 * n_steps].groupby(["agent", "seed"], sort=False)["_r"].mean()
    out = pd.DataFrame({
        "cum_reward": g["_r"].sum(),
        "mean_reward": g["_r"].mean(),
        "late_reward": late,
        "final_regret": g["cumulative_regret"].last(),
        "steps": g["step"].count(),
    }).reset_index()
    for col in ("compile_s", "run_s", "per_step_s", "wall_s", "truncated"):
        out[col] = out["agent"].map(lambda a, c=col: res.timing[a].get(c, False))
    # the round by which the runner's health check saw this seed's agent state non-finite (NaN = healthy)
    out["nonfinite_by"] = [res.timing[a].get("nonfinite", {}).get(int(sd), np.nan)
                           for a, sd in zip(out["agent"], out["seed"], strict=True)]
    # which run_agents call made the row: a table pooled by --add-seeds sums its runs' times
    out["run_id"] = out["agent"].map(lambda a: res.timing[a].get("run_id", np.nan))
    return out


def _runs(g: pd.DataFrame) -> pd.DataFrame:
    """One row per run (command) among an agent's seed rows; rows written before ``run_id`` existed are told apart
    by their timing (every seed of one run shares it)."""
    key = (g["run_id"] if "run_id" in g else pd.Series(np.nan, index=g.index)).astype(object)
    earlier = ("earlier:" + g["compile_s"].astype(str) + "/" + g["run_s"].astype(str)).astype(object)
    key = key.where(key.notna(), earlier)
    return g.assign(_run=key).drop_duplicates("_run")


def summary(seeds_df: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Mean ± s.e. over seeds per agent (rows in ``order``)."""
    rows = []
    for agent in order:
        g = seeds_df[seeds_df["agent"] == agent]
        if g.empty:
            continue
        runs = _runs(g)
        rows.append(dict(
            agent=agent, seeds=len(g), steps=int(g["steps"].iloc[0]),
            cum_reward=g["cum_reward"].mean(), cum_reward_se=se(g["cum_reward"]),
            mean_reward=g["mean_reward"].mean(), mean_reward_se=se(g["mean_reward"]),
            late_reward=g["late_reward"].mean() if "late_reward" in g else np.nan,
            late_reward_se=se(g["late_reward"]) if "late_reward" in g else np.nan,
            final_regret=g["final_regret"].mean(), final_regret_se=se(g["final_regret"]),
            # one run: its times; seeds pooled from several runs (--add-seeds): compile per run, run time summed
            compile_s=runs["compile_s"].mean(), run_s=runs["run_s"].sum(), ms_per_step=1e3 * runs["per_step_s"].sum(),
            truncated=bool(g["truncated"].astype(bool).any()) if "truncated" in g else False,
            nonfinite_seeds=int(g["nonfinite_by"].notna().sum()) if "nonfinite_by" in g else 0,
        ))
    return pd.DataFrame(rows).set_index("agent") if rows else pd.DataFrame()


def markdown_table(s: pd.DataFrame, reward_label: str = "cum. reward") -> str:
    head = (f"| agent | seeds | steps | {reward_label} | mean reward / step | mean reward, last 25% of steps | "
            "final cum. regret | compile s | run s (all seeds) | ms / step (all seeds) |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for agent, r in s.iterrows():
        if r.get("truncated", False):
            agent = f"{agent} (truncated: stopped early)"
        if r.get("nonfinite_seeds", 0):
            agent = f"{agent} (**NaN/inf agent state in {int(r.nonfinite_seeds)} seed(s): not a valid result**)"
        lines.append(
            f"| {agent} | {int(r.seeds)} | {int(r.steps)} | {r.cum_reward:.1f} ± {r.cum_reward_se:.1f} | "
            f"{r.mean_reward:.4f} ± {r.mean_reward_se:.4f} | {r.late_reward:.4f} ± {r.late_reward_se:.4f} | "
            f"{r.final_regret:.1f} ± {r.final_regret_se:.1f} | "
            f"{r.compile_s:.1f} | {r.run_s:.1f} | {r.ms_per_step:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _with_cum_reward(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-step frame with each (agent, seed)'s running total of reward as ``cum_reward``."""
    return frame.assign(cum_reward=frame.groupby(["agent", "seed"], sort=False)["reward"].cumsum())


def curve(res: Result, points: int = 200) -> pd.DataFrame:
    """Mean ± s.e. over seeds of the cumulative regret and cumulative reward at ≤ ``points`` steps per agent."""
    df = res.frame
    if df.empty:
        return pd.DataFrame()
    df = _with_cum_reward(df)
    steps = np.unique(df["step"].to_numpy())
    keep = steps[np.unique(np.linspace(0, len(steps) - 1, min(points, len(steps))).round().astype(int))]
    d = df[df["step"].isin(keep)]
    rows = []
    for (agent, step), g in d.groupby(["agent", "step"], sort=False):
        rows.append(dict(agent=agent, step=int(step), n=len(g),
                         cum_regret=g["cumulative_regret"].mean(), cum_regret_se=se(g["cumulative_regret"]),
                         cum_reward=g["cum_reward"].mean(), cum_reward_se=se(g["cum_reward"])))
    return pd.DataFrame(rows)


def load_average(minutes: int = 1) -> float | None:
    """The 1-, 5- or 15-minute load average now (None where the OS has none)."""
    if minutes not in (1, 5, 15):
        raise ValueError(f"load_average: minutes must be 1, 5 or 15, got {minutes!r}")
    return os.getloadavg()[(1, 5, 15).index(minutes)] if hasattr(os, "getloadavg") else None


def commit_note() -> str:
    """``"; banditkit at commit C"`` for the machine line of a result, so that a row names the code that made it.

    ``C`` is ``BANDITKIT_COMMIT`` where that is set, else the git commit of the checkout that holds the imported
    ``banditkit`` (:func:`code_commit`), with ``" plus uncommitted changes"`` where that checkout's ``banditkit/`` or
    ``benchmarks/*.py`` differ from it: such a row cannot be re-made from any commit.  ``""`` where neither tells
    (an installed wheel, no git)."""
    commit = os.environ.get("BANDITKIT_COMMIT", "") or code_commit()
    return f"; banditkit at commit {commit}" if commit else ""


def code_commit() -> str:
    """The short git commit of the checkout holding the imported ``banditkit`` plus ``" plus uncommitted changes"``
    where its code (``banditkit/``, ``benchmarks/*.py``; not the results) differs from that commit; ``""`` where it is
    not a git checkout or git cannot be run."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(bk.__file__)))

    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", root, *argv], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", "banditkit", "benchmarks/*.py")
    except (OSError, subprocess.SubprocessError):
        return ""
    return commit + (" plus uncommitted changes" if changed else "")


def play_thompson(agent, fbs: Sequence, steps: int, seeds: Sequence[int]):
    """Each seed's stream ``fbs[i]`` (``env.unwrapped.functional(seeds[i], steps)``) played by ``agent`` in its own
    ``lax.scan`` (init key ``PRNGKey(seed)``, round ``t``'s key ``fold_in(PRNGKey(seed), t)``), all seeds vmapped —
    not the runner's loop, so rewards match the tables' in distribution only.  Returns ``(final states (S, …),
    actions (S, T), rewards (S, T), run s)`` (run s: execution only, compilation apart)."""
    import jax
    import jax.numpy as jnp

    ctx = jnp.stack([jnp.asarray(fb.contexts)[jnp.asarray(fb.index[:steps])] for fb in fbs])
    rew = jnp.stack([jnp.asarray(fb.rewards[:steps], jnp.float32) for fb in fbs])
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])

    def one(key, c, rw):
        def step(st, t):
            a, st = agent.act(jax.random.fold_in(key, t), st, c[t])
            r = rw[t, a]
            return agent.observe(st, c[t], a, r), (a, r)

        return jax.lax.scan(step, agent.init(key, c[0]), jnp.arange(steps))

    fn = jax.jit(jax.vmap(one)).lower(keys, ctx, rew).compile()
    tic = time.perf_counter()
    states, (acts, rs) = jax.block_until_ready(fn(keys, ctx, rew))
    return states, np.asarray(acts), np.asarray(rs), time.perf_counter() - tic


def add_csv_study_options(p: argparse.ArgumentParser, tag: str, writes: str = "TAG.md") -> None:
    """``--out``, ``--tag`` (default ``tag``), ``--render`` and ``--blas-threads`` for a study whose processes append
    their rows to ``OUT/TAG.csv`` (one per core) and whose table (``writes``) is rendered from that CSV."""
    p.add_argument("--out", default="benchmarks/results")
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
        raise SystemExit(f"--render: {csv} does not exist; run the study first (see the script's docstring)")
    render(pd.read_csv(csv), args.out, args.tag)
    print(f"rewrote the table of {csv}")
    return None


def csv_provenance(rows: pd.DataFrame, unit: str = "runs") -> list[str]:
    """Markdown lines naming a CSV study's commands (in order) and machines (the load average after its rows, min–max,
    and how many ``unit`` each made), from the rows' ``command``, ``machine`` and ``load`` columns."""
    lines = ["**Commands (in order):**", ""] + [f"- `{c}`" for c in dict.fromkeys(rows.command)]
    lines += ["", "**Machines (load average after each run, min–max):**", ""]
    for m, g in rows.groupby("machine", sort=False):
        lines.append(f"- {m}; load {g['load'].min():.1f}–{g['load'].max():.1f} over {len(g)} {unit}")
    return lines


def append_rows(csv: str, new: pd.DataFrame) -> pd.DataFrame:
    """Append ``new`` to ``csv`` (made if missing) and return all its rows; the file is read again just before, since
    another process of the same study may have appended in the meantime."""
    old = pd.read_csv(csv) if os.path.exists(csv) else None
    rows = pd.concat([old, new], ignore_index=True) if old is not None else new
    rows.to_csv(csv, index=False)
    return rows


def save_table(df: pd.DataFrame, lines: Sequence[str], out: str, tag: str) -> None:
    """Write a diagnostic's rows to ``out/TAG.csv`` and its Markdown ``lines`` to ``out/TAG.md`` (``out`` made if
    missing)."""
    os.makedirs(out, exist_ok=True)
    df.to_csv(os.path.join(out, f"{tag}.csv"), index=False)
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def preamble(title: str, doc: str) -> list[str]:
    """The opening lines of a diagnostic's Markdown table: ``# title``, the command line, the machine and the
    script docstring's second paragraph (its description) on one line, each followed by a blank line."""
    return [f"# {title}", "", f"`{command_line()}`", "", f"Machine: {machine()}", "",
            doc.split("\n\n")[1].replace("\n", " "), ""]


def machine(load: bool = True) -> str:
    """One line naming the machine and software a result came from; ``load=False`` leaves out the load average
    (for callers that record it apart, per run)."""
    import jax

    avg = load_average() if load else None
    load_txt = f", load average at the end {avg:.1f}" if avg is not None else ""
    return (f"{platform.machine()} CPU{cpu_note()}, {os.cpu_count()} cores shared with other users{cores_note()}"
            f"{load_txt}; "
            f"python {platform.python_version()}, jax {jax.__version__} ({jax.default_backend()}), {blas_note()}"
            f"{commit_note()}")


def references(env, steps: int, seeds: int | Sequence[int], transform: Callable | None = None) -> str:
    """Markdown line: cumulative reward of the uniform-random policy and of the oracle (best arm every round),
    mean ± s.e. over the same seeds (``0..seeds-1`` or the listed ones), from the env's expected rewards
    (``transform`` maps them, e.g. ``expm1``)."""
    u = env.unwrapped
    rnd, orc = [], []
    for s in (range(seeds) if isinstance(seeds, int) else seeds):
        e = np.asarray(u.functional(s, steps).expected, np.float64)[:steps]
        if transform is not None:
            e = transform(e)
        rnd.append(e.mean(axis=1).sum())
        orc.append(e.max(axis=1).sum())
    return (f"**References** (same seeds and rounds): uniform-random policy {np.mean(rnd):.1f} ± {se(rnd):.1f}; "
            f"oracle (best arm every round) {np.mean(orc):.1f} ± {se(orc):.1f}.")


@dataclass
class Floor:
    """A check from the issue: ``description``, whether it was ``met``, and the measured ``detail``."""

    description: str
    met: bool
    detail: str
    assessed: bool = True  # False: the run was smaller than the floor's protocol (reported as NOT ASSESSED)

    @property
    def status(self) -> str:
        return ("MET" if self.met else "NOT MET") if self.assessed else "NOT ASSESSED"


def write_outputs(res: Result, out: str, tag: str, *, title: str, protocol: str, full_command: str,
                  notes: Sequence[str] = (),
                  floors: Sequence[Floor] | Callable[[pd.DataFrame], Sequence[Floor]] = (),
                  order: Sequence[str] | None = None,
                  reward_fn: Callable[[pd.DataFrame], pd.Series] | None = None, reward_label: str = "cum. reward",
                  extra_md: str | Callable[[list[int]], str] = "", merge: bool = False,
                  add_seeds: bool = False) -> pd.DataFrame:
    """Write ``TAG_seeds.csv``, ``TAG_curve.csv``, ``TAG.md`` and ``TAG_regret.png`` into ``out``; the summary.

    ``merge=True`` (the scripts' ``--merge``): the agents of an existing ``TAG_seeds.csv`` / ``TAG_curve.csv`` that
    this run did not run are kept (in their order, this run's agents replacing theirs in place, new ones last), the
    earlier commands and machine lines and the hand-written run notes (from the first ``**Run note`` line to the
    end) are carried into ``TAG.md``, and the plot is drawn from the merged curve.  ``floors`` may be a function of
    the (merged) summary frame, so a floor is judged on every row of the table, not only this run's.

    ``add_seeds=True`` (``--add-seeds``, implies ``merge``): the agents run now keep their old rows as well, and
    this run's seeds are pooled with them (seed rows concatenated; the curve's mean ± s.e. combined exactly from
    both parts' counts, means and standard errors).  An agent whose old rows share a seed with this run, or ran a
    different number of rounds, raises ``ValueError`` (:func:`check_add_seeds` says so before a run starts).
    ``extra_md`` may be a function of the table's seeds (sorted), e.g. :func:`references` over all of them."""
    if _CHECK["rounds"] is not None:
        check_against_table(res, out, tag)
        return summary(per_seed(res, reward_fn), list(res.timing))
    seeds_df = per_seed(res, reward_fn)
    order = list(order) if order is not None else list(res.timing)
    cur = curve(res)
    seeds_path, curve_path = os.path.join(out, f"{tag}_seeds.csv"), os.path.join(out, f"{tag}_curve.csv")
    commands = [f"`{command_line()}`"]
    machines = [machine()]
    render = res.frame.empty and not res.timing and not res.failures  # --render: rewrite the table, run nothing
    merged = (merge or add_seeds or render) and os.path.exists(seeds_path) and os.path.exists(curve_path)
    if render and not merged:
        raise SystemExit(f"--render: no {seeds_path} / {curve_path} to rewrite the table from")
    run_notes: list[str] = []
    if merged:
        seeds_df, cur, order, old_cmds, old_machines, run_notes = _merge_previous(out, tag, seeds_df, cur, order,
                                                                                  add_seeds)
        how = "added seeds to" if add_seeds else "re-ran"
        commands = old_cmds + [f"{commands[0]} (with `--merge`: {how} {', '.join(sorted(set(res.timing)))})"]
        machines = old_machines + machines
        if render:
            commands, machines = old_cmds, old_machines
    if "{seeds}" in protocol:  # the table's seeds, and the last command's where they differ
        table, this = seeds_description(seeds_df), seeds_description(res.frame)
        protocol = protocol.replace("{seeds}", table)
        if merged and not render and this != table:
            protocol += f" (the last command above ran {this})"
    elif merged and not seeds_df.empty:
        counts = seeds_df.groupby("agent")["seed"].nunique()
        if counts.nunique() > 1:  # the protocol line names this run's seeds; the kept rows may have other counts
            protocol += f" (this command; the table's rows have {counts.min()}–{counts.max()} seeds, see `seeds`)"
    s = summary(seeds_df, order) if not seeds_df.empty else pd.DataFrame()
    if callable(floors):
        floors = floors(s) if not s.empty else []
    if not seeds_df.empty:
        seeds_df.to_csv(seeds_path, index=False)
        cur.to_csv(curve_path, index=False)
        png = os.path.join(out, f"{tag}_regret.png")
        if merged:
            plot_curve(cur, png, title=title)
        else:
            bk.plotting.plot_regret(res.frame, png, title=title)
        import matplotlib.pyplot as plt

        plt.close("all")
    cmd_md = (f"**Command (this table):** {commands[0]}" if len(commands) == 1 else
              "**Commands (this table, in order):**\n\n" + "\n".join(f"- {c}" for c in commands))
    mach_md = (f"**Machine:** {machines[0]}" if len(machines) == 1 else
               "**Machines (per command above):**\n\n" + "\n".join(f"- {m}" for m in machines))
    md = [f"# {title}", "", f"**Protocol run:** {protocol}", "", cmd_md, "",
          f"**Full protocol:** `{full_command}`", "", mach_md, ""]
    md += ["Mean ± standard error over seeds. `compile s` = tracing + XLA compilation (once per agent); "
           "`run s` = execution only, all seeds together (vmapped); `ms / step` = run s / steps.", ""]
    md.append(markdown_table(s, reward_label) if not s.empty else "_no agent finished_\n")
    if res.failures:
        md += ["", "**Failed agents:**", ""]
        md += [f"- `{k}`: {v[:500]}" for k, v in res.failures.items()]
    if floors:
        md += ["", "**Floors (issue 5):**", ""]
        md += [f"- {f.description}: **{f.status}** — {f.detail}" for f in floors]
    if callable(extra_md):
        extra_md = extra_md(sorted(int(v) for v in seeds_df["seed"].unique())) if not seeds_df.empty else ""
    if extra_md:
        md += ["", extra_md]
    if notes:
        md += ["", "**Notes:**", ""] + [f"- {n}" for n in notes]
    if run_notes:
        md += [""] + run_notes
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(md) + "\n")
    return s


def check_against_table(res: Result, out: str, tag: str) -> pd.DataFrame:
    """``--check``: compare each agent's re-made start with the committed ``out/TAG_curve.csv``.

    For every point ``s`` of the committed curve with ``s`` < the rounds re-made, the mean over seeds of the
    cumulative reward and of the cumulative regret at ``s`` must equal the committed ones (to 1e-9 relative: the
    CSV's decimal rounding).  The verdict per agent is printed and returned (``agent``, ``verdict``,
    ``points``, ``first_step_differing``); a differing agent is recorded, and :func:`check_exit_status` is then 1.
    An agent missing from the table, or whose table rows pool another number of seeds, is ``not comparable``."""
    path = os.path.join(out, f"{tag}_curve.csv")
    if not os.path.exists(path):
        raise SystemExit(f"--check: no committed {path} to compare with (give the table's folder as --out)")
    table = pd.read_csv(path)
    df = _with_cum_reward(res.frame)
    rows = []
    for agent in res.timing:
        g = df[df["agent"] == agent]
        seeds, done = g["seed"].nunique(), int(g["step"].max()) + 1
        t = table[(table["agent"] == agent) & (table["step"] < done)]
        mean = g.groupby("step")[["cum_reward", "cumulative_regret"]].mean()
        row = dict(agent=agent, points=len(t), first_step_differing=None)
        if t.empty or int(t["n"].max()) != seeds:
            why = "not in the table" if t.empty else f"the table pools {int(t['n'].max())} seeds, this run {seeds}"
            row["verdict"] = f"not comparable ({why})"
        else:
            new = mean.loc[t["step"].to_numpy()]
            same = (np.isclose(new["cum_reward"].to_numpy(), t["cum_reward"].to_numpy(), rtol=1e-9, atol=1e-9)
                    & np.isclose(new["cumulative_regret"].to_numpy(), t["cum_regret"].to_numpy(), rtol=1e-9,
                                 atol=1e-9))
            if same.all():
                row["verdict"] = f"re-made: {len(t)} points up to round {int(t['step'].max()) + 1} equal"
            else:
                row["first_step_differing"] = int(t["step"].to_numpy()[~same][0])
                row["verdict"] = f"DIFFERS from round {row['first_step_differing'] + 1}"
                _CHECK["differs"].append(f"{tag}: {agent}")
        rows.append(row)
        print(f"[check {tag}] {agent}: {row['verdict']}", flush=True)
    return pd.DataFrame(rows)


def check_exit_status() -> int:
    """1 where a ``--check`` found an agent whose rows differ from its committed table, else 0."""
    if _CHECK["differs"]:
        print("--check: rows not re-made by this code: " + "; ".join(_CHECK["differs"]), flush=True)
        return 1
    return 0


def check_add_seeds(out: str, tag: str, agents: Sequence[str], seeds: Sequence[int], steps: int) -> None:
    """Refuse (``SystemExit``) an ``--add-seeds`` run whose seeds an agent of table ``TAG`` already has, or whose
    ``steps`` differ from that agent's rows — before it spends any time."""
    path = os.path.join(out, f"{tag}_seeds.csv")
    if not os.path.exists(path):
        return
    old = pd.read_csv(path)
    for agent in agents:
        g = old[old["agent"] == agent]
        both = sorted(set(g["seed"].astype(int)) & set(seeds))
        if both:
            raise SystemExit(f"--add-seeds: {agent!r} in {path} already has seed(s) {both}; pick new ones with "
                             f"--first-seed {int(g['seed'].max()) + 1} (or drop --add-seeds to re-run it)")
        if len(g) and int(g["steps"].max()) != steps:
            raise SystemExit(f"--add-seeds: {agent!r} in {path} ran {int(g['steps'].max())} rounds, this run "
                             f"{steps}; pooled seeds need the same --steps")


def pool_curves(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One agent's curve (columns ``step, n, X, X_se`` for ``X`` in cum_regret, cum_reward) over the seeds of two
    disjoint sets, from each set's count, mean and standard error: with ``v = se² n`` (the sample variance),
    ``mean = (n₁m₁ + n₂m₂)/n`` and ``v = ((n₁-1)v₁ + (n₂-1)v₂ + n₁n₂/n·(m₁-m₂)²)/(n-1)``, ``n = n₁ + n₂``."""
    if list(a["step"]) != list(b["step"]):
        raise ValueError("the two curves were recorded at different steps (different --steps?); cannot pool them")
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    n1, n2 = a["n"].to_numpy(np.float64), b["n"].to_numpy(np.float64)
    n = n1 + n2
    out = a.copy()
    out["n"] = n.astype(int)
    for col in ("cum_regret", "cum_reward"):
        m1, m2 = a[col].to_numpy(np.float64), b[col].to_numpy(np.float64)
        v1, v2 = a[f"{col}_se"].to_numpy(np.float64) ** 2 * n1, b[f"{col}_se"].to_numpy(np.float64) ** 2 * n2
        var = ((n1 - 1) * v1 + (n2 - 1) * v2 + n1 * n2 / n * (m1 - m2) ** 2) / np.maximum(n - 1, 1)
        out[col] = (n1 * m1 + n2 * m2) / n
        out[f"{col}_se"] = np.sqrt(np.maximum(var, 0.0) / n)
    return out


_BEFORE_RUN: dict[tuple, tuple[pd.DataFrame, pd.DataFrame]] = {}


def hand_notes(md_path: str) -> list[str]:
    """The hand-written run notes of an existing table ``md_path``: its lines from the first ``**Run note`` to the
    end, trailing blank lines dropped (``[]`` when the file or the notes are absent), for a rewrite to carry over."""
    if not os.path.exists(md_path):
        return []
    with open(md_path) as fh:
        lines = fh.read().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("**Run note")), None)
    notes = lines[first:] if first is not None else []
    while notes and not notes[-1].strip():
        notes.pop()
    return notes


def _merge_previous(out: str, tag: str, seeds_df: pd.DataFrame, cur: pd.DataFrame, order: list[str],
                    add_seeds: bool = False):
    """The existing table's agents not re-run now, merged with this run's (see ``write_outputs(merge=True)``);
    with ``add_seeds`` the agents run now keep their old seeds too (pooled).  A run writes its table after every
    agent: with ``add_seeds`` the table as it was before the run's first write is kept (per run) and pooled with
    again, so the later writes do not pool this run's seeds twice."""
    runs = tuple(sorted(map(str, seeds_df["run_id"].unique()))) if "run_id" in seeds_df else ()
    key = (os.path.abspath(out), tag, runs)
    if add_seeds and key in _BEFORE_RUN:
        old_seeds, old_curve = _BEFORE_RUN[key]
    else:
        old_seeds = pd.read_csv(os.path.join(out, f"{tag}_seeds.csv"))
        old_curve = pd.read_csv(os.path.join(out, f"{tag}_curve.csv"))
        if add_seeds:
            _BEFORE_RUN[key] = (old_seeds, old_curve)
    new = set(seeds_df["agent"]) if not seeds_df.empty else set()
    merged_order = list(dict.fromkeys(old_seeds["agent"]))
    merged_order += [a for a in order if a not in merged_order]
    if add_seeds:
        pooled = []
        for agent in sorted(new & set(old_seeds["agent"])):
            o, n = old_seeds[old_seeds["agent"] == agent], seeds_df[seeds_df["agent"] == agent]
            if set(o["seed"]) & set(n["seed"]) or int(o["steps"].max()) != int(n["steps"].max()):
                raise ValueError(f"--add-seeds: {agent!r} has old rows with this run's seeds or other steps "
                                 f"(old seeds {sorted(o['seed'])}, {int(o['steps'].max())} steps; new "
                                 f"{sorted(n['seed'])}, {int(n['steps'].max())})")
            pooled.append(pool_curves(old_curve[old_curve["agent"] == agent], cur[cur["agent"] == agent]))
        done = {p["agent"].iloc[0] for p in pooled}
        seeds_df = pd.concat([old_seeds[~old_seeds["agent"].isin(new - done)], seeds_df], ignore_index=True)
        cur = pd.concat([old_curve[~old_curve["agent"].isin(new)], cur[~cur["agent"].isin(done)], *pooled],
                        ignore_index=True)
    else:
        seeds_df = pd.concat([old_seeds[~old_seeds["agent"].isin(new)], seeds_df], ignore_index=True)
        cur = pd.concat([old_curve[~old_curve["agent"].isin(new)], cur], ignore_index=True)
    rank = {a: i for i, a in enumerate(merged_order)}
    seeds_df = seeds_df.sort_values("agent", key=lambda c: c.map(rank), kind="stable").reset_index(drop=True)
    cur = cur.sort_values("agent", key=lambda c: c.map(rank), kind="stable").reset_index(drop=True)
    if "nonfinite_by" not in seeds_df:
        seeds_df["nonfinite_by"] = np.nan
    cmds, machines = [], []
    md_path = os.path.join(out, f"{tag}.md")
    run_notes = hand_notes(md_path)
    if os.path.exists(md_path):
        with open(md_path) as fh:
            lines = fh.read().splitlines()
        for i, line in enumerate(lines):
            if line.startswith("**Command (this table):**"):
                cmds.append(line.split(":**", 1)[1].strip())
            elif line.startswith("**Machine:**"):
                machines.append(line.split(":**", 1)[1].strip())
            elif line.startswith(("**Commands (this table", "**Machines (per command")):
                block = cmds if line.startswith("**Commands") else machines
                for item in lines[i + 2:]:
                    if not item.startswith("- "):
                        break
                    block.append(item[2:])
    if len(machines) == len(cmds):  # drop this command's own earlier write (tables are rewritten after each agent)
        pairs = [(c, m) for c, m in zip(cmds, machines, strict=True) if not c.startswith(f"`{command_line()}`")]
        cmds, machines = [c for c, _ in pairs], [m for _, m in pairs]
    return seeds_df, cur, merged_order, cmds, machines, run_notes


def plot_curve(cur: pd.DataFrame, path: str, *, title: str) -> None:
    """Cumulative regret, mean ± s.e. over seeds, from a ``TAG_curve.csv`` frame (used for merged tables)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=150)
    groups = list(cur.groupby("agent", sort=False))
    for i, (agent, g) in enumerate(groups):
        x = g["step"].to_numpy() + 1
        (line,) = ax.plot(x, g["cum_regret"].to_numpy(), lw=1.8, label=agent, **bk.plotting.plots.line_style(i))
        ax.fill_between(x, g["cum_regret"] - g["cum_regret_se"], g["cum_regret"] + g["cum_regret_se"],
                        color=line.get_color(), alpha=0.2, lw=0)
    seeds = sorted(set(cur["n"]))
    ax.set_title(textwrap.fill(f"{title} (mean ± s.e. over {'/'.join(map(str, seeds))} seeds)", 70), fontsize=11)
    ax.set_xlabel("step")
    ax.set_ylabel("cumulative regret")
    ax.grid(True, alpha=0.3)
    bk.plotting.plots.agent_legend(ax, len(groups), fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ agent sets
def _agent(spec: str, post: dict | None = None, *, per_env: Callable | None = None, note: dict | None = None,
           **kw) -> Callable:
    """Agent factory ``env -> make_agent(spec, env, posterior_kwargs=post, **kw)``.  ``per_env(env) -> dict``: extra
    ``make_agent`` keywords that need the env (e.g. a diagnostic's labels); ``note``: extra entries for ``.hyper``."""
    from banditkit.agents import make_agent

    def factory(env):
        return make_agent(spec, env, posterior_kwargs=dict(post or {}), **kw, **(per_env(env) if per_env else {}))

    factory.spec = spec
    factory.hyper = dict(post or {}, **(note or {}), **{k: v for k, v in kw.items() if k != "agent_class"})
    return factory


class FullFeedbackWarmup(bk.agents.BanditAgent):
    """Diagnostic, not a bandit protocol: seed 002's reference warm-up fit, which regresses *every* arm's reward on
    the τ warm-up contexts (its loss reads the full one-hot label vectors, ``seed-002-subspace-bandits.md`` §7)
    instead of only the pulled arm's.  The filter still sees only the pulled arms' rewards.

    ``targets_env`` / ``targets_seeds`` / ``targets_steps``: the env and the run's seeds and length; the agent reads
    each seed's first τ contexts and reward rows from ``env.functional(seed, steps)`` and, inside the (vmapped)
    warm-up, picks the seed whose contexts equal the buffer's.  No exact match gives NaN targets, so the runner
    flags the seed as non-finite instead of fitting the wrong labels.
    """

    def __init__(self, *args, targets_env=None, targets_seeds: Sequence[int] = (), targets_steps: int = 0,
                 **kwargs):
        super().__init__(*args, **kwargs)
        if targets_env is None or not targets_seeds or self.warmup_steps < 1:
            raise ValueError("FullFeedbackWarmup needs targets_env, targets_seeds and warmup_steps >= 1")
        u = getattr(targets_env, "unwrapped", targets_env)
        tau, ctx, tgt = self.warmup_steps, [], []
        for seed in targets_seeds:
            fb = u.functional(int(seed), int(targets_steps))
            ctx.append(np.asarray(fb.contexts)[np.asarray(fb.index)[:tau]])
            tgt.append(np.asarray(fb.rewards)[:tau])
        self._warm_contexts = np.stack(ctx).astype(np.float32)  # (S, τ, *context)
        self._warm_targets = np.stack(tgt).astype(np.float32)  # (S, τ, K)

    def warmup(self, key, state, targets=None):
        import jax.numpy as jnp

        if targets is None and self.is_subspace:
            buf = jnp.asarray(state.warmup.contexts, jnp.float32)
            ctx = jnp.asarray(self._warm_contexts)
            dist = jnp.sum(jnp.abs(ctx - buf[None]).reshape(ctx.shape[0], -1), axis=1)
            i = jnp.argmin(dist)
            targets = jnp.where(dist[i] == 0, jnp.asarray(self._warm_targets)[i], jnp.nan)
        return super().warmup(key, state, targets)


def full_feedback_warmup(spec: str, post: dict | None, seeds: Sequence[int], steps: int, **kw) -> Callable:
    """Factory for a :class:`FullFeedbackWarmup` agent (``spec``, ``post``, ``kw`` as for the other agents)."""
    return _agent(spec, post, agent_class=FullFeedbackWarmup, note=dict(warmup="full feedback (diagnostic)"),
                  per_env=lambda env: dict(targets_env=env, targets_seeds=list(seeds), targets_steps=steps), **kw)


RND_NOTE = ("Random-subspace EKF (`ekf_sub_rnd`, `_diag`): the reference's EKF-Sub-RND, a random orthonormal basis "
            "through the bandit-feedback warm-up fit θ*; `ekf_sub_rnd_nowarm` / `ekf_sub_rnd_diag_nowarm` (opt-in): a "
            "random basis through the initial weights with no warm-up (before 2026-11-25 these were the `ekf_sub_rnd` "
            "rows, and older commands in this file name them so).")


def seed002_agents(*, num_actions: int, warmup_per_arm: int, dim: int = 470, sgd_lr: float = 0.8,
                   nl_buffers: tuple[int, int] = (50, 4800), nl_lr: float = 0.01, model=None,
                   full_feedback: tuple[Sequence[int], int] | None = None) -> dict[str, Callable]:
    """Seed 002's agents with the reference code's hyper-parameters (``seed-002-subspace-bandits.md`` §7).

    * ``ekf_sub_svd`` / ``ekf_sub_svd_diag``: τ = ``warmup_per_arm · K`` round-robin pulls, 1000 SGD steps
      (``sgd(sgd_lr, momentum 0.9)``, every 2nd iterate kept), ``d = dim``, ``Σ_z = 1e-4 I``, full / diagonal.
    * ``ekf_sub_rnd`` / ``ekf_sub_rnd_diag``: the same warm-up fit θ*, but a random orthonormal ``d``-dim basis
      through it (``subspace_basis="random"``, the reference code's EKF-Sub-RND), same prior.
    * ``neural_linear_lim`` / ``_unlim``: NIG last layer (``a0 = b0 = 6``, ``Σ0 = 4I``), body retrained every 100
      steps with 100 full-buffer steps of ``sgd(nl_lr, 0.9)``, FIFO buffer ``nl_buffers``; ``_unlim_mb``: the
      unlimited buffer with minibatches of ``nl_buffers[0]`` (a CPU-affordable variant, not the reference's).
    * ``linear``: NIG Bayesian linear regression per arm (``a0 = b0 = 6``, ``Σ0 = 4I``) on the raw context.
    * ``diag_ekf``: diagonal EKF over all weights (``init_cov 1e-3``, seed 002's tabular EKF-Orig prior).

    Opt-in (run only when named): ``ekf_sub_svd_clip0.1`` / ``ekf_sub_svd_diag_clip0.1``, the same bandit protocol
    with the warm-up SGD's gradient clipped to global norm 0.1 (``subspace_from_sgd(clip_norm=0.1)``);
    ``ekf_sub_rnd_nowarm`` / ``ekf_sub_rnd_diag_nowarm``, a random subspace through the *initial* weights with no
    warm-up at all (banditkit's ``subspace_ekf`` default without warm-up; what ``ekf_sub_rnd`` was before
    ``subspace_basis="random"`` existed).

    All use Thompson sampling.  ``model`` overrides the env's default network (e.g. MLP1 vs LeNet5 on MNIST).

    ``full_feedback = (seeds, steps)`` adds two diagnostics that are NOT bandit protocols (they read labels a bandit
    never reveals): ``ekf_sub_svd_fullwarm`` fits the warm-up SGD to every arm's reward, as the reference code
    does (:class:`FullFeedbackWarmup`), and ``ekf_sub_svd_fullwarm_r1e-3`` also takes the reference's observation
    noise 1e-3 — together they are the reference's setup.
    """
    import optax

    tau = int(warmup_per_arm) * int(num_actions)
    sub = dict(subspace_dim=dim, warmup_steps=tau, sgd_kwargs=dict(n_iters=1000, learning_rate=sgd_lr, skip=2))
    m = {} if model is None else dict(model=model)
    # arms=K: the head regression as one block per arm (the same NIG posterior as one dense block) — make_agent's
    # default on the envs' own models, set here for the K-output Dense heads passed as ``model`` (LeNet5, MLP1) too
    nl = dict(train_every=100, n_train_steps=100, optimizer=optax.sgd(nl_lr, momentum=0.9), a0=6.0, b0=6.0,
              init_cov=4.0, arms=int(num_actions))
    # seed 002's subspace prior Σ_z = 1e-4 I, full or diagonal (``_agent`` copies it per agent)
    prior = dict(init_cov=1e-4)
    prior_diag = dict(prior, covariance="diagonal")
    diag = {}
    if full_feedback is not None:
        fseeds, fsteps = full_feedback
        diag = {
            "ekf_sub_svd_fullwarm": full_feedback_warmup("subspace_ekf-thompson", prior, fseeds, fsteps, **sub, **m),
            "ekf_sub_svd_fullwarm_r1e-3": full_feedback_warmup("subspace_ekf-thompson", prior, fseeds, fsteps,
                                                               obs_noise=1e-3, **sub, **m),
        }
    agents = {
        "ekf_sub_svd": _agent("subspace_ekf-thompson", prior, **sub, **m),
        # The reference code's observation noise: R = 0 plus 1e-3 jitter on S (seed-002 digest §7), instead of
        # banditkit's agent default Gaussian(0.1) that every other agent here uses.
        "ekf_sub_svd_r1e-3": _agent("subspace_ekf-thompson", prior, obs_noise=1e-3, **sub, **m),
        "ekf_sub_svd_diag": _agent("subspace_ekf-thompson", prior_diag, **sub, **m),
        "ekf_sub_rnd": _agent("subspace_ekf-thompson", prior, subspace_basis="random", **sub, **m),
        "ekf_sub_rnd_diag": _agent("subspace_ekf-thompson", prior_diag, subspace_basis="random", **sub, **m),
        "ekf_sub_rnd_nowarm": _agent("subspace_ekf-thompson", prior, subspace_dim=dim, warmup_steps=0, **m),
        "ekf_sub_rnd_diag_nowarm": _agent("subspace_ekf-thompson", prior_diag, subspace_dim=dim, warmup_steps=0,
                                          **m),
        "neural_linear_lim": _agent("neural_linear-thompson", dict(nl, buffer_size=nl_buffers[0]), **m),
        "neural_linear_unlim": _agent("neural_linear-thompson", dict(nl, buffer_size=nl_buffers[1]), **m),
        # Not the reference's agent: the unlimited buffer, but each of the 100 retraining steps takes a minibatch of
        # nl_buffers[0] instead of the whole (masked, always full-size under jit) buffer, so it costs what
        # neural_linear_lim costs (the full-buffer version is ~100x dearer: ~7,000 s per seed for LeNet5 on CPU).
        "neural_linear_unlim_mb": _agent("neural_linear-thompson", dict(nl, buffer_size=nl_buffers[1],
                                                                        batch_size=nl_buffers[0]), **m),
        # make_agent's linear agent: one (μ_k, Σ_k) per arm, one σ² shared by all arms — the joint NIG posterior
        # computed K blocks at a time (rows before 2026-11-26 ran the joint (P, P) computation, same posterior);
        # linear_per_arm: the paper's per-arm Lin-TS (seed 002 A.1, Riquelme et al.), each arm its own σ_k² too
        "linear": _agent("linear-thompson", dict(init_cov=4.0, noise="nig", a0=6.0, b0=6.0)),
        "linear_per_arm": _agent("linear-thompson", dict(init_cov=4.0, noise="nig", a0=6.0, b0=6.0,
                                                         shared_noise=False)),
        "diag_ekf": _agent("diag_ekf-thompson", dict(init_cov=1e-3), **m),
    }
    # A bandit-protocol variant (reads no labels), opt-in so the default run stays the reference's: the warm-up SGD's
    # gradient clipped to global norm 0.1, which keeps every MNIST warm-up fit finite at lr 0.8
    # (results/mnist_seed002_warmup_fit_clip0.1.md; unclipped, 4 of 16 diverge).
    clip = dict(sub, sgd_kwargs=dict(sub["sgd_kwargs"], clip_norm=0.1))
    agents["ekf_sub_svd_clip0.1"] = _agent("subspace_ekf-thompson", prior, **clip, **m)
    agents["ekf_sub_svd_diag_clip0.1"] = _agent("subspace_ekf-thompson", prior_diag, **clip, **m)
    for name in ("ekf_sub_svd_r1e-3", "ekf_sub_svd_clip0.1", "ekf_sub_svd_diag_clip0.1", "ekf_sub_rnd_nowarm",
                 "ekf_sub_rnd_diag_nowarm"):
        agents[name].opt_in = True
    for f in diag.values():
        f.opt_in = True
    return agents | diag


class SigmoidFixedNoise(NamedTuple):
    """A diagnostic observation model, not one of banditkit's likelihoods: the seed-003 MNIST-bandit reward model
    as the authors' code runs it (``anchors-reference-code.md`` §1.5) — mean ``σ(f)``, and their softmax covariance
    applied to one output, which degenerates to a fixed variance ``R = jitter · I`` (not ``σ(f)(1 − σ(f))``)."""

    jitter: float = 1e-4
    name: str = "sigmoid_fixed_noise"

    def mean(self, f):
        import jax

        return jax.nn.sigmoid(f)

    def cov(self, f):
        import jax.numpy as jnp

        return jnp.asarray(self.jitter, f.dtype) * jnp.eye(f.shape[-1], dtype=f.dtype)


def coordinate_init(factory: Callable, loading: float | None = None) -> Callable:
    """A diagnostic: the LRKF / HiLoFi / LoLoFi agent of ``factory`` with the authors' initial factors
    ``C_0 = c·[I_d | 0]`` (their ``low_rank_diag=True`` / ``diag_last=True``; ``seed-003-hilofi.md`` §14.2.3) — prior
    variance ``c²`` on the first ``d`` ravelled parameters of each low-rank block only (on LeNet5's hidden block the
    first convolution's 6 biases and 44 of its kernel weights; on LoLoFi's head the 10 biases and 90 weights) instead
    of banditkit's random orthonormal rows.  ``loading`` is their ``c`` (default: ``√`` of the factory's prior
    variance)."""
    import jax.numpy as jnp

    def rows(c, g):
        d, p = c.shape
        v = jnp.sqrt(g[0]) if loading is None else jnp.asarray(loading, c.dtype)
        return v * jnp.eye(d, p, dtype=c.dtype), jnp.full((d,), v**2, c.dtype)

    def make(env):
        agent = factory(env)
        post = agent.posterior

        def init(params):
            s = post.init(params)
            if hasattr(s, "cov_hidden"):  # HiLoFi / LoLoFi: the hidden factor, and a low-rank head's
                ch, gh = rows(s.cov_hidden, s.gram_hidden)
                s = s._replace(cov_hidden=ch, gram_hidden=gh)
                if s.gram_last.size:
                    cl, gl = rows(s.cov_last, s.gram_last)
                    s = s._replace(cov_last=cl, gram_last=gl)
                return s
            c, g = rows(s.cov, s.gram)
            return s._replace(cov=c, gram=g)

        agent.posterior = post._replace(init=init)
        return agent

    make.spec = factory.spec
    make.hyper = dict(factory.hyper, initial_factor="coordinates", **({} if loading is None else dict(loading=loading)))
    return make


def scaled_draws(factory: Callable, scale: float) -> Callable:
    """A diagnostic: the LRKF agent of ``factory`` whose Thompson draws use ``scale`` times the pending isotropic
    variance, ``θ̃ = μ + Cᵀε + √(scale·q̄) z``, while its filter (mean step and factor) keeps ``q̄``: it separates what
    the dynamics noise does to exploration (the draws' spread, about ``√q̄ ‖h‖`` for a logit with gradient ``h``) from
    what it does to learning (the isotropic gradient step ``q̄ Hᵀ S⁻¹ε``).  The posterior's ``hyper`` carries
    ``draw_q_scale`` for probes."""

    def make(env):
        agent = factory(env)
        post = agent.posterior

        def sample(key, state):
            return post.sample(key, state._replace(q=state.q * scale))

        agent.posterior = post._replace(sample=sample, hyper=dict(post.hyper, draw_q_scale=scale))
        return agent

    make.spec = factory.spec
    make.hyper = dict(factory.hyper, draw_q_scale=scale)
    return make


def seed003_agents(*, rank: int = 50, rank_last: int = 100, q: float = 1e-6, cov: float = 0.1,
                   lrkf_cov: float = 1.0, lofi_cov: float = float(np.exp(-8.0)), lofi_rank: int | None = None,
                   eps_greedy: bool = True, model=None) -> dict[str, Callable]:
    """Seed 003's MNIST-bandit agents (``seed-003-hilofi.md`` §11.2(b)), all Thompson sampling except the
    replay-SGD point estimate with ε-greedy (ε = 0.05, AdamW lr 1e-4, 5 inner steps, buffer 1)."""
    import optax

    m = {} if model is None else dict(model=model)
    hilofi_post = dict(rank=rank, init_cov_hidden=cov, init_cov_last=cov, dynamics_cov=q)
    lolofi_post = dict(rank=rank, rank_last=rank_last, init_cov_hidden=cov, init_cov_last=cov, dynamics_cov=q)
    lrkf_post = dict(rank=rank, init_cov=lrkf_cov, dynamics_cov=q)
    lofi_post = dict(rank=lofi_rank or rank, init_cov=lofi_cov, dynamics_cov=0.0)
    out = {
        "hilofi_ts": _agent("hilofi-thompson", hilofi_post, **m),
        # Not in the paper: HiLoFi-TS with q_ℓ = 0 (q_h as above).  With q_ℓ > 0 every ``predict`` refactors the
        # full (D_ℓ, D_ℓ) last-layer square root (D_ℓ = 850 on LeNet5: a QR of a 1700×850 stack, ~0.6 s per seed
        # and step on this machine, before commit 2f64caa; a Cholesky of UᵀU + qI since); q_ℓ = 0 skips it.
        "hilofi_ts_qlast0": _agent("hilofi-thompson", dict(rank=rank, init_cov_hidden=cov, init_cov_last=cov,
                                                           dynamics_cov_hidden=q, dynamics_cov_last=0.0), **m),
        "lolofi_ts": _agent("lolofi-thompson", lolofi_post, **m),
        "lrkf_ts": _agent("lrkf-thompson", lrkf_post, **m),
        "lofi_ts": _agent("lofi-thompson", lofi_post, **m),
    }
    # Opt-in diagnostics (results/diag_lowrank_mnist.md): why LRKF-TS / LoLoFi-TS fall short of the authors'
    # notebook; the ``_r1e-2`` / ``_r1e-4`` ones of every filter also across environments (results/diag_obsnoise.md).
    # Each changes one thing of the agent above: the observation model (Gaussian variance 0.01 or 1e-4; the
    # moment-matched Bernoulli; the authors' code as it runs, sigmoid mean with a fixed variance 1e-4), the Thompson
    # draw (each arm's reward from its linearised predictive instead of one parameter draw), or the initial factor
    # (the authors' coordinate rows); ``_auth`` is the authors' configuration: their factors and observation model.
    bases = {"hilofi_ts": ("hilofi", hilofi_post), "lrkf_ts": ("lrkf", lrkf_post), "lolofi_ts": ("lolofi", lolofi_post),
             "lofi_ts": ("lofi", lofi_post)}
    auth_lik = dict(likelihood=SigmoidFixedNoise(1e-4), **m)
    for base, (spec, post) in bases.items():
        ts = f"{spec}-thompson"
        variants = {"r1e-2": _agent(ts, post, obs_noise=1e-2, **m), "r1e-4": _agent(ts, post, obs_noise=1e-4, **m),
                    # the variance learned online from the default start 0.1 (posteriors.adaptive_noise, its
                    # defaults; results/diag_obsnoise.md)
                    "vb": _agent(ts, post, adaptive_noise=True, **m)}
        if spec == "hilofi":  # their hidden factor (loading 0.1) and full last layer 0.1·I (variance 0.01)
            variants["auth"] = coordinate_init(_agent(ts, dict(post, init_cov_last=cov**2), **auth_lik), loading=cov)
        if spec == "lolofi":  # their factors (loading 0.1, variance 0.01)
            variants["auth"] = coordinate_init(_agent(ts, post, **auth_lik), loading=cov)
            # ... with 100x the dynamics noise (1e-4): does it end LoLoFi's arm starvation as it does LRKF's?
            # (results/diag_starvation_q.md)
            variants["auth_q1e-4"] = coordinate_init(_agent(ts, dict(post, dynamics_cov=100 * q), **auth_lik),
                                                     loading=cov)
        if spec == "lrkf":
            auth = coordinate_init(_agent(ts, post, **auth_lik))
            auth_q1e4 = coordinate_init(_agent(ts, dict(post, dynamics_cov=100 * q), **auth_lik))
            variants |= {
                "bern": _agent(ts, post, likelihood=bk.likelihoods.Bernoulli(1e-4), **m),
                "sigm": _agent(ts, post, **auth_lik),
                "pred": _agent(f"{spec}-thompson_predictive", post, **m),
                "coord": coordinate_init(_agent(ts, post, **m)),
                "auth": auth,
                # without dynamics noise (q = 0: the factor's row space never leaves the first d coordinates)
                "auth_q0": coordinate_init(_agent(ts, dict(post, dynamics_cov=0.0), **auth_lik)),
                # the authors' configuration with a 100x larger fixed variance (1e-2): a wider posterior, to test
                # whether its narrow Thompson draws are what starves arms (results/diag_starvation.md)
                "auth_v1e-2": coordinate_init(_agent(ts, post, likelihood=SigmoidFixedNoise(1e-2), **m)),
                # ... and with a rank-10 factor instead of 50: whether the factor's rank sets how far draws move a logit
                "auth_d10": coordinate_init(_agent(ts, dict(post, rank=10), **auth_lik)),
                # ... and with 10x / 100x the dynamics noise q (1e-5, 1e-4 for 1e-6): does q set the draws' spread?
                # (it does, as the isotropic √q̄‖h‖, and 1e-4 ends the starvation: results/diag_starvation_q.md)
                "auth_q1e-5": coordinate_init(_agent(ts, dict(post, dynamics_cov=10 * q), **auth_lik)),
                "auth_q1e-4": auth_q1e4,
                # ... and each half of it: draws with 100x q̄ while the filter keeps q (exploration only), and the
                # filter with 100x q while the draws use q (learning only)
                "auth_draw100": scaled_draws(auth, 100.0),
                "auth_q1e-4_draw1": scaled_draws(auth_q1e4, 0.01),
                "coord_r1e-4": coordinate_init(_agent(ts, post, obs_noise=1e-4, **m)),
                # random rows with a smaller prior variance: at the start ‖CHᵀ‖² ≈ init_cov·d/P·‖H‖², below the
                # q step's q‖H‖² for init_cov = 1e-3 (d/P ≈ 8e-4 on LeNet5), as with the coordinate factor (measured:
                # that alone does not give the coordinate factor's gain)
                "r1e-4_cov1e-2": _agent(ts, dict(post, init_cov=1e-2), obs_noise=1e-4, **m),
                "r1e-4_cov1e-3": _agent(ts, dict(post, init_cov=1e-3), obs_noise=1e-4, **m),
            }
        if spec in ("hilofi", "lolofi", "lrkf"):
            # the authors' configuration with their code's dynamics too (``dynamics_mode="gain"``: q enters each
            # round's predictive, draw and gain but is not carried in the factor; ``seed-003-hilofi.md`` §3.3)
            gain_post = dict(post, dynamics_mode="gain", **(dict(init_cov_last=cov**2) if spec == "hilofi" else {}))
            variants["auth_gain"] = coordinate_init(_agent(ts, gain_post, **auth_lik),
                                                    loading=None if spec == "lrkf" else cov)
        for tag, f in variants.items():
            f.opt_in = True
            out[f"{base}_{tag}"] = f
    if eps_greedy:
        out["replay_sgd_eps"] = _agent("replay_sgd-eps_greedy", dict(buffer_size=1, n_inner=5,
                                                                     optimizer=optax.adamw(1e-4)),
                                       policy_kwargs=dict(epsilon=0.05), **m)
    return out
