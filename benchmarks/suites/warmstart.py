"""Warm start: agents started from a uniform-logging log against the same agents from scratch, regret online.

For each environment (Shuttle, Adult, Mushroom: the committed UCI tables; MovieLens-100k: fetched into the cache —
all real data), each agent (``make_agent(spec, env)`` with nothing else set) and each seed ``s``:

* the log: ``log_rounds`` rounds of the traffic ``functional(seed=1000 + s)`` with actions drawn uniformly,
  ``a_i ~ U{0..K-1}`` (:func:`banditkit.offline.simulate.simulate_log`, exact propensities ``1/K``);
* the online traffic: ``functional(seed=s, online_rounds)``, contexts ``x_t``, rewards ``r_{t,k}``, expected
  rewards ``q_{t,k}`` (separate from the log's);
* the keys: ``k_init, k_act = split(PRNGKey(s))`` (as the compiled runner), ``θ₀ = agent.init(k_init, x_0)``;
* (a) scratch: ``state = θ₀``; (b) warm: ``state = warm_start(agent, log, k_init, state=θ₀)`` (one pass of
  ``observe`` over the logged rows, unweighted: a uniform log needs no importance weighting);
* then both play the same ``online_rounds`` rounds with the same round keys ``key_t = fold_in(k_act, t)``:
  ``a_t, state = act(key_t, state, x_t)``, ``state = observe(state, x_t, a_t, r_{t,a_t})`` (one jitted ``lax.scan``,
  ``vmap`` over the 2 × seeds lanes), with regret ``Σ_t (max_k q_{t,k} − q_{t,a_t})`` against the oracle's best arm.

Reported per environment × agent: the cumulative regret over the online rounds from scratch and warm, mean ± s.e.
over seeds, and the paired difference ``warm − scratch`` (per seed, then mean ± s.e.); for scale, the uniform
policy's expected regret ``Σ_t (max_k q_{t,k} − mean_k q_{t,k})`` on the same traffic.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

import banditkit as bk  # noqa: F401  (registers the environments)
from banditkit import offline as off
from banditkit.agents import make_agent
from banditkit.experiments.frames import is_synthetic
from banditkit.experiments.health import state_is_finite
from banditkit.offline import simulate as sim
from benchmarks.harness import options, plots, provenance, tables

ENVS = {"shuttle": "banditkit/Shuttle-v0", "adult": "banditkit/Adult-v0", "mushroom": "banditkit/Mushroom-v0",
        "movielens": "banditkit/MovieLens-v0"}
DATA = {"shuttle": "real (UCI Statlog Shuttle, committed table)", "adult": "real (UCI Adult, committed table)",
        "mushroom": "real (UCI Mushroom, committed table)",
        "movielens": "real (MovieLens-100k ratings, fetched into the cache; 20 movies, rank 20)"}
AGENTS = ("hilofi-thompson", "linear-thompson", "neural_linear-thompson")
LOG_SEED = 1000  # the log of seed s is drawn from functional(LOG_SEED + s): traffic separate from the online rounds
CURVE_POINTS = 200


def online_runner(agent) -> Callable:
    """``fn(states, contexts (L, T, ...), rewards (L, T, K), expected (L, T, K), k_act (L, 2))`` →
    ``(finite (L,), actions (L, T), regret (L, T))``: ``T`` online rounds per lane (module docstring), jitted and
    vmapped over the ``L`` lanes; ``regret_t = max_k q_{t,k} − q_{t,a_t}``; ``finite``: every float of the lane's final
    agent state is finite (a NaN state still picks arms, so its regret alone would not show it)."""

    def lane(state, xs, rs, qs, k_act):
        def step(st, inp):
            t, x, r, q = inp
            a, st = agent.act(jax.random.fold_in(k_act, t), st, x)
            st = agent.observe(st, x, a, r[a])
            return st, (a, jnp.max(q) - q[a])

        steps = jnp.arange(rs.shape[0])
        final, (actions, regret) = jax.lax.scan(step, state, (steps, xs, rs, qs))
        return state_is_finite(final), actions, regret

    return jax.jit(jax.vmap(lane))


def _stack(states: list):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *states)


def run_env(env, specs: dict[str, Callable], seeds: list[int], log_rounds: int, online_rounds: int,
            progress: bool = False) -> tuple[pd.DataFrame, dict]:
    """Scratch against warm for every agent of ``specs`` (``{name: factory(env) -> agent}``) on ``env``.

    Returns ``(rows, curves)``: one row per agent × seed × start (``scratch`` / ``warm``) with the cumulative regret
    ``cum_regret`` over the online rounds, the uniform policy's ``uniform_regret`` and the timings; ``curves[(agent,
    start)]`` = the per-round cumulative regret ``(S, T)``."""
    logs, online = [], []
    for s in seeds:
        logs.append(sim.simulate_log(env, log_rounds, seed=LOG_SEED + s).log)
        online.append(sim.episode(env, s, online_rounds))
    xs = np.stack([np.asarray(c, np.float32) for c, _, _ in online])
    rs = np.stack([np.asarray(r, np.float32) for _, r, _ in online])
    qs = np.stack([np.asarray(q, np.float32) for _, _, q in online])
    uniform = np.array([float(np.sum(q.max(1) - q.mean(1))) for _, _, q in online])
    keys = [jax.random.split(jax.random.PRNGKey(s)) for s in seeds]
    rows, curves = [], {}
    for name, factory in specs.items():
        agent = factory(env)
        t0 = time.perf_counter()
        scratch = [agent.init(k[0], xs[i, 0]) for i, k in enumerate(keys)]
        warm = [off.warm_start(agent, logs[i], k[0], state=scratch[i]) for i, k in enumerate(keys)]
        jax.block_until_ready(warm)
        t_warm = time.perf_counter() - t0
        t0 = time.perf_counter()
        finite, _, regret = online_runner(agent)(
            _stack(scratch + warm), np.concatenate([xs, xs]), np.concatenate([rs, rs]), np.concatenate([qs, qs]),
            jnp.stack([k[1] for k in keys] * 2))
        cum = np.cumsum(np.asarray(regret, np.float64), axis=1)
        finite = np.asarray(finite)
        t_online = time.perf_counter() - t0
        for j, start in enumerate(("scratch", "warm")):
            block = cum[j * len(seeds):(j + 1) * len(seeds)]
            curves[(name, start)] = block
            for i, s in enumerate(seeds):
                rows.append(dict(agent=name, seed=s, start=start, cum_regret=block[i, -1],
                                 finite=bool(finite[j * len(seeds) + i]), uniform_regret=uniform[i],
                                 log_rounds=log_rounds, online_rounds=online_rounds,
                                 warm_start_s=t_warm if start == "warm" else 0.0, online_s=t_online))
        if progress:
            print(f"  {name}: warm start {t_warm:.1f} s (all seeds), online {t_online:.1f} s (2 x {len(seeds)} "
                  "lanes, with compilation)", flush=True)
    return pd.DataFrame(rows), curves


def summary(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Per env × agent: scratch and warm regret (mean, s.e.), the paired difference warm − scratch (mean, s.e.)."""
    out = []
    for (env, agent), g in per_seed.groupby(["env", "agent"], sort=False):
        a = g[g.start == "scratch"].set_index("seed").cum_regret
        b = g[g.start == "warm"].set_index("seed").cum_regret.reindex(a.index)
        d = b - a
        out.append(dict(env=env, data=g.data.iloc[0], agent=agent, seeds=len(a),
                        log_rounds=int(g.log_rounds.iloc[0]), online_rounds=int(g.online_rounds.iloc[0]),
                        scratch_regret=a.mean(), scratch_regret_se=tables.se(a),
                        warm_regret=b.mean(), warm_regret_se=tables.se(b),
                        warm_minus_scratch=d.mean(), warm_minus_scratch_se=tables.se(d),
                        warm_better_seeds=int((d < 0).sum()),
                        uniform_regret=g.uniform_regret.mean(), all_finite=bool(g.finite.all()),
                        warm_start_s=g.warm_start_s.max(), online_s=g.online_s.max()))
    return pd.DataFrame(out)


