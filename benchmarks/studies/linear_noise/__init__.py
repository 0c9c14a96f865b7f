"""Why per-arm noise variances cost the linear agent reward (issue 5, items 2–4): the learned σ² per arm.

The benchmark's ``linear`` agent (make_agent's: one ``(μ_k, Σ_k)`` per arm, one ``σ² ~ IG(a, b)`` shared by all arms)
and ``linear_per_arm`` (the paper's per-arm Lin-TS: ``σ_k² ~ IG(a_k, b_k)`` per arm), both with seed 002's prior
``IG(6, 6)`` and ``Σ_0 = 4 I``, play the seed-002 MNIST bandit (or a Showdown table) with Thompson sampling.  Per
seed and arm this reports the pulls, the reward rate when pulled, the posterior mean ``E[σ²] = b / (a − 1)`` at the
end and the share of it that is still the prior's ``b_0`` (``b_0 / (a − 1) / E[σ²]``).  Each seed's loop is its own
``lax.scan`` (keys ``PRNGKey(seed)``), all seeds vmapped (``run.play_thompson``), not the runner's, so the rewards
match the tables' in distribution only.
Writes ``TAG.csv`` and ``TAG.md``.

Usage::

    python -m benchmarks study linear_noise --env mnist --steps 5000 --seeds 3
"""

from __future__ import annotations

import argparse
import os

import gymnasium as gym
import jax
import numpy as np
import pandas as pd

from benchmarks import agents as A
from benchmarks.harness import options, tables
from benchmarks.harness.run import play_thompson

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs

ENVS = {"mnist": "banditkit/MNIST-v0", "shuttle": "banditkit/Shuttle-v0", "adult": "banditkit/Adult-v0",
        "mushroom": "banditkit/Mushroom-v0"}
AGENTS = ("linear", "linear_per_arm")
B0 = 6.0


def run(args) -> pd.DataFrame:
    env = gym.make(ENVS[args.env], max_steps=args.steps, **({"replace": False} if args.env == "mnist" else {}))
    u = env.unwrapped
    k = int(u.num_actions)
    agents = A.seed002_agents(num_actions=k, warmup_per_arm=20)
    rows = []
    seeds = list(range(args.seeds))
    fbs = [u.functional(seed, args.steps) for seed in seeds]
    for name in AGENTS:
        states, all_acts, all_rs, _ = play_thompson(agents[name](env), fbs, args.steps, seeds)
        for i, seed in enumerate(seeds):
            post = jax.tree_util.tree_map(lambda v, i=i: v[i], states.posterior)
            acts, rs = all_acts[i], all_rs[i]
            a, b = np.broadcast_to(np.asarray(post.a), (k,)), np.broadcast_to(np.asarray(post.b), (k,))
            for arm in range(k):
                pulled = acts == arm
                es2 = b[arm] / (a[arm] - 1.0)
                rows.append(dict(agent=name, seed=seed, arm=arm, pulls=int(pulled.sum()),
                                 reward_when_pulled=float(rs[pulled].mean()) if pulled.any() else np.nan,
                                 e_sigma2=float(es2), prior_share=float(B0 / (a[arm] - 1.0) / es2),
                                 total_reward=float(rs.sum())))
            print(f"seed {seed} {name}: reward {rs.sum():.0f}, E[sigma^2] {np.round(b / (a - 1), 4)}", flush=True)
    return pd.DataFrame(rows)


def write(df: pd.DataFrame, args, out: str) -> None:
    g = df.groupby(["agent", "seed"])
    per_seed = g.agg(total_reward=("total_reward", "first"), e_sigma2_min=("e_sigma2", "min"),
                     e_sigma2_max=("e_sigma2", "max"), prior_share_max=("prior_share", "max"),
                     hit_min=("reward_when_pulled", "min"), hit_max=("reward_when_pulled", "max"),
                     pulls_min=("pulls", "min"), pulls_max=("pulls", "max")).reset_index()
    lines = [*tables.preamble(f"The linear agent's noise variance, shared vs per arm ({args.env})", __doc__),
             "| agent | seed | total reward | E[σ²] (min–max over arms) | prior's share of E[σ²] (max) | "
             "reward rate when pulled (min–max over arms) | pulls (min–max over arms) |",
             "|---|---:|---:|---|---:|---|---|"]
    for r in per_seed.itertuples():
        lines.append(f"| {r.agent} | {r.seed} | {r.total_reward:.0f} | {r.e_sigma2_min:.4f}–{r.e_sigma2_max:.4f} | "
                     f"{r.prior_share_max:.2f} | {r.hit_min:.2f}–{r.hit_max:.2f} | {r.pulls_min}–{r.pulls_max} |")
    tables.save_table(df, lines, out, args.tag)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="mnist", choices=sorted(ENVS))
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=HERE)
    p.add_argument("--tag", default=None, help="output name (default diag_linear_noise_ENV)")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    if args.steps < 1 or args.seeds < 1:
        p.error("--steps and --seeds must be >= 1")
    args.tag = args.tag or f"diag_linear_noise_{args.env}"
    write(run(args), args, args.out)
