"""Issue 55's headline: banditkit's default agents against the contextual-bandit libraries people install.

Data: Shuttle, Adult, Mushroom (``banditkit/<Name>-v0``, the committed UCI tables) and MovieLens-100k
(``banditkit/MovieLens-v0`` with its defaults: 20 movies, rank 20, raw ratings); T = 5000 rounds, 5 seeds.
Agents: ``make_agent(spec, env)`` with nothing else set (:data:`AGENTS`), on the compiled runner.  Peers
(:mod:`benchmarks.peers`): Vowpal Wabbit (SquareCB and ε-greedy), MABWiser (LinTS, LinUCB) and contextualbandits
(LinTS, bootstrapped TS), each played on the same seeds' episodes — the same contexts and rewards the agents see.

Writes ``TAG_DATASET.md`` (+ ``_seeds.csv``, ``_curve.csv``, ``_regret.png``) per data set and the overview ``TAG.md``
(mean ± s.e. of the cumulative reward, the best per data set in bold, and issue 55's targets measured).

``--agents`` / ``--peers`` pick a subset (comma lists; ``none`` for none).  Naming only one of them runs only it: so
``--agents hilofi_ts --merge`` re-runs HiLoFi-TS and keeps every other row, agents' and peers' alike.

Usage::

    python -m benchmarks headline --steps 5000 --seeds 5                       # the protocol
    python -m benchmarks headline --steps 200 --seeds 2 --datasets Shuttle --out /tmp/h
    python -m benchmarks headline --agents hilofi_ts --merge                   # after a change of defaults
"""

from __future__ import annotations

import os
import re
import sys
import time

import gymnasium as gym
import numpy as np
import pandas as pd

from benchmarks import agents as A
from benchmarks import peers as P
from benchmarks.harness import merge, options, report, run, tables
from benchmarks.harness.provenance import PROG
from benchmarks.peers import play

DATASETS = ("Shuttle", "Adult", "Mushroom", "MovieLens")
#: the banditkit agents: name -> make_agent spec, nothing else set
AGENTS = {"hilofi_ts": "hilofi-thompson", "lofi_ts": "lofi-thompson", "lrkf_ts": "lrkf-thompson",
          "linear_ts": "linear-thompson", "neural_linear_ts": "neural_linear-thompson"}
#: issue 55's protocol (targets are assessed only on a run of at least this size)
STEPS, SEEDS = 5000, 5
#: issue 55: HiLoFi-TS against these banditkit agents and every peer; LoFi-TS / LRKF-TS against linear-TS
RIVALS = ("linear_ts", "neural_linear_ts")


def make_env(name: str, steps: int):
    """The data set's environment (MovieLens with its defaults: 20 movies, rank 20)."""
    if name not in DATASETS:
        raise SystemExit(f"unknown dataset {name!r}; choose from {DATASETS}")
    return gym.make(f"banditkit/{name}-v0", max_steps=steps)


def agent_set() -> dict:
    """``{name: factory}`` of the default agents (``make_agent(spec, env)``)."""
    return {name: A.agent_factory(spec, protocol_noise=False) for name, spec in AGENTS.items()}


def _selection(args) -> tuple[dict, list[str]]:
    """The agents and peers this command runs: both lists default to all, but naming only one runs only it."""
    agents_arg, peers_arg = args.agents.strip(), args.peers.strip()
    if agents_arg and not peers_arg:
        peers_arg = "none"
    if peers_arg and not agents_arg:
        agents_arg = "none"
    agents = {} if agents_arg == "none" else options.select(agent_set(), agents_arg)
    return agents, P.select("" if peers_arg == "all" else peers_arg)


def main(argv=None) -> None:
    p = options.parser(__doc__.splitlines()[0], steps=STEPS, seeds=SEEDS)
    options.add_check(p)
    p.add_argument("--datasets", default=",".join(DATASETS), help=f"comma list from {DATASETS}")
    p.add_argument("--peers", default="",
                   help=f"comma-separated subset of {list(P.PEERS)}, 'none' or 'all' (default: all, unless only "
                        "--agents is given)")
    p.add_argument("--tag", default="headline", help="output file prefix (default headline)")
    args = p.parse_args(argv)
    options.check_args(args)
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    bad = [d for d in names if d not in DATASETS]
    if bad:
        raise SystemExit(f"unknown dataset(s) {bad}; choose from {DATASETS}")
    agents, peers = _selection(args)
    absent = P.missing(peers)
    for name, why in absent.items():
        print(f"peer {name} skipped: {why}", file=sys.stderr)
    peers = [n for n in peers if n not in absent]
    seeds = options.seed_list(args)
    for ds in names:
        tic = time.perf_counter()
        env = make_env(ds, args.steps)
        tag = f"{args.tag}_{ds.lower()}"
        print(f"== {ds}: agents {list(agents)}, peers {peers}, {args.steps} steps, {options.seeds_text(args)}",
              flush=True)
        if args.add_seeds:
            merge.check_add_seeds(args.out, tag, [*agents, *peers], seeds, args.steps)

        def write(res, ds=ds, env=env) -> None:
            _write(args, ds, env, res, absent)

        res_agents = run.run_or_render(args, env, agents, on_agent=write)
        if args.render:
            write(res_agents)
            continue
        check = args.check is not None
        res_peers = play.run_peers(env, peers, args.steps, seeds, rounds=args.check,
                                   on_peer=None if check else (lambda r, a=res_agents, w=write: w(play.combine(a, r))))
        write(play.combine(res_agents, res_peers))
        print(f"   {ds} done in {time.perf_counter() - tic:.0f}s", flush=True)


