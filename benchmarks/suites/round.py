"""A whole bandit round against the posterior update it contains (issue 58, "A whole round").

What is timed, for HiLoFi-TS built by ``make_agent("hilofi-thompson", env, posterior_kwargs=dict(rank=--rank))`` (the
default configuration: per-arm head blocks ``arms=K``, square-root last layer, ``q = 0``) on the MNIST bandit
(``LeNet5(out=10)``), the Shuttle showdown table (``MLP(50, 50, out=7)``) and MovieLens (``MLP(50, 50, out=20)``),
float32, one seed, on a state after ``--burn`` rounds of the runner, each its own ``jax.jit``:

``update``   ``posterior.update(state, (context, e_a), y)``: the measurement update alone
``act``      ``agent.choose(key, state, context)``: the Thompson draw of ``f(θ̃, context) (K,)``, argmax
``observe``  ``agent.update(state, context, a, r)``: ``update`` then ``predict`` (the time update)
``round``    ``act`` + ``observe`` under one ``jit``, the body of the compiled runner's scan
``sample``   ``posterior.sample(key, state)`` alone (the draw of ``act``)
``predict``  ``posterior.predict(state)`` alone
``scan``     the compiled runner's own program (``compiled_loop.round_scan`` of ``--length`` rounds, ``vmap`` over one
             lane, ``canonical_convs``, the state donated), per round
``observe_scan``  the same program with ``observe`` only (the action ``t mod K``, no ``act``), per round
``scan_unroll2``  ``scan`` with ``lax.scan(..., unroll=2)`` (two rounds per loop iteration), per round

For each: XLA's cost analysis of the compiled call (``flops``, ``bytes accessed``; for the scans XLA counts the loop
body once, so they are left out) and the time: the calls run interleaved, ``--windows`` windows of every call in
turn, each window the fastest of ``--reps`` back-to-back calls, timed twice: wall clock and this process's CPU time
(``time.process_time``, all its threads: on a shared, oversubscribed machine a long call is descheduled more often
than a short one, which inflates its wall time but not its CPU time).  The table gives the medians over windows and
``/ update`` (``/ observe_scan`` for the scans) as the median of the per-window ratios of CPU times, so a load that
changes during the run falls on both alike.  ``--configs``: ``default`` (make_agent's HiLoFi-TS) and ``seed003``
(seed 003's MNIST setting, the arm_blocks suite's ``hilofi_ts``: ``q = 1e-6`` on both blocks, so a dense per-arm head
and a pending isotropic hidden part).  ``--draw conditional,joint`` builds each agent both ways
(``hilofi(draw=...)``: the head's outputs drawn given the hidden draw, or every parameter drawn, as before issue 58;
without ``--draw``, hilofi's default ``"auto"``) and times both in the same windows.  BLAS / LAPACK on one thread
(``--blas-threads``).  Writes ``TAG.csv`` and ``TAG.md`` into ``--out``.

Usage::

    python -m benchmarks round                           # mnist, shuttle, movielens at rank 50
    python -m benchmarks round --configs default,seed003 --draw conditional,joint --windows 15
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit  # noqa: F401  (registers the envs)
from banditkit._xla.conv import canonical_convs
from banditkit.agents import make_agent
from banditkit.experiments import compiled_loop as loop
from benchmarks.harness import options, provenance, tables

ENVS = {"mnist": ("banditkit/MNIST-v0", {"replace": False}), "shuttle": ("banditkit/Shuttle-v0", {}),
        "movielens": ("banditkit/MovieLens-v0", {})}
# the agents: make_agent's default HiLoFi-TS (q = 0: square-root per-arm head blocks), and seed 003's MNIST setting
# (the arm_blocks suite's hilofi_ts: q = 1e-6 on both blocks, so a dense per-arm head and a pending isotropic part)
CONFIGS = {"default": {}, "seed003": dict(init_cov_hidden=0.1, init_cov_last=0.1, dynamics_cov=1e-6)}
CALLS = ("update", "act", "observe", "round", "sample", "predict", "scan", "observe_scan", "scan_unroll2")
LOOPS = ("scan", "observe_scan", "scan_unroll2")


def cost(compiled) -> tuple[float, float]:
    """``(flops, bytes accessed)`` of a compiled call (XLA's cost analysis)."""
    c = compiled.cost_analysis()
    c = c[0] if isinstance(c, list) else c
    return float(c.get("flops", 0.0)), float(c.get("bytes accessed", 0.0))


class _Chain:
    """A donated program run back to back on its own output: ``fn(state, *rest) -> (state, out)``."""

    def __init__(self, fn, state, rest):
        self.fn, self.state, self.rest = fn, state, rest

    def __call__(self):
        self.state, out = self.fn(self.state, *self.rest)
        return self.state, out


def build(env_name: str, config: str, rank: int, length: int, burn: int, draw: str | None):
    """``(P, calls, per_call_rounds)``: ``name -> (jitted fn, args)`` of the module docstring's calls."""
    env_id, kw = ENVS[env_name]
    steps = burn + length
    env = gym.make(env_id, max_steps=steps, **kw)
    post_kw = dict(CONFIGS[config], rank=rank)
    if draw is not None:
        post_kw["draw"] = draw
    agent = make_agent("hilofi-thompson", env, posterior_kwargs=post_kw)
    u = env.unwrapped
    k = int(u.num_actions)
    data, contexts, shared = loop.seed_inputs(u, [0], steps, steps, [0])
    ctx_axis = None if shared else 0

    def scan_one(st, d, pool, t0, n):
        return loop.round_scan(agent, st, d, pool, t0, n)

    def unrolled_one(st, d, pool, t0, n):  # round_scan's rounds, two per loop iteration
        def step(s, t):
            key_t = jax.random.fold_in(d["keys"][1], t)
            c = pool[d["index"][t]]
            a = agent.choose(key_t, s, c)
            r = d["rewards"][t, a]
            return agent.update(s, c, a, r), (a, r, d["expected"][t, a], jnp.max(d["expected"][t]))
        return jax.lax.scan(step, st, t0 + jnp.arange(n), unroll=2)

    def observe_one(st, d, pool, t0, n):
        def step(s, t):
            a = (t % k).astype(jnp.int32)
            return agent.update(s, pool[d["index"][t]], a, d["rewards"][t, a]), a
        return jax.lax.scan(step, st, t0 + jnp.arange(n))

    state, prog = loop.compile_lanes(lambda d, pool: loop.init_lane(agent, d, pool), scan_one, None, data, contexts,
                                     ctx_axis, [(0, burn), (burn, length)], steps, 0, None)
    state, _ = prog.advance(state, data, contexts, 0, burn)  # a state that has seen burn rounds
    one = jax.tree_util.tree_map(lambda a: a[0], state)
    t = burn
    ctx = jnp.asarray(contexts[data["index"][0, t]] if shared else contexts[0, data["index"][0, t]])
    rewards = jnp.asarray(data["rewards"][0, t])
    a0 = jnp.int32(int(np.argmax(np.asarray(data["rewards"][0, t]))))
    post = agent.posterior
    x = (ctx, jax.nn.one_hot(a0, k))  # the selected-output model's input of arm a0 (bk.agents.selected_output)
    y = jnp.asarray([float(rewards[a0]) / agent.reward_scale], jnp.float32)
    key = jax.random.fold_in(jax.random.PRNGKey(1), t)

    def round_fn(key, st, c, r):
        a = agent.choose(key, st, c)
        return agent.update(st, c, a, r[a])

    calls = {
        "update": (post.update, (one.posterior, x, y)),
        "act": (agent.choose, (key, one, ctx)),
        "observe": (agent.update, (one, ctx, a0, rewards[a0])),
        "round": (round_fn, (key, one, ctx, rewards)),
        "sample": (post.sample, (key, one.posterior)),
        "predict": (post.predict, (one.posterior,)),
    }
    calls = {name: (jax.jit(fn), args) for name, (fn, args) in calls.items()}
    vm = lambda f: jax.jit(canonical_convs(jax.vmap(lambda st, d, pool, t0: f(st, d, pool, t0, length),  # noqa: E731
                                                    in_axes=(0, 0, ctx_axis, None))), donate_argnums=(0,))
    copy = lambda s: jax.tree_util.tree_map(jnp.copy, s)  # noqa: E731
    t0 = jnp.int32(burn)
    calls["scan"] = (_Chain(vm(scan_one), copy(state), (data, contexts, t0)), ())
    calls["observe_scan"] = (_Chain(vm(observe_one), copy(state), (data, contexts, t0)), ())
    calls["scan_unroll2"] = (_Chain(vm(unrolled_one), copy(state), (data, contexts, t0)), ())
    return one.posterior.space.size, calls, {name: length for name in LOOPS}


def measure(env_name: str, config: str, args) -> list[dict]:
    draws = args.draw or [None]
    built = {d: build(env_name, config, args.rank, args.length, args.burn, d) for d in draws}
    table, costs, per = {}, {}, {}
    for d, (_, calls, rounds) in built.items():
        for name, (fn, a) in calls.items():
            if name in LOOPS:
                table[(d, name)], costs[(d, name)] = (fn, a), (np.nan, np.nan)
            else:  # timed as compiled here, so each is compiled once
                compiled = fn.lower(*a).compile()
                table[(d, name)], costs[(d, name)] = (compiled, a), cost(compiled)
            per[(d, name)] = rounds.get(name, 1)
    for fn, a in table.values():  # compile and warm every call first
        jax.block_until_ready(fn(*a))
    best = {k: [] for k in table}
    cpu = {k: [] for k in table}
    for _ in range(args.windows):
        for k, (fn, a) in table.items():
            ts, cs = [], []
            for _ in range(args.reps):
                tic, cic = time.perf_counter(), time.process_time()
                jax.block_until_ready(fn(*a))
                ts.append(time.perf_counter() - tic)
                cs.append(time.process_time() - cic)
            best[k].append(min(ts) / per[k])
            cpu[k].append(min(cs) / per[k])
    load = provenance.load_average()
    p = next(iter(built.values()))[0]
    rows = []
    for (d, name), ts in best.items():
        ts, cs = np.asarray(ts), np.asarray(cpu[(d, name)])
        ref = "observe_scan" if name.startswith("scan") else "update"
        ratio = np.median(cs / np.asarray(cpu[(d, ref)]))
        ratio_update = np.median(cs / np.asarray(cpu[(d, "update")]))
        flops, nbytes = costs[(d, name)]
        rows.append(dict(env=env_name, config=config, params=p, rank=args.rank, draw=d or "current", call=name,
                         ms=1e3 * np.median(ts), cpu_ms=1e3 * np.median(cs), cpu_ms_p10=1e3 * np.quantile(cs, 0.1),
                         ratio=ratio, ratio_to=ref, ratio_update=ratio_update,
                         mflop=flops / 1e6, mbytes=nbytes / 1e6, windows=args.windows, reps=args.reps,
                         length=args.length, load=load))
    return rows


def render(df: pd.DataFrame, doc: str) -> list[str]:
    lines = [*tables.preamble("A whole round against its update (HiLoFi-TS, one seed)", doc),
             "| env | config | P | draw | call | wall ms | CPU ms | CPU ms (p10) | / update | / observe_scan | MFLOP | "
             "MB (XLA) | load |", "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in df.itertuples():
        mf = "" if np.isnan(r.mflop) else f"{r.mflop:.2f}"
        mb = "" if np.isnan(r.mbytes) else f"{r.mbytes:.2f}"
        scan = f"{r.ratio:.2f}" if r.ratio_to == "observe_scan" else ""
        lines.append(f"| {r.env} | {r.config} | {r.params} | {r.draw} | {r.call} | {r.ms:.3f} | {r.cpu_ms:.3f} | "
                     f"{r.cpu_ms_p10:.3f} | {r.ratio_update:.2f} | {scan} | {mf} | {mb} | {r.load:.1f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="mnist,shuttle,movielens", help=f"comma list of {sorted(ENVS)}")
    p.add_argument("--configs", default="default", help=f"comma list of {list(CONFIGS)}")
    p.add_argument("--rank", type=int, default=50)
    p.add_argument("--windows", type=int, default=9)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--length", type=int, default=20, help="rounds per call of the two scans")
    p.add_argument("--burn", type=int, default=20, help="rounds the state has seen before the timed calls")
    p.add_argument("--draw", default=None, help="comma list of HiLoFi draws to compare in one run: conditional, joint")
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--tag", default="round")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    envs = options.names(args.envs, ENVS, "env")
    args.draw = options.names(args.draw, ("conditional", "joint"), "draw") if args.draw else None
    if min(args.windows, args.reps, args.length, args.burn, args.rank) < 1:
        p.error("--windows, --reps, --length, --burn and --rank must be >= 1")
    rows = []
    configs = options.names(args.configs, CONFIGS, "configs")
    notes = tables.hand_notes(os.path.join(args.out, f"{args.tag}.md"))  # kept across re-runs
    for e in envs:
        for c in configs:
            new = measure(e, c, args)
            rows += new
            print(pd.DataFrame(new)[["env", "config", "draw", "call", "ms", "cpu_ms", "ratio_update", "ratio",
                                     "mflop", "mbytes"]]
                  .to_string(index=False), flush=True)
            df = pd.DataFrame(rows)  # written after every (env, config): a stopped run keeps what it measured
            tables.save_table(df, render(df, __doc__) + ([""] + notes if notes else []), args.out, args.tag)
    return 0
