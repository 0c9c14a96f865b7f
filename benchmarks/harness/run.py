"""Running a bandit suite's agents: one environment, several agents, the same seeds.

For every agent :func:`run_agents` calls the compiled runner ``bk.run`` (``lax.scan`` over rounds, ``vmap`` over
seeds), so compilation (``compile_s``) is timed apart from execution (``run_s``; all seeds advance together).  An agent
that raises is reported, not fatal; ``--max-agent-s`` and ``kill -USR1 <pid>`` stop an agent at the end of a chunk and
keep its finished rounds; the tables are rewritten after every agent (``on_agent``), so a killed run keeps what it
finished.  :func:`play_thompson` is the studies' own loop (per-seed ``lax.scan``, seeds vmapped) for what the runner
does not record.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

import banditkit as bk
from benchmarks.harness.options import seed_list
from benchmarks.harness.tables import se


@dataclass
class Result:
    """What :func:`run_agents` returns: the per-step frame and the per-agent timing."""

    frame: pd.DataFrame
    timing: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)


class _TimeCap(Exception):
    pass


_STOP = {"flag": False}
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
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=bk.experiments.COLUMNS)
    frame.attrs["timing"] = timing
    return Result(frame, dict(timing), dict(failures))


def _partial(frames, timing, failures, agents, on_agent) -> None:
    """Call ``on_agent`` with the results so far; agents not finished are listed as pending."""
    if on_agent is None:
        return
    pending = {n: "pending: not finished when this table was written (run still going, killed, or hung)"
               for n in agents if n not in timing and n not in failures}
    on_agent(_result(frames, timing, {**failures, **pending}))


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