def describe(name: str) -> str:
    """What a row is: the agent's ``make_agent`` call or the peer's library and settings."""
    if name in AGENTS:
        return f"banditkit `make_agent(\"{AGENTS[name]}\", env)`"
    if name in P.PEERS:
        return P.PEERS[name].config
    return "(not in this code's sets)"


def library(name: str) -> str:
    """The library a row comes from."""
    return "banditkit" if name in AGENTS else P.PEERS[name].library if name in P.PEERS else "?"


def _write(args, ds: str, env, res, absent: dict) -> None:
    u = env.unwrapped
    failures = dict(res.failures)
    if not args.render:  # a --render result must stay empty (write_outputs tells it by that)
        failures.update({n: f"not run: {why}" for n, why in absent.items()})
    res = run.Result(res.frame, res.timing, failures)
    rows = list(AGENTS) + list(P.PEERS)
    notes = [f"{ds}: {u.num_actions} arms, context shape {env.observation_space.shape}; every row sees the same "
             "seeds' contexts and rewards (`env.unwrapped.functional(seed, steps)`)."]
    notes += [f"`{n}`: {describe(n)}." for n in rows]
    notes.append("Peers run in a Python loop, seeds one after another, without compilation: their `compile s` is 0 "
                 "and their `run s` the sum over seeds; the agents' `run s` is all seeds together (vmapped).")
    report.write_dataset(
        res, args, ds, env,
        title=f"Headline {ds}: default banditkit agents against VW, MABWiser and contextualbandits",
        protocol=f"{args.steps} steps × {{seeds}}, every agent `make_agent(spec, env)` with nothing else set",
        full_command=f"{PROG} headline --datasets {ds} --steps {STEPS} --seeds {SEEDS}",
        reward_label="cum. reward (ratings)" if ds == "MovieLens" else "cum. reward", notes=notes)
    if args.check is None:  # --check writes nothing
        write_overview(args.out, args.tag)


# ---------------------------------------------------------------------------------------------------- overview
def summaries(out: str, tag: str = "headline") -> dict[str, pd.DataFrame]:
    """``{data set: tables.summary frame}`` of every ``TAG_DATASET_seeds.csv`` in ``out``."""
    found = {}
    for ds in DATASETS:
        path = os.path.join(out, f"{tag}_{ds.lower()}_seeds.csv")
        if os.path.exists(path):
            df = pd.read_csv(path)
            found[ds] = tables.summary(df, list(dict.fromkeys(df["agent"])))
    return found


def _cell(r, best: bool) -> str:
    text = f"{r.cum_reward:.1f} ± {r.cum_reward_se:.1f}"
    if r.get("nonfinite_seeds", 0):
        text += " (NaN/inf state: not valid)"
    return f"**{text}**" if best else text


def _valid(s: pd.DataFrame) -> pd.DataFrame:
    return s[s["nonfinite_seeds"].fillna(0) == 0] if "nonfinite_seeds" in s else s


def rows_in(found: dict[str, pd.DataFrame]) -> list[str]:
    """The agents and peers of the tables, agents first, in the registries' order."""
    order = list(AGENTS) + list(P.PEERS)
    present = {n for s in found.values() for n in s.index}
    return [n for n in order + sorted(present - set(order)) if n in present]


_NUMBER = r"-?\d+(?:\.\d+)? ± \d+(?:\.\d+)?"
_REFERENCES = re.compile(rf"uniform-random policy ({_NUMBER}); oracle \(best arm every round\) ({_NUMBER})")


def references(out: str, tag: str, ds: str) -> tuple[str, str] | None:
    """``(uniform random, oracle)`` cumulative rewards from the references line of ``TAG_DATASET.md`` (None if
    absent)."""
    path = os.path.join(out, f"{tag}_{ds.lower()}.md")
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        m = _REFERENCES.search(fh.read())
    return (m.group(1), m.group(2)) if m else None


def overview_table(found: dict[str, pd.DataFrame], refs: dict[str, tuple[str, str] | None] | None = None) -> list[str]:
    """Markdown rows: one per agent / peer, one column per data set, mean ± s.e. of the cumulative reward; the best
    (highest mean among valid rows) per data set in bold; then the uniform-random and oracle references (``refs``,
    per data set) where given."""
    lines = ["| agent / peer | library | " + " | ".join(found) + " |", "|---|---|" + "---|" * len(found)]
    best = {ds: _valid(s)["cum_reward"].idxmax() if len(_valid(s)) else None for ds, s in found.items()}
    for n in rows_in(found):
        cells = [_cell(s.loc[n], n == best[ds]) if n in s.index else "—" for ds, s in found.items()]
        lines.append(f"| {n} | {library(n)} | " + " | ".join(cells) + " |")
    for i, label in enumerate(("uniform-random policy (reference)", "oracle, best arm every round (reference)")):
        if refs and any(refs.get(ds) for ds in found):
            cells = [refs[ds][i] if refs.get(ds) else "—" for ds in found]
            lines.append(f"| {label} | | " + " | ".join(cells) + " |")
    return lines


