"""Where does the learned observation variance go? (diagnostic for ``diag_obsnoise.md``'s ``learned`` column.)

Runs the ``_vb`` agents of ``agents.seed003_agents`` (HiLoFi-TS, LRKF-TS, LoLoFi-TS, LoFi-TS learning the Gaussian
variance online from the start 0.1, ``banditkit.posteriors.adaptive_noise``) with the runner the benchmark tables use
(``bk.run``, seeds vmapped, the same keys and episodes), recording the estimate ``r̂ = β/α`` after every round
(``record=``).  Writes ``TAG.csv`` (``r̂`` and the mean reward so far at a few rounds) and ``TAG.md``, which checks
each seed's mean reward against the same agent's row in the table that ran it (``REFERENCE``), when there is one
for these rounds.

Usage::

    python -m benchmarks study noise_estimate --envs Shuttle,Adult,Mushroom,MovieLens --steps 5000 --seeds 3
"""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import pandas as pd

import banditkit as bk
from benchmarks import agents as A
from benchmarks.harness import options, provenance
from benchmarks.studies.obsnoise import FOLDERS, find

#: each environment as the table in ``REFERENCE`` made it (the movielens suite's; ``mnist --protocol seed003``
#: draws its images with replacement)
ENVS = {"Shuttle": {}, "Adult": {}, "Mushroom": {}, "MovieLens": dict(rank=20, num_movies=20),
        "MNIST": dict(replace=True)}
AGENTS = ("hilofi_ts_vb", "lrkf_ts_vb", "lolofi_ts_vb", "lofi_ts_vb")
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
#: the seeds CSV of the table whose ``learned`` column ran these agents (``diag_obsnoise.md``), by environment
REFERENCE = {"Shuttle": "diag_obsnoise_showdown_shuttle_seeds.csv", "Adult": "diag_obsnoise_showdown_adult_seeds.csv",
             "Mushroom": "diag_obsnoise_showdown_mushroom_seeds.csv", "MovieLens": "diag_obsnoise_movielens_seeds.csv",
             "MNIST": "diag_lowrank_mnist_seeds.csv"}


def trace(agent, env, seeds: list[int], steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(r̂ (seeds, steps), reward (seeds, steps))``: ``r̂`` after each round's ``observe``; the tables' runner and
    chunking (``harness.run.run_agents``)."""
    df = bk.run(env, agent, steps, seeds, progress=False, compiled=True, chunk_size=max(25, steps // 40),
                record={"r_hat": lambda s: bk.posteriors.noise_variance(s.posterior)})
    wide = lambda col: df.pivot(index="seed", columns="step", values=col).loc[seeds].to_numpy()
    return wide("r_hat"), wide("reward")


def reference_check(rows: pd.DataFrame, steps: int) -> list[str]:
    """Lines saying, per (environment, agent), for how many seeds the mean reward over ``steps`` rounds equals the
    row of the table in ``REFERENCE`` (same agent, seed and rounds)."""
    lines = []
    here = rows[rows["round"] == steps]
    for (env, agent), g in here.groupby(["env", "agent"], sort=False):
        path = find(list(FOLDERS), REFERENCE[env])  # the obsnoise study's runs, lowrank_mnist's
        ref = pd.read_csv(path) if path else pd.DataFrame(columns=["agent", "seed", "steps"])
        ref = ref[(ref.agent == agent) & (ref.steps == steps)].set_index("seed")["mean_reward"]
        both = [s for s in g.seed if s in ref.index]
        if not both:
            lines.append(f"- {env} {agent}: no row of {REFERENCE[env]} ran {steps} rounds")
            continue
        diff = {s: float(g.set_index("seed").loc[s, "mean_reward_so_far"]) - float(ref[s]) for s in both}
        same = sum(abs(d) < 1e-9 for d in diff.values())
        worst = max(diff.values(), key=abs)
        lines.append(f"- {env} {agent}: mean reward equal to {REFERENCE[env]} on {same} of {len(both)} seeds"
                     + ("" if same == len(both) else f" (largest difference {worst:+.4f})"))
    return lines


def main(argv=None) -> None:
    p = options.parser(__doc__.splitlines()[0], steps=5000, seeds=1)
    p.set_defaults(out=HERE)
    p.add_argument("--envs", default=",".join(ENVS), help=f"comma list from {tuple(ENVS)}")
    p.add_argument("--tag", default="diag_noise_estimate")
    args = p.parse_args(argv)
    options.check_args(args)
    envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    if bad := [e for e in envs if e not in ENVS]:
        raise SystemExit(f"unknown environment(s) {bad}; choose from {tuple(ENVS)}")
    names = [a.strip() for a in args.agents.split(",") if a.strip()] or list(AGENTS)
    factories = A.seed003_agents(eps_greedy=False)
    if bad := [a for a in names if a not in factories]:
        raise SystemExit(f"unknown agent(s) {bad}")
    marks = sorted({m for m in (100, 500, 1000, 2500, args.steps) if m <= args.steps})
    rows = []
    for name in envs:
        env = gym.make(f"banditkit/{name}-v0", max_steps=args.steps, **ENVS[name])
        for agent_name in names:
            seeds = list(range(args.first_seed, args.first_seed + args.seeds))
            tic = time.perf_counter()
            r_hat, reward = trace(factories[agent_name](env), env, seeds, args.steps)
            print(f"[{name} {agent_name}] r̂ at {marks} (mean over seeds): "
                  f"{[float(f'{r_hat[:, m - 1].mean():.3g}') for m in marks]}  ({time.perf_counter() - tic:.0f} s)",
                  flush=True)
            for i, seed in enumerate(seeds):
                for m in marks:
                    rows.append(dict(env=name, agent=agent_name, seed=seed, round=m, r_hat=float(r_hat[i, m - 1]),
                                     mean_reward_so_far=float(reward[i, :m].mean()),
                                     finite=bool(np.isfinite(r_hat[i, :m]).all())))
    df = pd.DataFrame(rows)
    os.makedirs(args.out, exist_ok=True)
    df.to_csv(os.path.join(args.out, f"{args.tag}.csv"), index=False)
    piv = df.groupby(["env", "agent", "round"], sort=False)["r_hat"].mean().unstack("round")
    lines = [f"# Learned observation variance r̂ over the rounds ({args.seeds} seed(s), mean over seeds)", "",
             "The `_vb` agents (`make_agent(..., adaptive_noise=True)`: `banditkit.posteriors.adaptive_noise`'s "
             "defaults, start 0.1 on rewards divided by the environment's reward scale); `r̂ = β/α` after the "
             "round's update, recorded by the benchmark tables' runner (`bk.run(..., record=...)`).", "",
             f"Command: `{provenance.PROG} study noise_estimate --envs {','.join(envs)} --steps {args.steps} "
             f"--seeds {args.seeds}`", "", f"Machine: {provenance.machine()}", "",
             "| environment | agent | " + " | ".join(f"r̂ after {m}" for m in marks) + " |",
             "|---|---|" + "---:|" * len(marks)]
    for (env_name, agent_name), row in piv.iterrows():
        lines.append(f"| {env_name} | {agent_name} | " + " | ".join(f"{row[m]:.3g}" for m in marks) + " |")
    lines += ["", f"The same runs' rewards against the tables' (per seed, mean over the {args.steps} rounds):", "",
              *reference_check(df, args.steps)]
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.join(args.out, args.tag)}.md / .csv")
