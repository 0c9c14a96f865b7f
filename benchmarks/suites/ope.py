"""Off-policy evaluation accuracy: banditkit's estimators against the simulator's true value of each target policy.

For each environment (Shuttle, Adult, Mushroom: the committed UCI tables; MovieLens-100k: fetched) and each
repetition r: the traffic is ``functional(seed=r, rounds)``; a log of it is drawn from a uniform and from an
ε-greedy logging policy (ε = 0.2 around a linear-greedy agent fitted on separate traffic), each with exact
propensities; three target policies — HiLoFi greedy and linear-TS (both fitted on a third, separate uniform log)
and a fixed rule (always the arm with the best mean reward on that log) — are evaluated on it by DM, IPS, SNIPS, DR,
SNDR and Switch-DR (reward model: linear, cross-fitted over 2 folds of the log; 95% normal intervals).  The truth is
``(1/T) Σ_t Σ_k π(k | x_t) E[r | x_t, k]`` on the same contexts, from the simulator's expected rewards (linear-TS's
probabilities are its 256-draw Monte-Carlo estimate, the same in the truth and the estimators).  Reported per cell
(env × logging × target × estimator), over the repetitions: mean relative error ``|V̂ − V| / |V|`` (± s.e.; the
absolute error where ``V = 0``, e.g. never eating a mushroom) and
interval coverage (the share of repetitions whose interval holds ``V``).
"""

from __future__ import annotations

import argparse
import os
import time

import gymnasium
import jax
import numpy as np
import pandas as pd

import banditkit as bk  # noqa: F401  (registers the environments)
from banditkit import offline as off
from banditkit.offline import simulate as sim
from banditkit.offline.report import relative_error
from benchmarks.harness import options, provenance, tables

ENVS = {"shuttle": "banditkit/Shuttle-v0", "adult": "banditkit/Adult-v0", "mushroom": "banditkit/Mushroom-v0",
        "movielens": "banditkit/MovieLens-v0"}
TARGET_SEED, LOGGER_SEED = 100_000, 200_000  # the separate traffic the targets and the ε-greedy logger learn from
EPSILON = 0.2
ESTIMATORS = ("dm", "ips", "snips", "dr", "sndr", "switch_dr")


def targets(env, fit_rounds: int, draws: int):
    """``{name: fn(contexts) -> (n, K)}``: the three target policies, fitted once on a separate uniform log."""
    train = sim.simulate_log(env, fit_rounds, seed=TARGET_SEED).log
    hilofi = off.agent_for_log("hilofi-greedy", train)
    h_state = off.warm_start(hilofi, train, jax.random.PRNGKey(1))
    lin = off.agent_for_log("linear-thompson", train)
    l_state = off.warm_start(lin, train, jax.random.PRNGKey(2))
    k = train.num_actions
    means = np.array([train.rewards[train.actions == a].mean() if np.any(train.actions == a) else -np.inf
                      for a in range(k)])
    best = int(np.argmax(means))
    return {
        "hilofi-greedy": lambda x: off.agent_probabilities(hilofi, h_state, x),
        "linear-ts": lambda x: off.agent_probabilities(lin, l_state, x, jax.random.PRNGKey(3), num_draws=draws),
        f"always-arm-{best}": lambda x: np.tile(np.eye(k)[best], (len(x), 1)),
    }


def loggers(env, fit_rounds: int):
    """``{name: fn(contexts) -> (n, K)}``: uniform, and ε-greedy around a linear-greedy fit on separate traffic."""
    train = sim.simulate_log(env, fit_rounds, seed=LOGGER_SEED).log
    agent = off.agent_for_log("linear-greedy", train)
    state = off.warm_start(agent, train, jax.random.PRNGKey(4))
    k = train.num_actions
    return {
        "uniform": lambda x: sim.uniform(x, k),
        f"eps-greedy-{EPSILON:g}": lambda x: sim.epsilon_greedy(off.predicted_rewards(agent, state, x), EPSILON),
    }


