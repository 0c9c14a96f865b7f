"""An existing table and a new run: ``--merge``, ``--add-seeds``, ``--render`` and ``--check``.

* ``--merge`` re-runs the named agents of a table and keeps the others (their rows in ``TAG_seeds.csv`` /
  ``TAG_curve.csv``, their commands and machine lines, the hand-written run notes): :func:`merge_previous`.
* ``--add-seeds`` pools new seeds with an agent's old ones: seed rows concatenated, the curve's mean ± s.e. combined
  exactly (:func:`pool_curves`); a seed an agent already has, or other ``--steps``, is refused before the run starts
  (:func:`check_add_seeds`).
* ``--render`` runs nothing and rewrites the table from its CSVs (``report.write_outputs`` with an empty result).
* ``--check ROUNDS`` re-makes the start of every agent's rows and compares it with the committed curve, writing
  nothing (:func:`check_against_table`); the command's exit status is :func:`check_exit_status`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchmarks.harness.options import CHECK
from benchmarks.harness.provenance import command_line
from benchmarks.harness.tables import hand_notes, with_cum_reward


def check_against_table(res, out: str, tag: str) -> pd.DataFrame:
    """``--check``: compare each agent's re-made start with the committed ``out/TAG_curve.csv``.

    For every point ``s`` of the committed curve with ``s`` < the rounds re-made, the mean over seeds of the
    cumulative reward and of the cumulative regret at ``s`` must equal the committed ones (to 1e-9 relative: the
    CSV's decimal rounding).  The verdict per agent is printed and returned (``agent``, ``verdict``,
    ``points``, ``first_step_differing``); a differing agent is recorded, and :func:`check_exit_status` is then 1.
    An agent missing from the table, or whose table rows pool another number of seeds, is ``not comparable``."""
    path = os.path.join(out, f"{tag}_curve.csv")
    if not os.path.exists(path):
        raise SystemExit(f"--check: no committed {path} to compare with (give the table's folder as --out)")
    table = pd.read_csv(path)
    df = with_cum_reward(res.frame)
    rows = []
    for agent in res.timing:
        g = df[df["agent"] == agent]
        seeds, done = g["seed"].nunique(), int(g["step"].max()) + 1
        t = table[(table["agent"] == agent) & (table["step"] < done)]
        mean = g.groupby("step")[["cum_reward", "cumulative_regret"]].mean()
        row = dict(agent=agent, points=len(t), first_step_differing=None)
        if t.empty or int(t["n"].max()) != seeds:
            why = "not in the table" if t.empty else f"the table pools {int(t['n'].max())} seeds, this run {seeds}"
            row["verdict"] = f"not comparable ({why})"
        else:
            new = mean.loc[t["step"].to_numpy()]
            same = (np.isclose(new["cum_reward"].to_numpy(), t["cum_reward"].to_numpy(), rtol=1e-9, atol=1e-9)
                    & np.isclose(new["cumulative_regret"].to_numpy(), t["cum_regret"].to_numpy(), rtol=1e-9,
                                 atol=1e-9))
            if same.all():
                row["verdict"] = f"re-made: {len(t)} points up to round {int(t['step'].max()) + 1} equal"
            else:
                row["first_step_differing"] = int(t["step"].to_numpy()[~same][0])
                row["verdict"] = f"DIFFERS from round {row['first_step_differing'] + 1}"
                CHECK["differs"].append(f"{tag}: {agent}")
        rows.append(row)
        print(f"[check {tag}] {agent}: {row['verdict']}", flush=True)
    return pd.DataFrame(rows)


def check_exit_status() -> int:
    """1 where a ``--check`` found an agent whose rows differ from its committed table, else 0."""
    if CHECK["differs"]:
        print("--check: rows not re-made by this code: " + "; ".join(CHECK["differs"]), flush=True)
        return 1
    return 0


def check_add_seeds(out: str, tag: str, agents: Sequence[str], seeds: Sequence[int], steps: int) -> None:
    """Refuse (``SystemExit``) an ``--add-seeds`` run whose seeds an agent of table ``TAG`` already has, or whose
    ``steps`` differ from that agent's rows — before it spends any time."""
    path = os.path.join(out, f"{tag}_seeds.csv")
    if not os.path.exists(path):
        return
    old = pd.read_csv(path)
    for agent in agents:
        g = old[old["agent"] == agent]
        both = sorted(set(g["seed"].astype(int)) & set(seeds))
        if both:
            raise SystemExit(f"--add-seeds: {agent!r} in {path} already has seed(s) {both}; pick new ones with "
                             f"--first-seed {int(g['seed'].max()) + 1} (or drop --add-seeds to re-run it)")
        if len(g) and int(g["steps"].max()) != steps:
            raise SystemExit(f"--add-seeds: {agent!r} in {path} ran {int(g['steps'].max())} rounds, this run "
                             f"{steps}; pooled seeds need the same --steps")


