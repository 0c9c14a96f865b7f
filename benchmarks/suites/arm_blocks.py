"""Per-arm covariance blocks against one dense block, paired (``arms=K`` vs ``arms=None``; issue 5, items 1–4).

On a multi-output bandit the head's covariance stays block-diagonal (``banditkit.posteriors.arms``), so make_agent
keeps ``K`` blocks for ``linear``, ``hilofi``, ``neural_linear`` and ``kalman_last_layer``: the same posterior, less
work. This script runs each agent both ways on the same envs, seeds and machine, alternating the two ``--reps``
times, and reports the run time per round (all seeds vmapped; compile time apart) and the final cumulative regret
(equal in distribution: the Thompson draws come from differently arranged normals). Agents: the benchmarks'
``linear`` (seed 002's NIG prior), ``hilofi_ts`` (seed 003's MNIST hyper-parameters, dense last layer since ``q_ℓ >
0``) and ``hilofi_ts_qlast0`` (square-root last layer); on request ``neural_linear_unlim`` / ``_unlim_mb`` (seed
002's NIG prior, ``sgd(0.01, 0.9)``, 4800-point buffer) and ``kll_ts`` (``kalman_last_layer`` with make_agent's
defaults: γ learned from 1, the prior variance 1 on the head). Writes ``TAG.csv`` and ``TAG.md``.

Usage::

    python -m benchmarks arm_blocks --envs shuttle,adult,mushroom,movielens,mnist --steps 1000 --seeds 10
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.agents import make_agent
from benchmarks import agents as A
from benchmarks.harness import options, tables

ENVS = {"shuttle": ("banditkit/Shuttle-v0", {}), "adult": ("banditkit/Adult-v0", {}),
        "mushroom": ("banditkit/Mushroom-v0", {}), "movielens": ("banditkit/MovieLens-v0", {}),
        "mnist": ("banditkit/MNIST-v0", {"replace": False})}
AGENTS = ("linear", "hilofi_ts", "hilofi_ts_qlast0", "neural_linear_unlim", "neural_linear_unlim_mb", "kll_ts")
DEFAULT_AGENTS = AGENTS[:3]


def run(args) -> pd.DataFrame:
    rows = []
    for env_name in args.envs:
        env_id, kw = ENVS[env_name]
        steps, seeds = (args.mnist_steps, args.mnist_seeds) if env_name == "mnist" else (args.steps, args.seeds)
        env = gym.make(env_id, max_steps=steps, **kw)
        table = A.arm_blocks_agents(int(env.unwrapped.num_actions))
        for agent_name in args.agents:
            base = table[agent_name]
            for rep in range(args.reps):
                for layout, extra in (("blocks", {}), ("dense", {"arms": None})):
                    agent = make_agent(base.spec, env, posterior_kwargs=dict(base.hyper, **extra))
                    df = bk.run(env, agent, steps, seeds, name=layout, progress=False)
                    t = df.attrs["timing"][layout]
                    last = df[df.step == df.step.max()]
                    rows.append(dict(env=env_name, agent=agent_name, layout=layout, rep=rep, steps=steps, seeds=seeds,
                                     ms_per_round=1e3 * t["run_s"] / steps, compile_s=t["compile_s"],
                                     regret=float(last.cumulative_regret.mean()),
                                     regret_se=float(last.cumulative_regret.sem())))
                    print(f"{env_name} {agent_name} {layout} rep {rep}: {rows[-1]['ms_per_round']:.2f} ms/round, "
                          f"regret {rows[-1]['regret']:.1f}", flush=True)
    return pd.DataFrame(rows)


def write(df: pd.DataFrame, out: str, tag: str) -> None:
    lines = [*tables.preamble("Per-arm covariance blocks vs one dense block (paired)", __doc__),
             "| env | agent | rounds × seeds | ms / round, dense (each rep) | ms / round, blocks (each rep) | speed-up "
             "(medians) | final regret, dense | final regret, blocks |", "|---|---|---|---|---|---:|---|---|"]
    for (env, agent), g in df.groupby(["env", "agent"], sort=False):
        d, b = g[g.layout == "dense"], g[g.layout == "blocks"]
        fmt = lambda s: " / ".join(f"{v:.2f}" for v in s.ms_per_round)  # noqa: E731
        reg = lambda s: f"{s.regret.iloc[0]:.1f} ± {s.regret_se.iloc[0]:.1f}"  # noqa: E731
        lines.append(f"| {env} | {agent} | {int(g.steps.iloc[0])} × {int(g.seeds.iloc[0])} | {fmt(d)} | {fmt(b)} | "
                     f"{np.median(d.ms_per_round) / np.median(b.ms_per_round):.1f}× | {reg(d)} | {reg(b)} |")
    tables.save_table(df, lines, out, tag)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="shuttle,adult,mushroom,movielens,mnist")
    p.add_argument("--agents", default=",".join(DEFAULT_AGENTS), help=f"comma list of {AGENTS}")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--mnist-steps", type=int, default=500)
    p.add_argument("--mnist-seeds", type=int, default=3)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--tag", default="arm_blocks")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    args.envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    args.agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    bad = [e for e in args.envs if e not in ENVS] + [a for a in args.agents if a not in AGENTS]
    if bad:
        p.error(f"unknown env / agent {bad}; envs: {sorted(ENVS)}, agents: {list(AGENTS)}")
    if min(args.steps, args.seeds, args.mnist_steps, args.mnist_seeds, args.reps) < 1:
        p.error("--steps, --seeds, --mnist-steps, --mnist-seeds and --reps must be >= 1")
    write(run(args), args.out, args.tag)
