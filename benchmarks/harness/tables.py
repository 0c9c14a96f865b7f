"""Tables: per-seed rows, mean ± standard error over seeds, curves, and the Markdown pieces every result file shares.

A bandit experiment's frame (one row per agent × seed × round, ``bk.run``'s) becomes ``TAG_seeds.csv``
(:func:`per_seed`: one row per agent × seed) and ``TAG_curve.csv`` (:func:`curve`: mean ± s.e. at ≤ 200 rounds), and
:func:`summary` / :func:`markdown_table` make the table.  Standard error = ``std(ddof=1) / sqrt(n)`` (:func:`se`).
The Markdown blocks for commands and machines (:func:`commands_md`, :func:`machines_md`), the ranking over tasks
(:func:`avg_ranks`) and the Pareto front (:func:`pareto_mask`, :func:`pareto_front`) are shared by the bandit and the
BO suites; :func:`save_table`, :func:`append_rows` and :func:`hand_notes` by the studies.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from benchmarks.harness import provenance
from benchmarks.harness.options import describe_seeds


def se(values, one: float = 0.0) -> float:
    """Standard error ``std(ddof=1) / sqrt(n)`` (``one``, default 0, for a single value)."""
    v = np.asarray(values, np.float64)
    return float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float(one)


# ---------------------------------------------------------------------------------------------- bandit frames
def per_seed(res, reward_fn: Callable[[pd.DataFrame], pd.Series] | None = None) -> pd.DataFrame:
    """One row per (agent, seed) of a :class:`.run.Result`: ``cum_reward`` (of ``reward_fn(frame)`` if given, else the
    reward column), ``mean_reward``, ``final_regret`` and the agent's timing."""
    df = res.frame
    if df.empty:
        return pd.DataFrame()
    reward = reward_fn(df) if reward_fn is not None else df["reward"]
    df = df.assign(_r=reward)
    g = df.groupby(["agent", "seed"], sort=False)
    n_steps = g["step"].transform("max") + 1
    late = df[df["step"] >= 0.75 * n_steps].groupby(["agent", "seed"], sort=False)["_r"].mean()
    out = pd.DataFrame({
        "cum_reward": g["_r"].sum(),
        "mean_reward": g["_r"].mean(),
        "late_reward": late,
        "final_regret": g["cumulative_regret"].last(),
        "steps": g["step"].count(),
    }).reset_index()
    for col in ("compile_s", "run_s", "per_step_s", "wall_s", "truncated"):
        out[col] = out["agent"].map(lambda a, c=col: res.timing[a].get(c, False))
    # the round by which the runner's health check saw this seed's agent state non-finite (NaN = healthy)
    out["nonfinite_by"] = [res.timing[a].get("nonfinite", {}).get(int(sd), np.nan)
                           for a, sd in zip(out["agent"], out["seed"], strict=True)]
    # which run_agents call made the row: a table pooled by --add-seeds sums its runs' times
    out["run_id"] = out["agent"].map(lambda a: res.timing[a].get("run_id", np.nan))
    return out


def seeds_description(df: pd.DataFrame) -> str:
    """The seeds of a frame with ``agent`` and ``seed`` columns: ``"5 seeds"`` (0..4), ``"2 seeds (3–4)"``, or
    ``"3–5 seeds (per row: see `seeds`)"`` when the agents' seed sets differ."""
    if df.empty:
        return "no seeds"
    sets = {frozenset(int(v) for v in g) for _, g in df.groupby("agent")["seed"]}
    if len(sets) > 1:
        sizes = sorted(len(x) for x in sets)
        return f"{sizes[0]}–{sizes[-1]} seeds (per row: see `seeds`)"
    return describe_seeds(sorted(next(iter(sets))))


def _runs(g: pd.DataFrame) -> pd.DataFrame:
    """One row per run (command) among an agent's seed rows; rows written before ``run_id`` existed are told apart
    by their timing (every seed of one run shares it)."""
    key = (g["run_id"] if "run_id" in g else pd.Series(np.nan, index=g.index)).astype(object)
    earlier = ("earlier:" + g["compile_s"].astype(str) + "/" + g["run_s"].astype(str)).astype(object)
    key = key.where(key.notna(), earlier)
    return g.assign(_run=key).drop_duplicates("_run")