def run_env(name: str, args) -> pd.DataFrame:
    env = gymnasium.make(ENVS[name])
    tgt = targets(env, args.fit_rounds, args.draws)
    logs = loggers(env, args.fit_rounds)
    rm = None
    rows = []
    for rep in range(args.first_rep, args.first_rep + args.reps):
        t0 = time.perf_counter()
        contexts, _, expected = sim.episode(env, rep, args.rounds)
        probs = {t: fn(contexts) for t, fn in tgt.items()}
        truth = {t: sim.true_value(p, expected) for t, p in probs.items()}
        for lname, lfn in logs.items():
            s = sim.simulate_log(env, args.rounds, seed=rep, logging=lfn)
            if rm is None:
                rm = off.agent_for_log("linear", s.log)
            q_hat = off.reward_predictions(rm, s.log, jax.random.PRNGKey(rep), folds=2)
            table = off.evaluate(s.log, probs, reward_model=q_hat, estimators=ESTIMATORS, alpha=0.05)
            for r in table[table.policy != "logging"].itertuples(index=False):
                v = truth[r.policy]
                rows.append(dict(env=name, logging=lname, target=r.policy, rep=rep, estimator=r.estimator,
                                 value=r.value, lower=r.lower, upper=r.upper, stderr=r.stderr, truth=v,
                                 rel_error=float(relative_error(r.value, v)),
                                 covered=bool(r.lower <= v <= r.upper), ess=r.ess))
        if args.progress:
            print(f"{name} rep {rep}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby(["env", "logging", "target", "estimator"], sort=False)
    out = g.agg(truth=("truth", "mean"), rel_error=("rel_error", "mean"), rel_error_se=("rel_error", tables.se),
                coverage=("covered", "mean"), ess=("ess", "mean"), reps=("rep", "nunique")).reset_index()
    return out


def markdown(s: pd.DataFrame) -> list[str]:
    lines = []
    for (env, logging), block in s.groupby(["env", "logging"], sort=False):
        ests = list(dict.fromkeys(block.estimator))
        lines += [f"### {env}, {logging} logging", "",
                  "| target | true value | " + " | ".join(ests) + " |",
                  "| --- | ---: | " + " | ".join("---:" for _ in ests) + " |"]
        for target, t in block.groupby("target", sort=False):
            cells = []
            for e in ests:
                r = t[t.estimator == e].iloc[0]
                cells.append(f"{r.rel_error:.3f} ± {r.rel_error_se:.3f} ({100 * r.coverage:.0f}%)")
            lines.append(f"| {target} | {t.truth.iloc[0]:.3f} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", default=",".join(ENVS), help=f"comma-separated subset of {', '.join(ENVS)}")
    p.add_argument("--rounds", type=int, default=10_000, help="logged rounds per log (default 10000)")
    p.add_argument("--reps", type=int, default=20, help="repetitions (traffic seeds) per cell (default 20)")
    p.add_argument("--first-rep", type=int, default=0, help="first traffic seed (default 0)")
    p.add_argument("--fit-rounds", type=int, default=2000,
                   help="rounds of the separate uniform logs the targets and the ε-greedy logger learn from")
    p.add_argument("--draws", type=int, default=256, help="Monte-Carlo draws of linear-TS's action probabilities")
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--tag", default="ope")
    p.add_argument("--progress", action="store_true")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    names = [e.strip() for e in args.envs.split(",") if e.strip()]
    unknown = [e for e in names if e not in ENVS]
    if unknown:
        raise SystemExit(f"unknown envs {unknown}; choose from {list(ENVS)}")
    t0 = time.perf_counter()
    frames, skipped = [], []
    for name in names:
        try:
            frames.append(run_env(name, args))
        except (FileNotFoundError, RuntimeError, ValueError) as e:
            if "banditkit data fetch" not in str(e) and "not in the cache" not in str(e):
                raise
            skipped.append(f"{name}: {str(e).splitlines()[0]}")
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    s = summary(df) if len(df) else pd.DataFrame()
    doc = __doc__.split("\n\n")[0].replace("\n", " ")
    body = " ".join(__doc__.split("\n\n")[1].split())
    lines = [f"# {doc}", "", f"**Command (this table):** `{provenance.command_line()}`", "",
             f"**Full protocol:** `{provenance.PROG} ope` (10,000 rounds, 20 repetitions, all four environments)", "",
             f"**Machine:** {provenance.machine()}", "", body, "",
             f"Each cell: mean relative error ± s.e. over {args.reps} repetitions of {args.rounds} logged rounds, and "
             "in brackets the coverage of the 95% interval (nominal 95%).  Run time "
             f"{time.perf_counter() - t0:.0f} s.", ""]
    if skipped:
        lines += ["**Skipped:** " + "; ".join(skipped), ""]
    lines += markdown(s) if len(s) else ["(no rows)"]
    os.makedirs(args.out, exist_ok=True)
    df.to_csv(os.path.join(args.out, f"{args.tag}_reps.csv"), index=False)
    tables.save_table(s, lines, args.out, args.tag)
    print("\n".join(lines))


if __name__ == "__main__":  # pragma: no cover
    main()
