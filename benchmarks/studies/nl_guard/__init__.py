"""What neural-linear's divergence guard does on the benchmark streams (issue 5, items 3–4).

Every ``train_every`` updates neural-linear retrains its body by plain SGD on a FIFO buffer (seed 002's reference
setting: ``sgd(lr, momentum 0.9)``).  On Shuttle an outlier context (|x| ≈ 60) can make that retraining run away:
to NaN, or to finite weights of order 1e15 whose features overflow the last-layer regression a few updates later.
``neural_linear`` discards a retraining whose weights are non-finite or whose buffer loss ends more than
``divergence_ratio`` times where it started (default 2).  This script plays the benchmark agents (seed 002's
``neural_linear_lim`` / ``_unlim_mb`` / ``_unlim`` with the showdown's or MovieLens's hyper-parameters, per-arm
blocks as make_agent now builds them) with each ``--ratios`` value of ``divergence_ratio`` (``inf``: only non-finite
retrainings discarded, the rule before 2026-11-26), and reports per agent the retrainings discarded per seed, the
seeds whose state ended non-finite, and the cumulative reward.  Each seed's loop is one ``lax.scan`` (keys
``PRNGKey(seed)``), all seeds vmapped (``run.play_thompson``), not the runner's, so rewards match the tables' in
distribution only.
Writes ``TAG.csv`` and ``TAG.md``.

Usage::

    python -m benchmarks study nl_guard --envs shuttle,adult,mushroom,movielens --steps 5000 --seeds 10
"""

from __future__ import annotations

import argparse
import os

import gymnasium as gym
import jax
import numpy as np
import pandas as pd

from banditkit.agents import make_agent
from banditkit.experiments.health import state_is_finite
from banditkit.posteriors.neural_linear import DIVERGENCE_RATIO
from benchmarks import agents as A
from benchmarks.harness import options, tables
from benchmarks.harness.run import play_thompson

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs

ENVS = {"shuttle": "banditkit/Shuttle-v0", "adult": "banditkit/Adult-v0", "mushroom": "banditkit/Mushroom-v0",
        "movielens": "banditkit/MovieLens-v0"}
AGENTS = ("neural_linear_lim", "neural_linear_unlim_mb", "neural_linear_unlim")


def rule_name(ratio: float) -> str:
    if ratio == float("inf"):
        return "non-finite only"
    return f"ratio {ratio:g}" + (" (default)" if ratio == DIVERGENCE_RATIO else "")


def agents_for(env_name: str, env) -> dict:
    """The suites' agents for this env: the movielens suite's on MovieLens, the showdown suite's on the tables."""
    return (A.movielens_agents if env_name == "movielens" else A.showdown_agents)(env)


def run(args) -> pd.DataFrame:
    rows = []
    seeds = list(range(args.seeds))
    for env_name in args.envs:
        env = gym.make(ENVS[env_name], max_steps=args.steps)
        u = env.unwrapped
        fbs = [u.functional(s, args.steps) for s in seeds]
        table = agents_for(env_name, env)
        for name in args.agents:
            base = table[name]
            for ratio in args.ratios:
                rule = rule_name(ratio)
                agent = make_agent(base.spec, env, posterior_kwargs=dict(base.hyper, divergence_ratio=ratio))
                states, _, rewards, secs = play_thompson(agent, fbs, args.steps, seeds)
                total = rewards.sum(axis=1)
                finite = np.asarray(jax.vmap(state_is_finite)(states))
                rejected = np.asarray(states.posterior.rejected)
                for i, s in enumerate(seeds):
                    rows.append(dict(env=env_name, agent=name, rule=rule, seed=s, steps=args.steps,
                                     retrainings=args.steps // int(base.hyper["train_every"]),
                                     rejected=int(rejected[i]), finite=bool(finite[i]), reward=float(total[i]),
                                     run_s=secs))
                print(f"{env_name} {name} [{rule}]: rejected {rejected.tolist()}, non-finite seeds "
                      f"{[s for s, f in zip(seeds, finite, strict=True) if not f]}, reward {total.mean():.1f}, "
                      f"{secs:.1f} s", flush=True)
    return pd.DataFrame(rows)


def write(df: pd.DataFrame, out: str, tag: str) -> None:
    lines = [*tables.preamble("Neural-linear's divergence guard on the benchmark streams", __doc__),
             "| env | agent | rule | seeds | retrainings discarded per seed (mean / max of N) | seeds non-finite | "
             "cum. reward (finite seeds) | cum. reward (all seeds) |", "|---|---|---|---|---|---|---|---|"]
    for (env, agent, rule), g in df.groupby(["env", "agent", "rule"], sort=False):
        ok = g[g.finite]
        fin = f"{ok.reward.mean():.1f} ± {tables.se(ok.reward):.1f}" if len(ok) else "–"
        bad = ", ".join(str(s) for s in g.seed[~g.finite]) or "none"
        every = f"{g.reward.mean():.1f} ± {tables.se(g.reward):.1f}"
        lines.append(f"| {env} | {agent} | {rule} | {len(g)} | {g.rejected.mean():.2f} / {g.rejected.max()} of "
                     f"{int(g.retrainings.iloc[0])} | {bad} | {fin} | {every} |")
    lines += ["", "A non-finite seed's reward after the overflow comes from argmax(NaN) = arm 0: not a result."]
    tables.save_table(df, lines, out, tag)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="shuttle,adult,mushroom,movielens")
    p.add_argument("--agents", default=",".join(AGENTS[:2]), help=f"comma list of {AGENTS}")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--out", default=HERE)
    p.add_argument("--ratios", default="2,inf", help="divergence_ratio values to compare (inf: non-finite only)")
    p.add_argument("--tag", default="diag_nl_guard")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    args.envs = [e for e in args.envs.split(",") if e]
    args.agents = [a for a in args.agents.split(",") if a]
    try:
        args.ratios = [float(r) for r in args.ratios.split(",") if r]
    except ValueError:
        p.error(f"--ratios must be comma-separated numbers > 1 or inf, got {args.ratios!r}")
    for e in args.envs:
        if e not in ENVS:
            p.error(f"unknown env {e!r}; choose from {sorted(ENVS)}")
    for a in args.agents:
        if a not in AGENTS:
            p.error(f"unknown agent {a!r}; choose from {AGENTS}")
    if args.seeds < 1 or args.steps < 1:
        p.error("--steps and --seeds must be >= 1")
    write(run(args), args.out, args.tag)
