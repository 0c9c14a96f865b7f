"""Where does the learned observation variance go? (diagnostic for ``diag_obsnoise.md``'s ``learned`` column.)

Runs the ``_vb`` agents of ``common.seed003_agents`` (HiLoFi-TS, LRKF-TS, LoLoFi-TS, LoFi-TS learning the Gaussian
variance online from the start 0.1, ``banditkit.posteriors.adaptive_noise``) on each environment's functional
episode, seeds vmapped, in one compiled ``lax.scan`` of ``act`` / ``observe`` with its own Thompson keys
(``fold_in(PRNGKey(seed), t)``: the benchmark tables' agents and episodes, not their draws), and records the estimate
``r̂ = β/α`` after every round.  Writes ``TAG.csv`` (``r̂`` and the mean reward so far at a few rounds) and
``TAG.md``.

Usage::

    python benchmarks/diag_noise_estimate.py --envs Shuttle,Adult,Mushroom,MovieLens --steps 5000 --seeds 3
"""

from __future__ import annotations

import os
import sys
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from banditkit.environments.functional import observation, step  # noqa: E402
from banditkit.posteriors.noise import noise_variance  # noqa: E402
from benchmarks import common  # noqa: E402

ENVS = {"Shuttle": {}, "Adult": {}, "Mushroom": {}, "MovieLens": dict(rank=20, num_movies=20), "MNIST": {}}
AGENTS = ("hilofi_ts_vb", "lrkf_ts_vb", "lolofi_ts_vb", "lofi_ts_vb")


def trace(agent, env, seeds: list[int], steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(r̂ (seeds, steps), reward (seeds, steps))``: ``r̂`` after each round's ``observe``, seeds vmapped."""
    fbs = [env.unwrapped.functional(seed, steps) for seed in seeds]
    fb = jax.tree_util.tree_map(lambda *a: jnp.asarray(np.stack(a)), *fbs)
    keys = jnp.stack([jax.random.PRNGKey(seed) for seed in seeds])
    agent.init(keys[0], observation(fbs[0], 0))  # fixes the agent's shapes outside the trace

    def run(fb, key):
        state = agent.init(jax.random.fold_in(key, steps), observation(fb, 0))

        def body(state, t):
            x = observation(fb, t)
            a, state = agent.act(jax.random.fold_in(key, t), state, x)
            r, _, _ = step(fb, t, a)
            state = agent.observe(state, x, a, r)
            return state, (noise_variance(state.posterior), r)

        return jax.lax.scan(body, state, jnp.arange(steps))[1]

    r_hat, reward = jax.jit(jax.vmap(run))(fb, keys)
    return np.asarray(r_hat), np.asarray(reward)


def main(argv=None) -> None:
    p = common.parser(__doc__.splitlines()[0], steps=5000, seeds=1)
    p.add_argument("--envs", default=",".join(ENVS), help=f"comma list from {tuple(ENVS)}")
    p.add_argument("--tag", default="diag_noise_estimate")
    args = p.parse_args(argv)
    common.check_args(args)
    envs = [e.strip() for e in args.envs.split(",") if e.strip()]
    if bad := [e for e in envs if e not in ENVS]:
        raise SystemExit(f"unknown environment(s) {bad}; choose from {tuple(ENVS)}")
    names = [a.strip() for a in args.agents.split(",") if a.strip()] or list(AGENTS)
    factories = common.seed003_agents(eps_greedy=False)
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
             "round's update.  Own compiled loop over the environment's functional episode (own Thompson keys).", "",
             f"Command: `python benchmarks/diag_noise_estimate.py --envs {','.join(envs)} --steps {args.steps} "
             f"--seeds {args.seeds}`", "", f"Machine: {common.machine()}", "",
             "| environment | agent | " + " | ".join(f"r̂ after {m}" for m in marks) + " |",
             "|---|---|" + "---:|" * len(marks)]
    for (env_name, agent_name), row in piv.iterrows():
        lines.append(f"| {env_name} | {agent_name} | " + " | ".join(f"{row[m]:.3g}" for m in marks) + " |")
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.join(args.out, args.tag)}.md / .csv")


if __name__ == "__main__":
    main()
