"""Throughput of a hyper-parameter × seed sweep (issue 57): ``bk.sweep`` in one process, in two processes joined by
``jax.distributed``, and the loop of separate ``bk.run`` calls (one per configuration, its seeds vmapped).

The sweep: HiLoFi-TS (``make_agent`` defaults) on Shuttle, ``obs_noise`` × ``init_cov_last`` (4 × 2 configurations)
× 8 seeds = 64 lanes, 2000 rounds by default.  Each mode runs in fresh interpreters (nothing compiled is cached
between modes); the modes alternate over ``--reps`` rounds so that a change in the machine's load falls on all of
them.  Wall time is measured around the work inside the worker (compilation included, interpreter start and imports
excluded); throughput = lanes × rounds / wall.  Every mode's final cumulative regret per (configuration, seed) is
compared with the one-process sweep's (the same runs, so the same numbers up to float rounding).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from benchmarks.harness import options, tables

ENV = "banditkit/Shuttle-v0"
SPEC = "hilofi-ts"
GRID = {"obs_noise": [0.01, 0.03, 0.1, 0.3], "init_cov_last": [0.3, 1.0]}
MODES = ("sweep-1proc", "sweep-2proc", "loop-of-runs")


# ------------------------------------------------------------------------------------------------------ workers
def _final(df: pd.DataFrame) -> list:
    last = df[df["step"] == df["step"].max()].sort_values(["obs_noise", "init_cov_last", "seed"])
    return last["cumulative_regret"].round(6).tolist()


def _worker(mode: str, steps: int, seeds: int, pid: int, port: int) -> None:
    if mode == "sweep-2proc":
        from banditkit.experiments.placement import initialize

        initialize(f"localhost:{port}", num_processes=2, process_id=pid)
    import banditkit as bk

    tic = time.perf_counter()
    if mode == "loop-of-runs":
        frames, compile_s, run_s = [], 0.0, 0.0
        env = bk.experiments.resolve.make_env(ENV, steps=steps)
        for on in GRID["obs_noise"]:
            for ic in GRID["init_cov_last"]:
                agent = bk.agents.make_agent(SPEC, env, obs_noise=on, posterior_kwargs=dict(init_cov_last=ic))
                df = bk.run(env, agent, steps, seeds, progress=False)
                t = df.attrs["timing"][SPEC]
                compile_s += t["compile_s"]
                run_s += t["run_s"]
                frames.append(df.assign(obs_noise=on, init_cov_last=ic))
        df = pd.concat(frames, ignore_index=True)
        devices = 1
    else:
        df = bk.sweep(SPEC, ENV, GRID, seeds=seeds, steps=steps, progress=False)
        t = df.attrs["timing"][SPEC]
        compile_s, run_s, devices = t["compile_s"], t["run_s"], t["devices"]
    wall = time.perf_counter() - tic
    print("JSON" + json.dumps(dict(wall_s=wall, compile_s=compile_s, run_s=run_s, devices=devices,
                                   final=_final(df))), flush=True)


def _launch(mode: str, steps: int, seeds: int) -> dict:
    base = [sys.executable, "-m", "benchmarks.suites.sweep", "--worker", mode, "--steps", str(steps),
            "--seeds", str(seeds)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    n = 2 if mode == "sweep-2proc" else 1
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen(base + ["--pid", str(i), "--port", str(port)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(n)]
    outs = [p.communicate() for p in procs]
    infos = []
    for p, (out, err) in zip(procs, outs, strict=True):
        if p.returncode != 0 or "JSON" not in out:
            raise SystemExit(f"{mode} failed:\n{err[-3000:]}")
        infos.append(json.loads(out.split("JSON", 1)[1]))
    info = infos[0]
    info["wall_s"] = max(i["wall_s"] for i in infos)  # the sweep is done when its last process is
    return info


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=8, help="seeds per configuration (8 configurations)")
    p.add_argument("--reps", type=int, default=2, help="alternating rounds of the three modes (median reported)")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--out", default=os.path.join(options.RESULTS, "sweep"))
    p.add_argument("--tag", default="sweep_throughput")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--pid", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    if args.worker:
        return _worker(args.worker, args.steps, args.seeds, args.pid, args.port)
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        raise SystemExit(f"unknown mode(s) {unknown}; the modes: {list(MODES)}")
    lanes = len(GRID["obs_noise"]) * len(GRID["init_cov_last"]) * args.seeds
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    load = []
    for rep in range(args.reps):
        for m in modes:
            load.append(os.getloadavg()[0])
            info = _launch(m, args.steps, args.seeds)
            runs[m].append(info)
            print(f"rep {rep} {m:14s} wall {info['wall_s']:7.1f} s  compile {info['compile_s']:6.1f} s  "
                  f"run {info['run_s']:7.1f} s", flush=True)
    ref = np.asarray(runs[modes[0]][0]["final"])
    rows = []
    for m in modes:
        wall = statistics.median(i["wall_s"] for i in runs[m])
        diff = max(float(np.max(np.abs(np.asarray(i["final"]) - ref))) for i in runs[m])
        rows.append(dict(mode=m, lanes=lanes, steps=args.steps, wall_s=wall,
                         compile_s=statistics.median(i["compile_s"] for i in runs[m]),
                         run_s=statistics.median(i["run_s"] for i in runs[m]),
                         lane_rounds_per_s=lanes * args.steps / wall, devices=runs[m][0]["devices"],
                         max_final_regret_diff=diff))
    df = pd.DataFrame(rows)
    base = df.loc[df["mode"] == modes[0], "wall_s"].iloc[0]
    df["speedup_vs_" + modes[0]] = base / df["wall_s"]
    lines = tables.preamble(f"Sweep throughput: {lanes} lanes of {SPEC} on Shuttle, {args.steps} rounds", __doc__)
    lines += [f"Grid {GRID} × {args.seeds} seeds; median of {args.reps} alternating rounds; machine: {os.cpu_count()} "
              f"CPU cores, 1-minute load average during the runs {min(load):.1f}–{max(load):.1f} (shared with "
              "other jobs when above the core count).", "",
              "| mode | wall (s) | compile (s) | run (s) | lane-rounds / s | relative to " + modes[0]
              + " | max \\|Δ final regret\\| |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.mode} | {r.wall_s:.1f} | {r.compile_s:.1f} | {r.run_s:.1f} | {r.lane_rounds_per_s:.0f} | "
              f"{base / r.wall_s:.2f}× | {r.max_final_regret_diff:.2g} |" for r in df.itertuples()]
    lines += ["", "compile / run: the runner's own split (`df.attrs['timing']`; the loop sums its runs'); the two-"
              "process sweep reports process 0's, and its wall is the slower process's."]
    lines += [""] + tables.hand_notes(os.path.join(args.out, f"{args.tag}.md"))  # a rewrite keeps the run notes
    os.makedirs(args.out, exist_ok=True)
    tables.save_table(df, lines, args.out, args.tag)
    print(f"wrote {os.path.join(args.out, args.tag)}.md / .csv")


if __name__ == "__main__":
    main()