def summary(seeds_df: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Mean ± s.e. over seeds per agent (rows in ``order``)."""
    rows = []
    for agent in order:
        g = seeds_df[seeds_df["agent"] == agent]
        if g.empty:
            continue
        runs = _runs(g)
        rows.append(dict(
            agent=agent, seeds=len(g), steps=int(g["steps"].iloc[0]),
            cum_reward=g["cum_reward"].mean(), cum_reward_se=se(g["cum_reward"]),
            mean_reward=g["mean_reward"].mean(), mean_reward_se=se(g["mean_reward"]),
            late_reward=g["late_reward"].mean() if "late_reward" in g else np.nan,
            late_reward_se=se(g["late_reward"]) if "late_reward" in g else np.nan,
            final_regret=g["final_regret"].mean(), final_regret_se=se(g["final_regret"]),
            # one run: its times; seeds pooled from several runs (--add-seeds): compile per run, run time summed
            compile_s=runs["compile_s"].mean(), run_s=runs["run_s"].sum(), ms_per_step=1e3 * runs["per_step_s"].sum(),
            truncated=bool(g["truncated"].astype(bool).any()) if "truncated" in g else False,
            nonfinite_seeds=int(g["nonfinite_by"].notna().sum()) if "nonfinite_by" in g else 0,
        ))
    return pd.DataFrame(rows).set_index("agent") if rows else pd.DataFrame()


def markdown_table(s: pd.DataFrame, reward_label: str = "cum. reward") -> str:
    head = (f"| agent | seeds | steps | {reward_label} | mean reward / step | mean reward, last 25% of steps | "
            "final cum. regret | compile s | run s (all seeds) | ms / step (all seeds) |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for agent, r in s.iterrows():
        if r.get("truncated", False):
            agent = f"{agent} (truncated: stopped early)"
        if r.get("nonfinite_seeds", 0):
            agent = f"{agent} (**NaN/inf agent state in {int(r.nonfinite_seeds)} seed(s): not a valid result**)"
        lines.append(
            f"| {agent} | {int(r.seeds)} | {int(r.steps)} | {r.cum_reward:.1f} ± {r.cum_reward_se:.1f} | "
            f"{r.mean_reward:.4f} ± {r.mean_reward_se:.4f} | {r.late_reward:.4f} ± {r.late_reward_se:.4f} | "
            f"{r.final_regret:.1f} ± {r.final_regret_se:.1f} | "
            f"{r.compile_s:.1f} | {r.run_s:.1f} | {r.ms_per_step:.2f} |"
        )
    return "\n".join(lines) + "\n"


def with_cum_reward(frame: pd.DataFrame) -> pd.DataFrame:
    """The per-step frame with each (agent, seed)'s running total of reward as ``cum_reward``."""
    return frame.assign(cum_reward=frame.groupby(["agent", "seed"], sort=False)["reward"].cumsum())


def curve(res, points: int = 200) -> pd.DataFrame:
    """Mean ± s.e. over seeds of the cumulative regret and cumulative reward at ≤ ``points`` steps per agent."""
    df = res.frame
    if df.empty:
        return pd.DataFrame()
    df = with_cum_reward(df)
    steps = np.unique(df["step"].to_numpy())
    keep = steps[np.unique(np.linspace(0, len(steps) - 1, min(points, len(steps))).round().astype(int))]
    d = df[df["step"].isin(keep)]
    rows = []
    for (agent, step), g in d.groupby(["agent", "step"], sort=False):
        rows.append(dict(agent=agent, step=int(step), n=len(g),
                         cum_regret=g["cumulative_regret"].mean(), cum_regret_se=se(g["cumulative_regret"]),
                         cum_reward=g["cum_reward"].mean(), cum_reward_se=se(g["cum_reward"])))
    return pd.DataFrame(rows)


def references(env, steps: int, seeds: int | Sequence[int], transform: Callable | None = None) -> str:
    """Markdown line: cumulative reward of the uniform-random policy and of the oracle (best arm every round),
    mean ± s.e. over the same seeds (``0..seeds-1`` or the listed ones), from the env's expected rewards
    (``transform`` maps them, e.g. ``expm1``)."""
    u = env.unwrapped
    rnd, orc = [], []
    for s in (range(seeds) if isinstance(seeds, int) else seeds):
        e = np.asarray(u.functional(s, steps).expected, np.float64)[:steps]
        if transform is not None:
            e = transform(e)
        rnd.append(e.mean(axis=1).sum())
        orc.append(e.max(axis=1).sum())
    return (f"**References** (same seeds and rounds): uniform-random policy {np.mean(rnd):.1f} ± {se(rnd):.1f}; "
            f"oracle (best arm every round) {np.mean(orc):.1f} ± {se(orc):.1f}.")


@dataclass
class Floor:
    """A check from the issue: ``description``, whether it was ``met``, and the measured ``detail``."""

    description: str
    met: bool
    detail: str
    assessed: bool = True  # False: the run was smaller than the floor's protocol (reported as NOT ASSESSED)

    @property
    def status(self) -> str:
        return ("MET" if self.met else "NOT MET") if self.assessed else "NOT ASSESSED"


# ------------------------------------------------------------------------------------- shared Markdown blocks
def commands_md(commands: Sequence[str], how: str = "") -> str:
    """``**Command (this table):** C`` for one command, else ``**Commands (this table, in order{how}):**`` and a
    list; each ``C`` as given (already quoted)."""
    if len(commands) == 1:
        return f"**Command (this table):** {commands[0]}"
    return f"**Commands (this table, in order{how}):**\n\n" + "\n".join(f"- {c}" for c in commands)


def machines_md(machines: Sequence[str]) -> str:
    """``**Machine:** M`` for one machine line, else ``**Machines (per command above):**`` and a list."""
    if len(machines) == 1:
        return f"**Machine:** {machines[0]}"
    return "**Machines (per command above):**\n\n" + "\n".join(f"- {m}" for m in machines)


def preamble(title: str, doc: str) -> list[str]:
    """The opening lines of a study's Markdown table: ``# title``, the command line, the machine and the
    module docstring's second paragraph (its description) on one line, each followed by a blank line."""
    return [f"# {title}", "", f"`{provenance.command_line()}`", "", f"Machine: {provenance.machine()}", "",
            doc.split("\n\n")[1].replace("\n", " "), ""]


def hand_notes(md_path: str) -> list[str]:
    """The hand-written run notes of an existing table ``md_path``: its lines from the first ``**Run note`` to the
    end, trailing blank lines dropped (``[]`` when the file or the notes are absent), for a rewrite to carry over."""
    if not os.path.exists(md_path):
        return []
    with open(md_path) as fh:
        lines = fh.read().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("**Run note")), None)
    notes = lines[first:] if first is not None else []
    while notes and not notes[-1].strip():
        notes.pop()
    return notes


