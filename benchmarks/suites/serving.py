"""Serving on a changing catalogue: MovieLens-100k movies enter and leave over time, agents served by ServingAgent.

Data (real): the MovieLens-100k ratings (``banditkit data fetch movielens``).  The clock: the *eligible* movies are
those with at least ``--min-ratings`` ratings (default 50); ``t₀`` / ``t₁`` = the first / last timestamp of their
ratings; round ``t`` of ``T`` stands for the time ``τ_t = t₀ + t (t₁ − t₀)/T``.  Movie ``j`` is live at round ``t``
iff ``first_j ≤ τ_t ≤ last_j`` (its first and last rating): it enters at ``e_j = ⌈T (first_j − t₀)/(t₁ − t₀)⌉`` and
retires after its last rating.  An arm is *new* when ``e_j ≥ W`` (``W = --young``, default ``T/10``), and *young*
while ``t − e_j < W``.

Arms: ``K`` movies (``--movies``, default 40) picked by a rule on the data, not by hand: ``--new-arms`` (default
``K/2``) of the new eligible movies and ``K − new-arms`` of the others, each at evenly spaced ranks of first-rating
time (``round(i (M − 1)/(c − 1))``, ``i = 0..c−1``, of the ``M`` movies of the group, so the group's earliest and
latest are in).  New releases are a few per cent of the eligible movies (most were rated from the data's first days:
the back catalogue), so the rule over-represents them on purpose, to have enough new arms to measure whether they
get tried.  The arms are renumbered ``1..K`` and given to ``MovieLensBandit(ratings=..., num_movies=K,
rank=--rank)`` (default rank 20 < K: the rank-20 SVD reconstruction of the real user × movie rating matrix, 0 for
unrated, as the reward table — a movie rated by few users has low imputed rewards; context = the user's SVD factor;
reward = expected reward, no noise; users shown in consecutive random permutations per seed).

Each round: every agent picks among the live arms (``ServingAgent.act(context, available=mask)``) and observes its
reward at once (``ServingAgent.observe``); the oracle picks the live arm of largest expected reward; regret = the
oracle's expected reward − the chosen arm's.  Agents: ``make_agent(spec, env)`` defaults (:data:`AGENTS`: HiLoFi-TS,
linear-TS, neural-linear-TS) inside a :class:`~banditkit.offline.ServingAgent` (each decision also computes its
Monte-Carlo propensity, ``--draws`` draws, as a service logs it), and a uniform choice among the live arms
(``random``).  Reported per agent over seeds (mean ± s.e.): cumulative regret; the share of rounds whose chosen arm
was young (the oracle's share beside it); the share of new arms chosen at least once within ``W`` rounds of entering;
the mean number of rounds from a new arm's entry to its first choice.  ``s / seed``: the served loop's wall time per
seed, the first seed's compilation included (``--jit-cache`` lets later seeds reuse it), on a shared machine.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import NamedTuple

import gymnasium as gym
import jax
import numpy as np
import pandas as pd

import banditkit as bk
from banditkit.agents import make_agent
from banditkit.offline.serving import ServingAgent
from benchmarks.harness import options, plots, provenance, tables

#: the served agents: name -> make_agent spec (None: the uniform-among-available reference)
AGENTS = {"hilofi_ts": "hilofi-thompson", "linear_ts": "linear-thompson",
          "neural_linear_ts": "neural_linear-thompson", "random": None}
STEPS, SEEDS = 5000, 5
MOVIES, MIN_RATINGS, RANK = 40, 50, 20
#: Monte-Carlo draws of a Thompson decision's propensity (ServingAgent computes it with every action; it does not
#: change the action, only the logged propensity and the cost of a round)
DRAWS = 16


class Catalogue(NamedTuple):
    """The arms and when they are live.

    ``movies``: ``(K,)`` MovieLens movie ids of arms ``0..K−1`` (in order of entry); ``first`` / ``last``: ``(K,)``
    timestamps of their first and last rating; ``entry``: ``(K,)`` first live round; ``available``: ``(T, K)`` bool;
    ``ratings``: the ratings of the ``K`` movies with ``movie_id`` renumbered ``1..K`` (the env's input).
    """

    movies: np.ndarray
    first: np.ndarray
    last: np.ndarray
    entry: np.ndarray
    available: np.ndarray
    ratings: pd.DataFrame


def evenly(n: int, c: int) -> np.ndarray:
    """``c`` distinct indices of ``0..n−1`` at evenly spaced ranks ``round(i (n − 1)/(c − 1))`` (``c ≤ n``)."""
    return np.round(np.linspace(0, n - 1, c)).astype(int) if c else np.zeros(0, int)


def clock(first: np.ndarray, last: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(τ (steps,), entry (K,))``: round ``t`` stands for ``τ_t = t₀ + t (t₁ − t₀)/steps`` (``t₀ = min first``,
    ``t₁ = max last``); arm ``j`` enters at ``e_j = ⌈steps (first_j − t₀)/(t₁ − t₀)⌉``, the first ``t`` with
    ``τ_t ≥ first_j`` (``steps`` if none)."""
    t0, t1 = float(np.min(first)), float(np.max(last))
    tau = t0 + np.arange(steps, dtype=np.float64) * (t1 - t0) / steps
    return tau, np.searchsorted(tau, first, side="left")


def pick_movies(ratings: pd.DataFrame, steps: int, k: int, min_ratings: int, new_arms: int,
                window: int) -> np.ndarray:
    """The arms' movie ids, in order of first rating: among the movies with ``≥ min_ratings`` ratings, on their
    :func:`clock`, ``new_arms`` at evenly spaced ranks of those entering at round ``≥ window`` and ``k − new_arms``
    at evenly spaced ranks of the others (ranks by first-rating time; module docstring)."""
    if k < 2 or not 0 <= new_arms < k:
        raise ValueError(f"need --movies >= 2 and 0 <= --new-arms < --movies, got {k} and {new_arms}")
    g = ratings.groupby("movie_id")["timestamp"].agg(["min", "max", "size"])
    g = g[g["size"] >= min_ratings].sort_values("min", kind="stable")
    _, entry = clock(g["min"].to_numpy(np.float64), g["max"].to_numpy(np.float64), steps)
    late = entry >= window
    old_ids, new_ids = g.index.to_numpy()[~late], g.index.to_numpy()[late]
    if len(new_ids) < new_arms or len(old_ids) < k - new_arms:
        raise ValueError(f"movies with at least {min_ratings} ratings: {len(old_ids)} entering before round {window} "
                         f"and {len(new_ids)} after, too few for {k - new_arms} and {new_arms}: lower --min-ratings, "
                         "--movies or --new-arms")
    picked = np.concatenate([old_ids[evenly(len(old_ids), k - new_arms)], new_ids[evenly(len(new_ids), new_arms)]])
    return picked


def catalogue(ratings: pd.DataFrame, steps: int, k: int = MOVIES, min_ratings: int = MIN_RATINGS,
              new_arms: int | None = None, window: int | None = None) -> Catalogue:
    """The arms (:func:`pick_movies`; ``new_arms`` defaults to ``k // 2``, ``window`` to ``steps // 10``), their
    live rounds on the clock of the eligible movies (:func:`clock`: arm ``j`` live iff ``first_j ≤ τ_t ≤ last_j``)
    and the renumbered ratings."""
    new_arms = k // 2 if new_arms is None else new_arms
    window = max(1, steps // 10) if window is None else window
    movies = pick_movies(ratings, steps, k, min_ratings, new_arms, window)
    g = ratings.groupby("movie_id")["timestamp"].agg(["min", "max", "size"])
    g = g[g["size"] >= min_ratings]
    t0, t1 = float(g["min"].min()), float(g["max"].max())
    first, last = g.loc[movies, "min"].to_numpy(np.float64), g.loc[movies, "max"].to_numpy(np.float64)
    tau, entry = clock(np.append(first, [t0]), np.append(last, [t1]), steps)
    live = (first[None, :] <= tau[:, None]) & (tau[:, None] <= last[None, :])
    empty = np.flatnonzero(~live.any(axis=1))
    if empty.size:
        raise ValueError(f"no movie is live at rounds {empty[:10].tolist()}: the catalogue has a gap; pick more "
                         "--movies")
    renum = {int(m): i + 1 for i, m in enumerate(movies)}
    sub = ratings[ratings["movie_id"].isin(movies)]
    out = sub.assign(movie_id=sub["movie_id"].map(renum)).reset_index(drop=True)
    return Catalogue(movies, first, last, entry[:-1], live, out)


# ------------------------------------------------------------------------------------------------------------ play
def serve(spec: str | None, env, seed: int, steps: int, live: np.ndarray, draws: int = DRAWS) -> np.ndarray:
    """Actions ``(steps,)`` of one agent on ``functional(seed, steps)``: ``ServingAgent.act`` with the round's
    ``available`` mask, then ``observe`` of the realised reward; ``spec=None``: uniform among the available arms."""
    fb = env.unwrapped.functional(seed, steps)
    contexts = np.asarray(fb.contexts)[np.asarray(fb.index)]
    rewards = np.asarray(fb.rewards)
    actions = np.empty(steps, np.int64)
    if spec is None:
        rng = np.random.default_rng(seed)
        for t in range(steps):
            actions[t] = rng.choice(np.flatnonzero(live[t]))
        return actions
    agent = make_agent(spec, env)
    srv = ServingAgent(agent, example_context=contexts[0], seed=seed, num_draws=draws, keep_history=False)
    for t in range(steps):
        d = srv.act(contexts[t], available=live[t])
        actions[t] = d.action
        srv.observe(d.ticket, float(rewards[t, d.action]))
    return actions


def oracle(expected: np.ndarray, live: np.ndarray) -> np.ndarray:
    """``(steps,)`` the best available arm of each round by expected reward."""
    return np.argmax(np.where(live, expected, -np.inf), axis=1)


class Metrics(NamedTuple):
    regret: np.ndarray  # (steps,) per-round regret
    young: float  # share of rounds whose chosen arm was young
    tried: float  # share of new arms chosen within W rounds of entry (nan: no new arm)
    first_pick: float  # mean over new arms of the rounds from entry to the first choice (nan: no new arm)
    unavailable: int  # rounds whose chosen arm was not available (must be 0)


def metrics(actions: np.ndarray, expected: np.ndarray, live: np.ndarray, entry: np.ndarray, window: int) -> Metrics:
    """Regret against :func:`oracle`, the young-arm share, the share of new arms tried within ``window`` rounds of
    entering, and the mean delay from entry to an arm's first choice (an arm never chosen counts the rounds from its
    entry to the end: a censored, lower value)."""
    steps = len(actions)
    rows = np.arange(steps)
    best = oracle(expected, live)
    regret = expected[rows, best] - expected[rows, actions]
    age = rows - entry[actions]
    new = entry >= window
    young = float(np.mean(new[actions] & (age < window)))
    new_arms = np.flatnonzero(new & (entry < steps))
    tried = [np.any((actions == j) & (rows >= entry[j]) & (rows < entry[j] + window)) for j in new_arms]
    picks = [np.flatnonzero((actions == j) & (rows >= entry[j])) for j in new_arms]
    delay = [int(p[0] - entry[j]) if p.size else steps - int(entry[j]) for j, p in zip(new_arms, picks, strict=True)]
    nan = float("nan")
    return Metrics(regret, young, float(np.mean(tried)) if tried else nan, float(np.mean(delay)) if delay else nan,
                   int(np.sum(~live[rows, actions])))


# ------------------------------------------------------------------------------------------------------------ run
def make_env(cat: Catalogue, steps: int, rank: int):
    return gym.make("banditkit/MovieLens-v0", max_steps=steps, ratings=cat.ratings, num_movies=len(cat.movies),
                    rank=rank)


def run_all(args, names: list[str], cat: Catalogue, env) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (agent, seed) rows and the per-round cumulative regret of every run."""
    rows, curves = [], []
    live, window = cat.available, args.young
    for seed in options.seed_list(args):
        fb = env.unwrapped.functional(seed, args.steps)
        expected = np.asarray(fb.expected, np.float64)
        ref = metrics(oracle(expected, live), expected, live, cat.entry, window)
        for name in names:
            tic = time.perf_counter()
            acts = serve(AGENTS[name], env, seed, args.steps, live, args.draws)
            wall = time.perf_counter() - tic
            m = metrics(acts, expected, live, cat.entry, window)
            if m.unavailable:
                raise RuntimeError(f"{name} seed {seed} chose an unavailable arm in {m.unavailable} rounds")
            cum = np.cumsum(m.regret)
            rows.append(dict(agent=name, seed=seed, steps=args.steps, cum_regret=float(cum[-1]), young_share=m.young,
                             oracle_young_share=ref.young, new_tried=m.tried, first_pick=m.first_pick,
                             wall_s=wall))
            curves.append(pd.DataFrame(dict(agent=name, seed=seed, step=np.arange(args.steps), cum_regret=cum)))
            print(f"{name} seed {seed}: cumulative regret {cum[-1]:.1f}, young share {m.young:.3f} "
                  f"(oracle {ref.young:.3f}), {wall:.0f} s", flush=True)
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def curve(per_round: pd.DataFrame, points: int = 200) -> pd.DataFrame:
    """Mean ± s.e. over seeds of the cumulative regret at ≤ ``points`` rounds (``TAG_curve.csv``'s columns)."""
    steps = int(per_round["step"].max()) + 1
    keep = np.unique(np.linspace(0, steps - 1, min(points, steps)).round().astype(int))
    sub = per_round[per_round["step"].isin(keep)]
    g = sub.groupby(["agent", "step"], sort=False)["cum_regret"]
    return g.agg(cum_regret="mean", cum_regret_se=tables.se, n="size").reset_index()


def summary(df: pd.DataFrame) -> pd.DataFrame:
    g = df.groupby("agent", sort=False)
    return g.agg(cum_regret=("cum_regret", "mean"), cum_regret_se=("cum_regret", tables.se),
                 young_share=("young_share", "mean"), young_share_se=("young_share", tables.se),
                 oracle_young_share=("oracle_young_share", "mean"), new_tried=("new_tried", "mean"),
                 first_pick=("first_pick", "mean"), first_pick_se=("first_pick", tables.se),
                 wall_s=("wall_s", "mean"), seeds=("seed", "nunique")).reset_index()


def plot(cur: pd.DataFrame, live: np.ndarray, path: str, title: str) -> None:
    plt = plots._pyplot()
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(6.4, 5.6), dpi=150, sharex=True, height_ratios=(3, 1))
    for i, (agent, g) in enumerate(cur.groupby("agent", sort=False)):
        plots.band(ax, g["step"].to_numpy() + 1, g["cum_regret"].to_numpy(), g["cum_regret_se"].to_numpy(), lw=1.8,
                   label=agent, **bk.plotting.plots.line_style(i))
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("cumulative regret (rating units)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    bx.step(np.arange(1, len(live) + 1), live.sum(axis=1), where="post", color="k", lw=1)
    bx.set_ylabel("live arms")
    bx.set_xlabel("round")
    bx.grid(True, alpha=0.3)
    for a in (ax, bx):
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def arms_table(cat: Catalogue, window: int) -> pd.DataFrame:
    """One row per arm: its movie id, first / last rating (UTC), entry round, retirement round (the first round after
    its last live one; ``T`` if live to the end) and whether it is new (``entry ≥ W``)."""
    steps = len(cat.available)
    live_rounds = [np.flatnonzero(cat.available[:, j]) for j in range(len(cat.movies))]
    return pd.DataFrame(dict(
        arm=np.arange(len(cat.movies)), movie_id=cat.movies,
        first_rating=pd.to_datetime(cat.first, unit="s"), last_rating=pd.to_datetime(cat.last, unit="s"),
        entry_round=cat.entry, retire_round=[int(r[-1]) + 1 if r.size else steps for r in live_rounds],
        new=cat.entry >= window))


def markdown(args, s: pd.DataFrame, cat: Catalogue, env, wall: float) -> list[str]:
    live, entry = cat.available, cat.entry
    new = int(np.sum((entry >= args.young) & (entry < args.steps)))
    retired = int(np.sum(~live[-1]))
    u = env.unwrapped
    paras = __doc__.split("\n\n")
    lines = [f"# {paras[0].strip()}", "", f"**Command (this table):** `{provenance.command_line()}`", "",
             f"**Full protocol:** `{provenance.PROG} serving --seeds {SEEDS} --steps {STEPS}`", "",
             f"**Machine:** {provenance.machine()}", ""]
    for para in paras[1:]:
        lines += [" ".join(para.split()), ""]
    lines += [f"**This run (real data: MovieLens-100k ratings; the reward table is the rank-{u.rank} SVD "
              f"reconstruction of the real rating matrix, the traffic order is simulated):** {len(cat.movies)} "
              f"movies (≥ {args.min_ratings} ratings each), {u.num_users} users, {args.steps} rounds × "
              f"{options.seeds_text(args)}; live arms per round: {int(live.sum(1).min())}–{int(live.sum(1).max())} "
              f"(mean {live.sum(1).mean():.1f}); {int(np.sum(entry == 0))} live from round 0, {new} new arms "
              f"(entering at round ≥ W = {args.young}), {retired} retired before the end.  Thompson propensities: "
              f"{args.draws} draws.  Run time {wall:.0f} s.", ""]
    lines += ["| agent | cum. regret | young-arm share (oracle) | new arms tried within W | rounds to a new arm's "
              "first pick | s / seed (incl. compile) |",
              "| --- | ---: | ---: | ---: | ---: | ---: |"]
    best = s.loc[s["cum_regret"].idxmin(), "agent"] if len(s) else None
    for r in s.itertuples(index=False):
        reg = f"{r.cum_regret:.1f} ± {r.cum_regret_se:.1f}"
        reg = f"**{reg}**" if r.agent == best else reg
        tried = "n/a" if math.isnan(r.new_tried) else f"{100 * r.new_tried:.0f}%"
        lines.append(f"| {r.agent} | {reg} | {100 * r.young_share:.1f}% ± {100 * r.young_share_se:.1f} "
                     f"({100 * r.oracle_young_share:.1f}%) | {tried} | {r.first_pick:.1f} ± {r.first_pick_se:.1f} "
                     f"| {r.wall_s:.0f} |")
    lines += ["", "Agents: " + "; ".join(f"`{n}` = `make_agent(\"{sp}\", env)` in a ServingAgent" if sp else
                                          f"`{n}` = uniform among the available arms" for n, sp in AGENTS.items()
                                          if n in set(s["agent"])) + ".", "",
              "Arms (arm: MovieLens movie id, entry round; new arms in bold): "
              + ", ".join((f"**{j}: {m}, {e}**" if e >= args.young else f"{j}: {m}, {e}")
                          for j, (m, e) in enumerate(zip(cat.movies, entry, strict=True))), ""]
    return lines


def load_ratings() -> pd.DataFrame:
    """The real MovieLens-100k ratings (``user_id, movie_id, rating, timestamp``) from the cache."""
    return bk.datasets.load("movielens")


def use_compilation_cache(folder: str) -> None:
    """Keep XLA's compiled programs in ``folder`` (``--jit-cache``): every (agent, seed) makes a new ServingAgent whose
    jitted decision is traced anew, and with the cache the seeds after the first reuse the first one's compiled
    program (the same program, so the same numbers) instead of compiling it again (~40 s per agent and seed on a
    loaded 2-core machine, ~3 s with the cache)."""
    os.makedirs(folder, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", "--rounds", dest="steps", type=int, default=STEPS, help=f"rounds per seed ({STEPS})")
    p.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds 0..n-1 (default {SEEDS})")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--agents", default="", help=f"comma-separated subset of {list(AGENTS)} (default: all)")
    p.add_argument("--movies", type=int, default=MOVIES, help=f"arms K (default {MOVIES})")
    p.add_argument("--min-ratings", type=int, default=MIN_RATINGS,
                   help=f"a movie needs this many ratings to be an arm (default {MIN_RATINGS})")
    p.add_argument("--new-arms", type=int, default=None, help="arms entering at round >= W (default movies // 2)")
    p.add_argument("--rank", type=int, default=RANK, help=f"SVD rank of the reward table (default {RANK})")
    p.add_argument("--young", type=int, default=None, help="W: rounds an arm stays young (default steps // 10)")
    p.add_argument("--draws", type=int, default=DRAWS, help=f"Thompson propensity draws (default {DRAWS})")
    p.add_argument("--jit-cache", default=None, metavar="DIR",
                   help="a folder for XLA's persistent compilation cache (compile once, not once per seed)")
    p.add_argument("--out", default=options.RESULTS)
    p.add_argument("--tag", default="serving")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    if args.steps < 2 or args.seeds < 1:
        raise SystemExit(f"--steps must be >= 2 and --seeds >= 1, got {args.steps} and {args.seeds}")
    args.young = max(1, args.steps // 10) if args.young is None else args.young
    if args.young < 1:
        raise SystemExit(f"--young must be >= 1 round, got {args.young}")
    names = list(options.select(AGENTS, args.agents))
    tic = time.perf_counter()
    args.new_arms = args.movies // 2 if args.new_arms is None else args.new_arms
    cat = catalogue(load_ratings(), args.steps, args.movies, args.min_ratings, args.new_arms, args.young)
    env = make_env(cat, args.steps, args.rank)
    if args.jit_cache:
        use_compilation_cache(args.jit_cache)
    df, per_round = run_all(args, names, cat, env)
    cur = curve(per_round)
    s = summary(df)
    lines = markdown(args, s, cat, env, time.perf_counter() - tic)
    os.makedirs(args.out, exist_ok=True)
    tables.save_table(df, lines, args.out, args.tag)
    cur.to_csv(os.path.join(args.out, f"{args.tag}_curve.csv"), index=False)
    arms_table(cat, args.young).to_csv(os.path.join(args.out, f"{args.tag}_arms.csv"), index=False)
    plot(cur, cat.available, os.path.join(args.out, f"{args.tag}.png"),
         f"Serving on a changing MovieLens catalogue ({len(cat.movies)} movies), mean ± s.e. over "
         f"{df['seed'].nunique()} seeds")
    print("\n".join(lines))


if __name__ == "__main__":  # pragma: no cover
    main()