def curve_frame(env: str, curves: dict, points: int = CURVE_POINTS) -> pd.DataFrame:
    """Mean ± s.e. over seeds of the cumulative regret at ≤ ``points`` rounds (and the last) per agent × start."""
    frames = []
    for (agent, start), c in curves.items():
        t = np.unique(np.r_[np.linspace(0, c.shape[1] - 1, min(points, c.shape[1])).astype(int), c.shape[1] - 1])
        se = c[:, t].std(0, ddof=1) / np.sqrt(c.shape[0]) if c.shape[0] > 1 else np.zeros(len(t))
        frames.append(pd.DataFrame(dict(env=env, agent=agent, start=start, step=t, cum_regret=c[:, t].mean(0),
                                        cum_regret_se=se, n=c.shape[0])))
    return pd.concat(frames, ignore_index=True)


def plot(cur: pd.DataFrame, path: str) -> None:
    """One panel per env: cumulative regret over the online rounds, agents by colour, warm solid, scratch dashed."""
    plt = plots._pyplot()
    envs = list(dict.fromkeys(cur.env))
    agents = list(dict.fromkeys(cur.agent))
    colours = dict(zip(agents, plots.method_colours(len(agents)), strict=True))
    fig, axes = plt.subplots(1, len(envs), figsize=(4.6 * len(envs), 3.9), squeeze=False)
    for ax, env in zip(axes[0], envs, strict=True):
        for (agent, start), g in cur[cur.env == env].groupby(["agent", "start"], sort=False):
            plots.band(ax, g.step + 1, g.cum_regret, g.cum_regret_se, color=colours[agent], lw=1.6,
                       ls="-" if start == "warm" else "--", label=f"{agent} ({start})")
        ax.set_title(env)
        ax.set_xlabel("online round")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("cumulative regret")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), fontsize=8, frameon=False)
    fig.suptitle(f"Warm start from a uniform log (solid) vs scratch (dashed); mean ± s.e. over "
                 f"{int(cur.n.max())} seeds", fontsize=10)
    fig.tight_layout(rect=(0, 0.06 + 0.03 * ((len(labels) - 1) // 3), 1, 0.95))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def markdown(s: pd.DataFrame) -> list[str]:
    lines = ["| env | data | agent | seeds | scratch regret | warm regret | warm − scratch (paired) | warm better | "
             "uniform policy regret | warm start s (all seeds) | online s (all lanes, with compile) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in s.itertuples(index=False):
        flag = "" if r.all_finite else " (**NaN/inf agent state at the end in some seed: not valid**)"
        lines.append(f"| {r.env} | {r.data} | {r.agent}{flag} | {r.seeds} | {r.scratch_regret:.1f} ± "
                     f"{r.scratch_regret_se:.1f} | {r.warm_regret:.1f} ± {r.warm_regret_se:.1f} | "
                     f"{r.warm_minus_scratch:+.1f} ± {r.warm_minus_scratch_se:.1f} | {r.warm_better_seeds}/{r.seeds} | "
                     f"{r.uniform_regret:.1f} | "
                     f"{r.warm_start_s:.1f} | {r.online_s:.1f} |")
    return lines


def _data_note(per_seed: pd.DataFrame) -> str:
    """Which rows are real data and which synthetic (the ``data`` column)."""
    if not len(per_seed):
        return ""
    synthetic = sorted(set(per_seed.env[per_seed.data == "synthetic"]))
    if not synthetic:
        return "Every environment here runs on real data (column `data`); none is synthetic."
    return f"Synthetic environments: {', '.join(synthetic)}; the others run on real data (column `data`)."



def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", default=",".join(ENVS), help=f"comma-separated subset of {', '.join(ENVS)}")
    p.add_argument("--agents", default=",".join(AGENTS), help=f"comma-separated subset of {', '.join(AGENTS)}")
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    p.add_argument("--log-rounds", type=int, default=5000, help="rounds of the uniform log (default 5000)")
    p.add_argument("--online-rounds", type=int, default=5000, help="online rounds after the start (default 5000)")
    p.add_argument("--out", default=options.RESULTS, help="output folder (default benchmarks/results)")
    p.add_argument("--tag", default="warmstart", help="output file prefix (default warmstart)")
    p.add_argument("--progress", action="store_true", help="print each agent's times")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    envs = options.names(args.envs, ENVS, "envs")
    agents = options.names(args.agents, AGENTS, "agents")
    for flag in ("seeds", "log_rounds", "online_rounds"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"--{flag.replace('_', '-')} must be >= 1, got {getattr(args, flag)}")
    specs = {a: (lambda env, a=a: make_agent(a, env)) for a in agents}
    seeds = list(range(args.seeds))
    t_all = time.perf_counter()
    frames, curves, skipped = [], [], []
    for i, name in enumerate(envs):
        if args.progress:
            print(f"== {name}", flush=True)
        try:
            env = gymnasium.make(ENVS[name])
        except (FileNotFoundError, RuntimeError, ValueError) as e:
            if "banditkit data fetch" not in str(e) and "not in the cache" not in str(e):
                raise
            skipped.append(f"{name}: {str(e).splitlines()[0]}")
            continue
        rows, cur = run_env(env, specs, seeds, args.log_rounds, args.online_rounds, args.progress)
        data = "synthetic" if is_synthetic(env) else DATA[name]
        frames.append(rows.assign(env=name, data=data))
        curves.append(curve_frame(name, cur))
        lines = write(args, frames, curves, skipped, envs[i + 1:], time.perf_counter() - t_all)
    if not frames:
        lines = write(args, frames, curves, skipped, [], time.perf_counter() - t_all)
    print("\n".join(lines))


def write(args, frames: list, curves: list, skipped: list[str], pending: list[str], seconds: float) -> list[str]:
    """Write ``TAG.md``, ``TAG.csv`` (per env × agent), ``TAG_seeds.csv``, ``TAG_curve.csv`` and ``TAG.png`` from the
    envs done so far (``pending``: those still to run, named in the table); returns the Markdown lines."""
    per_seed = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    s = summary(per_seed) if len(per_seed) else pd.DataFrame()
    title = __doc__.split("\n")[0]
    body = "\n\n".join(" ".join(b.split()) if not b.lstrip().startswith("*") else b for b in __doc__.split("\n\n")[1:])
    lines = [f"# {title}", "", f"**Command (this table):** `{provenance.command_line()}`", "",
             f"**Full protocol:** `{provenance.PROG} warmstart --seeds 5` (5000 logged + 5000 online rounds, all "
             "four environments, all three agents)", "", f"**Machine:** {provenance.machine()}", "", body, "",
             f"Each cell: cumulative regret over {args.online_rounds} online rounds, mean ± s.e. over {args.seeds} "
             f"seeds; the log has {args.log_rounds} rounds.  \"warm better\": seeds where warm < scratch.  "
             f"{_data_note(per_seed)}  Run time {seconds:.0f} s.", ""]
    if pending:
        lines += [f"**Partial table:** still running {', '.join(pending)} when this was written.", ""]
    if skipped:
        lines += ["**Skipped:** " + "; ".join(skipped), ""]
    lines += markdown(s) if len(s) else ["(no rows)"]
    os.makedirs(args.out, exist_ok=True)
    if len(per_seed):
        cols = ["env", "data", "agent", "seed", "start", "cum_regret", "uniform_regret", "finite", "log_rounds",
                "online_rounds", "warm_start_s", "online_s"]
        per_seed[cols].to_csv(os.path.join(args.out, f"{args.tag}_seeds.csv"), index=False)
        cur = pd.concat(curves, ignore_index=True)
        cur.to_csv(os.path.join(args.out, f"{args.tag}_curve.csv"), index=False)
        plot(cur, os.path.join(args.out, f"{args.tag}.png"))
        lines += ["", f"![cumulative regret]({args.tag}.png)"]
    tables.save_table(s, lines, args.out, args.tag)
    return lines

if __name__ == "__main__":  # pragma: no cover
    main()