def _ahead(a, b) -> float:
    """``(mean_a − mean_b) / √(se_a² + se_b²)``: how many standard errors of the difference ``a`` is ahead."""
    d = a.cum_reward - b.cum_reward
    s = float(np.hypot(a.cum_reward_se, b.cum_reward_se))
    return d / s if s > 0 else (np.inf if d > 0 else -np.inf if d < 0 else 0.0)


def targets(found: dict[str, pd.DataFrame]) -> list[str]:
    """Issue 55's targets on these data sets, measured: HiLoFi-TS against the best of linear-TS, neural-linear-TS
    and every peer (matches: not behind by more than one s.e. of the difference; ahead: by more than one), and
    LoFi-TS / LRKF-TS against linear-TS."""
    full = all(int(s["steps"].min()) >= STEPS and int(s["seeds"].min()) >= SEEDS for s in found.values())
    full = full and set(found) == set(DATASETS)
    lines = ["**Issue 55's targets on these data sets** (z = (mean₁ − mean₂) / √(se₁² + se₂²); \"ahead\": z > 1, "
             "\"matches\": z ≥ −1):", ""]
    if not full:
        lines += [f"- NOT ASSESSED: the run is smaller than the protocol ({STEPS} rounds × {SEEDS} seeds on "
                  f"{', '.join(DATASETS)}); the comparisons below are indicative only."]
    ahead = matched = 0
    for ds, s in found.items():
        s = _valid(s)
        if "hilofi_ts" not in s.index:
            continue
        rivals = s.drop(index=[n for n in s.index if n in AGENTS and n not in RIVALS])
        if rivals.empty:
            continue
        top = rivals["cum_reward"].idxmax()
        z = _ahead(s.loc["hilofi_ts"], s.loc[top])
        ahead += z > 1
        matched += z >= -1
        verdict = "ahead" if z > 1 else "matches" if z >= -1 else "behind"
        lines.append(f"- {ds}: hilofi_ts {s.loc['hilofi_ts'].cum_reward:.1f} vs the best rival `{top}` "
                     f"{s.loc[top].cum_reward:.1f} (z = {z:+.2f}): **{verdict}**")
    n = sum("hilofi_ts" in s.index for s in found.values())
    met = n == len(DATASETS) and matched == n and ahead >= 3
    lines.append(f"- HiLoFi-TS matches the best rival on {matched} of {n} data sets, ahead on {ahead} (target: all "
                 f"four, ahead on ≥ 3): **{('MET' if met else 'NOT MET') if full else 'NOT ASSESSED'}**")
    for agent in ("lofi_ts", "lrkf_ts"):
        wins = [ds for ds, s in found.items() if {agent, "linear_ts"} <= set(_valid(s).index)
                and _ahead(s.loc[agent], s.loc["linear_ts"]) > 1]
        lines.append(f"- {agent} ahead of linear_ts on {len(wins)} of these {len(found)} data sets "
                     f"({', '.join(wins) or 'none'}); the target counts MNIST too (the mnist suite): "
                     "at least three of the five.")
    return lines


def write_overview(out: str, tag: str = "headline") -> None:
    """``TAG.md``: the overview over every ``TAG_*_seeds.csv`` present in ``out``."""
    found = summaries(out, tag)
    if not found:
        return
    lines = ["# Headline: default banditkit agents against VW, MABWiser and contextualbandits", "",
             "Cumulative reward over the rounds, mean ± standard error over seeds (Mushroom: +5 per edible mushroom "
             "eaten, −35 or +5 for a poisonous one, 0 for skipping; MovieLens: the ratings; Shuttle and Adult: 1 "
             "per correct class); the best per data set in **bold**.  Every agent is `make_agent(spec, env)` with "
             "nothing else set; every peer is its library's recommended or default setting (**Rows** below).  "
             f"Per data set (commands, machines, timings, references): `{tag}_<dataset>.md`.", ""]
    steps = sorted({int(v) for s in found.values() for v in s["steps"]})
    seeds = sorted({int(v) for s in found.values() for v in s["seeds"]})
    lines += [f"Rounds: {'/'.join(map(str, steps))}; seeds per row: {'/'.join(map(str, seeds))}.", ""]
    refs = {ds: references(out, tag, ds) for ds in found}
    lines += overview_table(found, refs) + ["", "**Rows:**", ""]
    lines += [f"- `{n}`: {describe(n)}." for n in rows_in(found)]
    lines += ["", *targets(found)]
    notes = tables.hand_notes(os.path.join(out, f"{tag}.md"))  # a rewrite (a re-run, --render) keeps the run notes
    lines += ["", *notes] if notes else []
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