# ---------------------------------------------------------------------------------------------------- files
def save_table(df: pd.DataFrame, lines: Sequence[str], out: str, tag: str) -> None:
    """Write a study's rows to ``out/TAG.csv`` and its Markdown ``lines`` to ``out/TAG.md`` (``out`` made if
    missing)."""
    os.makedirs(out, exist_ok=True)
    df.to_csv(os.path.join(out, f"{tag}.csv"), index=False)
    with open(os.path.join(out, f"{tag}.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def append_csv(path: str, df: pd.DataFrame) -> None:
    """Add rows to a CSV, leaving the rows already there byte for byte (a ``.gz`` one gets a new gzip member, so a
    killed run keeps what it wrote).  A file written with other columns (an older version's) is first rewritten with
    the union of both sets, missing values empty, so one header holds for every row."""
    compression = "gzip" if path.endswith(".gz") else None
    if os.path.exists(path) and list(pd.read_csv(path, nrows=0).columns) != list(df.columns):
        old = pd.read_csv(path)
        old = pd.concat([old, df.iloc[:0]], ignore_index=True)  # the union of columns, old order first
        old.to_csv(path + ".tmp", index=False, compression=compression)
        os.replace(path + ".tmp", path)
        df = df.reindex(columns=old.columns)
    df.to_csv(path, mode="a", header=not os.path.exists(path), index=False, compression=compression)


def append_rows(csv: str, new: pd.DataFrame) -> pd.DataFrame:
    """Append ``new`` to ``csv`` (made if missing; :func:`append_csv`) and return all its rows, read after the
    append: another process of the same study (one per core) may have appended in the meantime."""
    os.makedirs(os.path.dirname(os.path.abspath(csv)), exist_ok=True)
    append_csv(csv, new)
    return pd.read_csv(csv)


# ---------------------------------------------------------------------------------- ranks and Pareto fronts
def avg_ranks(mean: pd.Series, tasks: list[str], methods: list[str]) -> dict[str, list[float]]:
    """Per method, its rank (1 = lowest mean, ties averaged) on each of ``tasks`` among those of ``methods`` run
    there; ``mean`` is indexed by (task, method)."""
    ranks: dict[str, list[float]] = {}
    for t in tasks:
        s = pd.Series({m: mean.get((t, m), np.nan) for m in methods}).dropna().rank()
        for m, r in s.items():
            ranks.setdefault(m, []).append(r)
    return ranks


def pareto_mask(cost, loss) -> np.ndarray:
    """``True`` where no other point is no worse in both ``cost`` and ``loss`` (both lower-is-better) and better in
    one."""
    cost, loss = np.asarray(cost, np.float64), np.asarray(loss, np.float64)
    keep = np.ones(len(cost), bool)
    for i in range(len(cost)):
        better = (cost <= cost[i]) & (loss <= loss[i]) & ((cost < cost[i]) | (loss < loss[i]))
        keep[i] = not better.any()
    return keep


def pareto_front(cost: pd.Series, loss: pd.Series) -> list[str]:
    """The names (index) on the Pareto front of (cost, loss), both lower-is-better, ordered by cost."""
    names = list(cost.index)
    keep = pareto_mask(cost.to_numpy(), loss.reindex(cost.index).to_numpy())
    return sorted([n for n, k in zip(names, keep, strict=True) if k], key=lambda m: (cost[m], loss[m]))
