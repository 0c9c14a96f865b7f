"""Did make_agent's ``q = 0`` hold HiLoFi, LoLoFi and LRKF back on the bandits? (issue 5, items 1, 3, 4; diagnostic.)

Until 2026-11-28 make_agent built ``hilofi``, ``lolofi`` and ``lrkf`` with no dynamics noise (``DEFAULT_HYPER``: rank
10, ``q = 0``); this sweep is why ``lolofi`` and ``lrkf`` now default to ``q = 1e-4`` (HiLoFi stays at 0).  With
``q = 0`` a low-rank factor's row space never grows: every update's gain and every mean step lie in the span of the
initial (random, orthonormal) rows, so the network's weights move only inside a fixed random rank-``d`` subspace (for
HiLoFi the hidden layers; its dense last layer learns freely).  ``q > 0`` puts ``q·Hᵀ`` (the reward's gradient) into
every gain, so the mean follows the gradient and the factor takes in new directions.  This script plays make_agent's
agents (Thompson sampling, every other hyper-parameter at make_agent's defaults) with each ``--variants`` setting of
``dynamics_cov`` = ``q`` and ``dynamics_mode`` (``carry``: the paper's Algorithm 1, q stays in the carried
covariance; ``gain``: the authors' code, q enters each round's predictive, draw and gain only) on the benchmark
streams, paired by seed (the compiled runner, the same streams as the benchmark tables), and reports per filter and
environment the mean reward per round (mean ± s.e. over seeds), the best setting in bold, and each setting's gain
over ``q = 0`` paired by seed.
Writes ``TAG.csv`` (one row per environment × filter × setting × seed; each process appends, skipping rows already
there with the same ``--steps``) and ``TAG.md``; ``--render`` rewrites ``TAG.md`` from the CSV.

Usage (one process per core, then render)::

    taskset -c 0 python -m benchmarks study dynamics --envs shuttle,adult --steps 5000 --seeds 5
    taskset -c 1 python -m benchmarks study dynamics --envs mushroom,movielens --steps 5000 --seeds 5
    python -m benchmarks study dynamics --render
"""

from __future__ import annotations

import argparse
import os
import sys

import gymnasium as gym
import numpy as np
import pandas as pd

from banditkit.agents import make_agent
from benchmarks.harness import options, provenance, tables
from benchmarks.harness.run import run_agents

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs

ENVS = {"shuttle": "banditkit/Shuttle-v0", "adult": "banditkit/Adult-v0", "mushroom": "banditkit/Mushroom-v0",
        "movielens": "banditkit/MovieLens-v0", "mnist": "banditkit/MNIST-v0"}
FILTERS = ("hilofi", "lolofi", "lrkf")
# name -> posterior_kwargs on top of make_agent's defaults ("q0": no dynamics noise, make_agent's agent until
# 2026-11-28 and still HiLoFi's default)
# ``qh…``: q on the hidden block only (``dynamics_cov_hidden``; HiLoFi's dense last layer, or LoLoFi's factor, at 0)
MODES = (("", "carry"), ("_gain", "gain"))
VARIANTS: dict[str, dict] = {
    "q0": dict(dynamics_cov=0.0),
    **{f"q{q}{suffix}": dict(dynamics_cov=float(q), dynamics_mode=mode) for q in ("1e-6", "1e-4", "1e-2")
       for suffix, mode in MODES},
    **{f"qh{q}{suffix}": dict(dynamics_cov_hidden=float(q), dynamics_mode=mode) for q in ("1e-4", "1e-2")
       for suffix, mode in MODES},
}
DEFAULT_VARIANTS = [v for v in VARIANTS if not v.startswith("qh")]
KEY_COLS = ["env", "filter", "variant", "seed", "steps"]


def applies(filt: str, variant: str) -> bool:
    """``qh…`` settings need a hidden block apart from the last layer (HiLoFi, LoLoFi), not LRKF's one factor."""
    return not (variant.startswith("qh") and filt == "lrkf")


def agent_factory(filt: str, variant: str):
    return lambda env: make_agent(f"{filt}-thompson", env, posterior_kwargs=dict(VARIANTS[variant]))


def run(args, csv: str) -> pd.DataFrame:
    rows = pd.read_csv(csv) if os.path.exists(csv) else pd.DataFrame(columns=KEY_COLS)
    done = set(rows[KEY_COLS].itertuples(index=False, name=None))
    seeds = list(range(args.seeds))
    for env_name in args.envs:
        extra = dict(replace=True) if env_name == "mnist" else {}
        env = gym.make(ENVS[env_name], max_steps=args.steps, **extra)
        for filt in args.filters:
            for variant in args.variants:
                todo = [s for s in seeds if (env_name, filt, variant, s, args.steps) not in done]
                if not applies(filt, variant):
                    continue
                if not todo:
                    continue
                name = f"{filt}_{variant}"
                res = run_agents(env, {name: agent_factory(filt, variant)}, args.steps, todo, chunk=args.chunk)
                if name in res.failures:
                    print(f"{env_name} {name} FAILED: {res.failures[name]}", file=sys.stderr, flush=True)
                    continue
                ps = tables.per_seed(res)
                new = pd.DataFrame(dict(
                    env=env_name, filter=filt, variant=variant, seed=ps["seed"].astype(int), steps=args.steps,
                    q=VARIANTS[variant].get("dynamics_cov", 0.0), q_hidden=VARIANTS[variant].get(
                        "dynamics_cov_hidden", VARIANTS[variant].get("dynamics_cov", 0.0)),
                    mode=VARIANTS[variant].get("dynamics_mode", "carry"),
                    mean_reward=ps["mean_reward"], late_reward=ps["late_reward"], final_regret=ps["final_regret"],
                    nonfinite=ps["nonfinite_by"].notna(), compile_s=ps["compile_s"], run_s=ps["run_s"],
                    ms_per_step=1e3 * ps["per_step_s"], **provenance.row_provenance()))
                rows = tables.append_rows(csv, new)
    return rows