def pool_curves(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One agent's curve (columns ``step, n, X, X_se`` for ``X`` in cum_regret, cum_reward) over the seeds of two
    disjoint sets, from each set's count, mean and standard error: with ``v = se² n`` (the sample variance),
    ``mean = (n₁m₁ + n₂m₂)/n`` and ``v = ((n₁-1)v₁ + (n₂-1)v₂ + n₁n₂/n·(m₁-m₂)²)/(n-1)``, ``n = n₁ + n₂``."""
    if list(a["step"]) != list(b["step"]):
        raise ValueError("the two curves were recorded at different steps (different --steps?); cannot pool them")
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    n1, n2 = a["n"].to_numpy(np.float64), b["n"].to_numpy(np.float64)
    n = n1 + n2
    out = a.copy()
    out["n"] = n.astype(int)
    for col in ("cum_regret", "cum_reward"):
        m1, m2 = a[col].to_numpy(np.float64), b[col].to_numpy(np.float64)
        v1, v2 = a[f"{col}_se"].to_numpy(np.float64) ** 2 * n1, b[f"{col}_se"].to_numpy(np.float64) ** 2 * n2
        var = ((n1 - 1) * v1 + (n2 - 1) * v2 + n1 * n2 / n * (m1 - m2) ** 2) / np.maximum(n - 1, 1)
        out[col] = (n1 * m1 + n2 * m2) / n
        out[f"{col}_se"] = np.sqrt(np.maximum(var, 0.0) / n)
    return out


_BEFORE_RUN: dict[tuple, tuple[pd.DataFrame, pd.DataFrame]] = {}


def previous_provenance(md_path: str) -> tuple[list[str], list[str]]:
    """The commands and machine lines of an existing table (one each, or the lists of a merged one)."""
    cmds: list[str] = []
    machines: list[str] = []
    if not os.path.exists(md_path):
        return cmds, machines
    with open(md_path) as fh:
        lines = fh.read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("**Command (this table):**"):
            cmds.append(line.split(":**", 1)[1].strip())
        elif line.startswith("**Machine:**"):
            machines.append(line.split(":**", 1)[1].strip())
        elif line.startswith(("**Commands (this table", "**Machines (per command")):
            block = cmds if line.startswith("**Commands") else machines
            for item in lines[i + 2:]:
                if not item.startswith("- "):
                    break
                block.append(item[2:])
    return cmds, machines


def merge_previous(out: str, tag: str, seeds_df: pd.DataFrame, cur: pd.DataFrame, order: list[str],
                   add_seeds: bool = False):
    """The existing table's agents not re-run now, merged with this run's (see ``write_outputs(merge=True)``);
    with ``add_seeds`` the agents run now keep their old seeds too (pooled).  A run writes its table after every
    agent: with ``add_seeds`` the table as it was before the run's first write is kept (per run) and pooled with
    again, so the later writes do not pool this run's seeds twice.  Returns ``(seeds, curve, order, commands,
    machines, run notes)``."""
    runs = tuple(sorted(map(str, seeds_df["run_id"].unique()))) if "run_id" in seeds_df else ()
    key = (os.path.abspath(out), tag, runs)
    if add_seeds and key in _BEFORE_RUN:
        old_seeds, old_curve = _BEFORE_RUN[key]
    else:
        old_seeds = pd.read_csv(os.path.join(out, f"{tag}_seeds.csv"))
        old_curve = pd.read_csv(os.path.join(out, f"{tag}_curve.csv"))
        if add_seeds:
            _BEFORE_RUN[key] = (old_seeds, old_curve)
    new = set(seeds_df["agent"]) if not seeds_df.empty else set()
    merged_order = list(dict.fromkeys(old_seeds["agent"]))
    merged_order += [a for a in order if a not in merged_order]
    if add_seeds:
        pooled = []
        for agent in sorted(new & set(old_seeds["agent"])):
            o, n = old_seeds[old_seeds["agent"] == agent], seeds_df[seeds_df["agent"] == agent]
            if set(o["seed"]) & set(n["seed"]) or int(o["steps"].max()) != int(n["steps"].max()):
                raise ValueError(f"--add-seeds: {agent!r} has old rows with this run's seeds or other steps "
                                 f"(old seeds {sorted(o['seed'])}, {int(o['steps'].max())} steps; new "
                                 f"{sorted(n['seed'])}, {int(n['steps'].max())})")
            pooled.append(pool_curves(old_curve[old_curve["agent"] == agent], cur[cur["agent"] == agent]))
        done = {p["agent"].iloc[0] for p in pooled}
        seeds_df = pd.concat([old_seeds[~old_seeds["agent"].isin(new - done)], seeds_df], ignore_index=True)
        cur = pd.concat([old_curve[~old_curve["agent"].isin(new)], cur[~cur["agent"].isin(done)], *pooled],
                        ignore_index=True)
    else:
        seeds_df = pd.concat([old_seeds[~old_seeds["agent"].isin(new)], seeds_df], ignore_index=True)
        cur = pd.concat([old_curve[~old_curve["agent"].isin(new)], cur], ignore_index=True)
    rank = {a: i for i, a in enumerate(merged_order)}
    seeds_df = seeds_df.sort_values("agent", key=lambda c: c.map(rank), kind="stable").reset_index(drop=True)
    cur = cur.sort_values("agent", key=lambda c: c.map(rank), kind="stable").reset_index(drop=True)
    if "nonfinite_by" not in seeds_df:
        seeds_df["nonfinite_by"] = np.nan
    md_path = os.path.join(out, f"{tag}.md")
    run_notes = hand_notes(md_path)
    cmds, machines = previous_provenance(md_path)
    if len(machines) == len(cmds):  # drop this command's own earlier write (tables are rewritten after each agent)
        pairs = [(c, m) for c, m in zip(cmds, machines, strict=True) if not c.startswith(f"`{command_line()}`")]
        cmds, machines = [c for c, _ in pairs], [m for _, m in pairs]
    return seeds_df, cur, merged_order, cmds, machines, run_notes
