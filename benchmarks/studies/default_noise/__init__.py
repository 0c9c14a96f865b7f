"""The agents' observation variance from the environment's own rewards (issue 55): the rule against fixed values.

``make_agent`` set a Gaussian agent's observation variance by ``oracle_units.default_obs_noise`` (before issue 69):
``R = min(ν + κ v, 0.1)`` in observed units (``ν`` the reward's own noise variance, ``v`` the per-arm variance of the
expected reward, ``κ = 0.1``), where every agent used ``R = 0.1`` before.  This study plays each agent with
``make_agent(spec, env, obs_noise=R)`` for ``R`` in ``--variants``: ``0.1`` (the earlier default), ``rule`` (the
rule's value), ``uncapped`` (``ν + κ v`` without the cap) and any fixed number, on the same seeds, and tabulates
the cumulative reward (mean ± s.e. over seeds) with the paired difference of each variant from ``0.1``.
Everything else is make_agent's default.  Writes ``TAG.csv`` and ``TAG.md`` in this study's ``results/``.

Usage::

    python -m benchmarks study default_noise --envs Shuttle,Adult,MovieLens,Mushroom,Wheel --steps 5000 --seeds 3
    python -m benchmarks study default_noise --envs FashionMNIST --steps 2000 --seeds 2 --tag default_noise_fmnist
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium as gym
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.agents import make_agent
from benchmarks.harness import options, provenance
from benchmarks.harness import oracle_units as scales

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
SPECS = ("hilofi-thompson", "lofi-thompson", "lrkf-thompson")
VARIANTS = ("0.1", "rule", "uncapped", "0.001")


def variance(env, variant: str) -> float:
    """The observation variance a variant names (see the module docstring)."""
    if variant == "rule":
        return scales.default_obs_noise(env)
    if variant == "uncapped":
        u = env.unwrapped
        ep = scales._episode(u, scales.ROUNDS)
        s = scales.reward_scale(u)
        signal = float(np.mean(np.var(ep[1], axis=0)))
        return (scales.reward_noise(u) + scales.UNEXPLAINED_SHARE * signal) / s**2
    return float(variant)


def run(args) -> pd.DataFrame:
    rows = []
    for name in args.envs.split(","):
        env = gym.make(f"banditkit/{name}-v0", max_steps=args.steps)
        for spec in args.specs.split(","):
            done: dict[float, pd.Series] = {}
            for variant in args.variants.split(","):
                r = variance(env, variant)
                tic = time.perf_counter()
                if r not in done:  # a variant naming the same variance as an earlier one reuses its run
                    df = bk.run(env, make_agent(spec, env, obs_noise=r), args.steps, args.seeds, progress=False)
                    done[r] = df.groupby("seed")["reward"].sum()
                total = done[r]
                for seed, value in total.items():
                    rows.append(dict(env=name, agent=spec, variant=variant, obs_noise=r, seed=int(seed),
                                     steps=args.steps, cumulative_reward=float(value)))
                print(f"{name} {spec} {variant} (R={r:.3g}): {total.mean():.1f} ± "
                      f"{total.std(ddof=1) / np.sqrt(len(total)):.1f}  {time.perf_counter() - tic:.0f}s", flush=True)
    return pd.DataFrame(rows)


def _cell(v: pd.Series) -> str:
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
    return f"{v.mean():.1f} ± {se:.1f}"


def render(df: pd.DataFrame, command: str) -> str:
    variants = list(dict.fromkeys(df["variant"]))
    head = ["environment", "agent", "seeds × rounds", *[f"R = {v}" for v in variants],
            *[f"{v} − 0.1, paired" for v in variants if v != "0.1"]]
    lines = ["# The observation variance from the environment's rewards (rule) against fixed values", "",
             "Cumulative reward, mean ± s.e. over seeds (same seeds for every variant); the R column headers name "
             "the variant, the value used is under each environment.  `rule` = `make_agent`'s default since this "
             "study (`benchmarks.harness.oracle_units.default_obs_noise`), `0.1` = the default before it.", "",
             f"**Command:** `{command}`", "", f"**Machine:** {provenance.machine()}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (env, agent), g in df.groupby(["env", "agent"], sort=False):
        base = g[g["variant"] == "0.1"].set_index("seed")["cumulative_reward"]
        cells = [env, agent, f"{g['seed'].nunique()} × {int(g['steps'].iloc[0])}"]
        for v in variants:
            cells.append(_cell(g[g["variant"] == v]["cumulative_reward"]))
        for v in variants:
            if v == "0.1":
                continue
            other = g[g["variant"] == v].set_index("seed")["cumulative_reward"]
            cells.append(_cell((other - base).dropna()) if len(base) else "–")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Observation variance of each variant (observed units, r / reward_scale):", ""]
    for env, g in df.groupby("env", sort=False):
        vals = ", ".join(f"{v} = {g[g['variant'] == v]['obs_noise'].iloc[0]:.3g}" for v in variants)
        lines.append(f"- {env}: {vals}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks study default_noise", description=__doc__.splitlines()[0])
    p.add_argument("--envs", default="Shuttle,Adult,MovieLens,Mushroom,Wheel")
    p.add_argument("--specs", default=",".join(SPECS))
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--tag", default="default_noise")
    p.add_argument("--out", default=HERE)
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    df = run(args)
    os.makedirs(args.out, exist_ok=True)
    df.to_csv(os.path.join(args.out, f"{args.tag}.csv"), index=False)
    command = "python -m benchmarks study default_noise " + " ".join(argv if argv is not None else [])
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as f:
        f.write(render(df, command.strip()))
    print(f"wrote {args.out}/{args.tag}.md")


if __name__ == "__main__":
    main()
