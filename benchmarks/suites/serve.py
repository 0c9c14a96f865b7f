"""``banditkit serve`` under load (issue 70 item 5): rank requests/s and latency on loopback, without and with rewards.

The server: ``banditkit serve --agent hilofi-thompson`` (a child process, default settings otherwise: micro-batches
of up to 64, ``--draws`` Thompson draws per decision, ``--sync full``: every commit synced to disk) on a fresh store,
20 actions of 32 features and a 16-number context per request (a per-arm model scoring ``[context, features]``).
The load generator (:mod:`benchmarks.suites.serve_load`, this process: asyncio, HTTP/1.1 keep-alive) runs

1. a warm-up (closed loop, discarded);
2. **closed loop**, ``--connections`` connections back to back: the throughput at that concurrency;
3. **open loop** at each of ``--rates`` requests/s (latency from each request's due time: queueing included), each
   followed by the same open loop **with rewards flowing**: each rank answer followed by its ``/reward`` on the same
   connection.

Each phase lasts ``--seconds`` (bounded: the suite stops by itself).  The table gives rank answers/s, p50 / p99 /
max latency (ms), errors, rewards/s, the server's mean micro-batch size over the phase, the CPU time the server
process (all threads, ``/proc/PID/stat``) and the load generator used per answer, and the machine's 1-minute load
average (``os.getloadavg()``) before the phase — the machine is shared, so read the rates with it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time

import numpy as np
import pandas as pd

from banditkit.serve.process import ServerProcess
from benchmarks.harness import options, provenance
from benchmarks.suites.serve_load import make_bodies, run_load


def _batches(srv: ServerProcess) -> tuple[int, int]:
    status, s = srv.get("/status.json")
    return (int(s.get("batches", 0)), int(s.get("batched", 0))) if status == 200 else (0, 0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far, from ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def phase(srv: ServerProcess, bodies, name: str, *, rate, connections: int, seconds: float, rewards: bool) -> dict:
    load = os.getloadavg()[0]
    b0, i0 = _batches(srv)
    c0, g0 = cpu_seconds(srv.proc.pid), time.process_time()
    res = run_load(srv.port, bodies, rate=rate, connections=connections, seconds=seconds, rewards=rewards,
                   prefix=f"{name}-")
    c1, g1 = cpu_seconds(srv.proc.pid), time.process_time()
    b1, i1 = _batches(srv)
    lat = res.latencies_ms
    q = np.percentile(lat, [50, 99]) if lat.size else [np.nan, np.nan]
    return dict(phase=name, offered=("closed" if rate is None else f"{rate:g}/s"), connections=connections,
                rewards=rewards, seconds=round(res.seconds, 2), rank_per_s=res.ok / res.seconds,
                p50_ms=q[0], p99_ms=q[1], max_ms=float(lat.max()) if lat.size else np.nan, errors=res.errors,
                rewards_per_s=res.rewards_ok / res.seconds,
                mean_batch=(i1 - i0) / (b1 - b0) if b1 > b0 else np.nan, load_1min=load,
                server_cpu_ms=1e3 * (c1 - c0) / max(res.ok, 1), loadgen_cpu_ms=1e3 * (g1 - g0) / max(res.ok, 1))


def render(df: pd.DataFrame, args, machine: str, command: str, compile_line: str) -> str:
    lines = ["# `banditkit serve` under load", "",
             f"`{command}`", "",
             f"Server: `banditkit serve --agent {args.agent} --context-dim {args.context_dim} --action-dim "
             f"{args.action_dim} --max-actions {args.actions} --draws {args.draws} --max-batch {args.max_batch} "
             f"--sync {args.sync}` (uvicorn + httptools + uvloop, one process); {compile_line}.  Load generator: "
             "`benchmarks/suites/serve_load.py` (asyncio, HTTP/1.1 keep-alive, in a second process on the same "
             "machine); latencies in the open loop from each request's due time.", "",
             f"Machine: {machine}.  `load 1 min` is `os.getloadavg()[0]` before the phase (the machine is shared with "
             "other work).", "",
             "`server CPU ms` / `load gen. CPU ms`: CPU time (user + system, all threads) of the server process / of "
             "the load generator during the phase, per rank answer (with rewards: the reward's work included) — what "
             "a request costs, whatever share of the cores the phase got.", "",
             "| phase | offered | conns | rewards | rank answers/s | p50 ms | p99 ms | max ms | errors | rewards/s | "
             "mean batch | server CPU ms | load gen. CPU ms | load 1 min |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in df.itertuples():
        lines.append(f"| {r.phase} | {r.offered} | {r.connections} | {'yes' if r.rewards else 'no'} | "
                     f"{r.rank_per_s:.0f} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.max_ms:.1f} | {r.errors} | "
                     f"{r.rewards_per_s:.0f} | {r.mean_batch:.1f} | {r.server_cpu_ms:.2f} | {r.loadgen_cpu_ms:.2f} | "
                     f"{r.load_1min:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--agent", default="hilofi-thompson")
    p.add_argument("--context-dim", type=int, default=16)
    p.add_argument("--action-dim", type=int, default=32)
    p.add_argument("--actions", type=int, default=20, help="actions per request (and --max-actions)")
    p.add_argument("--draws", type=int, default=32)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--sync", choices=("full", "normal"), default="full")
    p.add_argument("--rates", default="1000,300",
                   help="open-loop rank requests per second, comma-separated: each rate runs without and with rewards")
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--seconds", type=float, default=15.0, help="length of each measured phase")
    p.add_argument("--warmup-seconds", type=float, default=3.0)
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--tag", default="serve")
    options.add_blas_threads(p)  # this process (the load generator); the server caps BLAS as the banditkit command does
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    command = provenance.command_line()
    folder = tempfile.mkdtemp(prefix="banditkit-serve-bench-")
    bodies = make_bodies(500, args.context_dim, args.action_dim, args.actions)
    srv = ServerProcess(["--agent", args.agent, "--store", os.path.join(folder, "log.db"), "--context-dim",
                         str(args.context_dim), "--action-dim", str(args.action_dim), "--max-actions",
                         str(args.actions), "--draws", str(args.draws), "--max-batch", str(args.max_batch),
                         "--sync", args.sync, "--log-level", "error"], log_path=os.path.join(folder, "server.log"))
    t0 = time.time()
    srv.start()
    started = time.time() - t0
    try:
        run_load(srv.port, bodies, rate=None, connections=args.connections, seconds=args.warmup_seconds,
                 prefix="warm-")
        rows = [phase(srv, bodies, "closed loop", rate=None, connections=args.connections, seconds=args.seconds,
                      rewards=False)]
        for k, rate in enumerate(float(r) for r in args.rates.split(",")):
            for rewards in (False, True):
                rows.append(phase(srv, bodies, f"open loop {k + 1}" + (" + rewards" if rewards else ""), rate=rate,
                                  connections=args.connections, seconds=args.seconds, rewards=rewards))
    finally:
        log = srv.log()
        srv.stop()
        shutil.rmtree(folder, ignore_errors=True)
    m = re.search(r"compiled in ([\d.]+) s", log)
    compiled = f"compiled in {m.group(1)} s" if m else "compile time not reported"
    df = pd.DataFrame(rows)
    machine = f"{os.cpu_count()} cores{provenance.cpu_note()}{provenance.cores_note()}{provenance.commit_note()}"
    compile_line = f"ready {started:.1f} s after launch (imports, then {compiled})"
    os.makedirs(args.out, exist_ok=True)
    df.to_csv(os.path.join(args.out, f"{args.tag}.csv"), index=False)
    text = render(df, args, machine, command, compile_line)
    with open(os.path.join(args.out, f"{args.tag}.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