def fmt(m: float, e: float) -> str:
    return f"{m:.3f} ± {e:.3f}" if np.isfinite(e) else f"{m:.3f}"


def render(rows: pd.DataFrame, out: str, tag: str) -> None:
    variants = [v for v in VARIANTS if v in set(rows.variant)]
    lines = ["# Did make_agent's q = 0 hold HiLoFi, LoLoFi and LRKF back on the bandits?", "",
             __doc__.split("\n\n")[1].replace("\n", " "), "", *provenance.csv_provenance(rows, "seed rows")]
    lines += ["", "Mean reward per round, mean ± standard error over seeds (best of the row in bold); the gains over "
              "`q0` (no dynamics noise: make_agent's agent until 2026-11-28) are paired by seed.  `ms` = ms per "
              "round, all seeds vmapped.  A value marked † had a seed whose agent state went non-finite (not a "
              "valid result).", ""]
    head = "| env | filter | rounds × seeds | " + " | ".join(f"`{v}`" for v in variants) + " | best − q0 (paired) | " \
        "ms (q0 / best) |"
    lines += [head, "|" + "---|" * (len(variants) + 5)]
    gains = []
    rows = rows.assign(_e=rows.env.map(list(ENVS).index), _f=rows["filter"].map(list(FILTERS).index))
    for (env, filt), g in rows.sort_values(["_e", "_f"], kind="stable").groupby(["env", "filter"], sort=False):
        piv = g.pivot_table(index="seed", columns="variant", values="mean_reward")
        ms = g.groupby("variant")["ms_per_step"].mean()
        bad = g.groupby("variant")["nonfinite"].any()
        means = {v: piv[v].mean() for v in variants if v in piv}
        valid = {v: m for v, m in means.items() if not bad.get(v, False)}
        best = max(valid, key=valid.get) if valid else None
        cells = []
        for v in variants:
            if v not in piv:
                cells.append("")
                continue
            c = fmt(piv[v].mean(), tables.se(piv[v].dropna())) + (" †" if bad.get(v, False) else "")
            cells.append(f"**{c}**" if v == best else c)
        order = sorted(valid, key=valid.get, reverse=True)
        if best is not None and "q0" in piv:
            d = (piv[best] - piv["q0"]).dropna()
            diff = f"{best}: {d.mean():+.3f} ± {tables.se(d):.3f} ({len(d)} seeds)"
            for v in order:
                dv = (piv[v] - piv["q0"]).dropna()
                gains.append(dict(env=env, filter=filt, variant=v, rank=order.index(v) + 1,
                                  wins=int((dv > 0).sum()), seeds=len(dv)))
        else:
            diff = ""
        n = f"{int(g.steps.iloc[0])} × {piv.shape[0]}"
        lines.append(f"| {env} | {filt} | {n} | " + " | ".join(cells) + f" | {diff} | "
                     f"{ms.get('q0', np.nan):.2f} / {ms.get(best, np.nan):.2f} |")
    if gains:
        gd = pd.DataFrame(gains)
        lines += ["", "**Per setting, over the environments run:** its rank among the settings run in each "
                  "environment (1 = the best mean reward; averaged over the environments, so the rewards' scales do "
                  "not mix) and the seeds where it beat `q0`, paired.", "",
                  "| filter | " + " | ".join(f"`{v}`" for v in variants) + " |", "|---|" + "---|" * len(variants)]
        for filt, g in gd.groupby("filter", sort=False):  # FILTERS order: the rows above are sorted
            rk = g.pivot_table(index="env", columns="variant", values="rank").mean()
            cells = []
            for v in variants:
                h = g[(g.variant == v) & (g.variant != "q0")]
                wins = f", {h.wins.sum()}/{h.seeds.sum()} seeds > q0" if len(h) else ""
                cells.append(f"{rk[v]:.1f}{wins}" if v in rk else "")
            lines.append(f"| {filt} | " + " | ".join(cells) + " |")
    lines += [""] + tables.hand_notes(os.path.join(out, f"{tag}.md"))
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines).rstrip() + "\n")



def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", default="shuttle,adult,mushroom,movielens",
                   help=f"comma list from {', '.join(ENVS)} (mnist: LeNet5, images drawn with replacement)")
    p.add_argument("--filters", default=",".join(FILTERS), help=f"comma list from {', '.join(FILTERS)}")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help=f"comma list from {', '.join(VARIANTS)} (default: all but the qh ones)")
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--chunk", type=int, default=None, help="rounds per compiled chunk (default steps // 40)")
    options.add_csv_study_options(p, "diag_dynamics", out=HERE)
    args = p.parse_args(argv)
    csv = options.start_csv_study(args, render)
    if csv is None:
        return
    args.envs = options.names(args.envs, ENVS, "envs")
    args.filters = options.names(args.filters, FILTERS, "filters")
    args.variants = options.names(args.variants, VARIANTS, "variants")
    if args.steps < 1 or args.seeds < 1:
        raise SystemExit(f"--steps and --seeds must be positive, got {args.steps} and {args.seeds}")
    os.makedirs(args.out, exist_ok=True)
    rows = run(args, csv)
    render(rows, args.out, args.tag)
    print(f"wrote {csv} and {args.tag}.md")
