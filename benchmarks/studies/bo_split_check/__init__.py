"""Issue 53 / 55: the continuous BO suite re-run after ``bo/optimizer.py`` was split, against its committed rows.

Old: the BO suite's committed ``benchmarks/results/bo_runs.csv`` (made before the split).  New: the same suite
(``python -m benchmarks bo``), same tasks, methods and seeds, re-run from a clean checkout of the code after the split
into separate ``--out`` folders, merged here (``--merge``) into ``results/bo_split_runs.csv``.  Per task × method: the
mean ± s.e. of the final simple regret over the seeds both tables have, ``z`` of the difference and a flag where the
new mean is worse beyond one standard error (:mod:`.compare`); and the issue-55 target, ``BayesOpt(bounds)`` with
nothing else set (the suite's ``default`` row) against Optuna TPE and random search: its rank per task by mean final
regret among the three, the average over the tasks, and any task where it is worse than random.  ``--probe`` re-makes
one new run's first queries with another checkout's ``banditkit`` (:mod:`.probe`; e.g. the code before the split)
and records where they part.

Every task is a synthetic test function (Branin, Hartmann6, Ackley in 2–50 dimensions, DrawNN: a randomly drawn
network): no real data.

Usage::

    python -m benchmarks study bo_split_check --merge /tmp/bo_rerun/a,/tmp/bo_rerun/b   # collect the runs, render
    python -m benchmarks study bo_split_check --probe ackley2,hilofi_ts,1,40 --tree /tmp/bo_old   # old code's queries
    python -m benchmarks study bo_split_check                                             # re-render
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd

from benchmarks.harness import options
from benchmarks.harness.provenance import PROG
from benchmarks.studies.bo_split_check.compare import compare, ranks
from benchmarks.suites.bo import METHODS, TASKS

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OLD = os.path.join(ROOT, "benchmarks", "results", "bo_runs.csv")
# issue 55: BayesOpt(bounds) against Optuna TPE (and every tpe_* variant of the new table in tpe's place), no task
# worse than random
TARGET = ["default", "tpe", "random"]


# ------------------------------------------------------------------------------------------------ collecting
def parse_folder(entry: str) -> tuple[str, dict[str, str]]:
    """``DIR`` or ``DIR:OLD=NEW[+OLD=NEW...]`` (one ``--merge`` entry) → ``(DIR, {OLD: NEW})``: the folder, and the
    methods whose rows are renamed as they are read (e.g. ``/tmp/bo_rerun/a:tpe=tpe_optuna4.9``, the same peer run
    with another version)."""
    folder, _, spec = entry.partition(":")
    renames = {}
    for pair in filter(None, spec.split("+")):
        old, eq, new = pair.partition("=")
        if not (eq and old.strip() and new.strip()):
            raise SystemExit(f"--merge: {entry!r}: a rename is METHOD=NEW_NAME (several joined by '+'), got {pair!r}")
        renames[old.strip()] = new.strip()
    return folder.strip(), renames


def merge_runs(entries: list[str]) -> tuple[pd.DataFrame, list[str], list[str], pd.DataFrame]:
    """The BO-suite output folders' ``bo_runs.csv`` rows (concatenated, methods renamed as each entry says:
    :func:`parse_folder`), commands (``bo_command.txt``), machine lines (``bo_machine.csv``, with the load average
    after each command) and per-query rows (``bo_iters.csv.gz``: ``task, method, seed, iter, regret, y``).  An error
    names a folder without runs, and a task × method × seed run found twice with different final regrets (found
    twice with the same one, e.g. random search re-run, it is kept once)."""
    runs, commands, machines, iters = [], [], [], []
    for entry in entries:
        folder, renames = parse_folder(entry)
        path = os.path.join(folder, "bo_runs.csv")
        if not os.path.exists(path):
            raise SystemExit(f"--merge: {path} does not exist; give the --out folders of `{PROG} bo` runs")
        df = pd.read_csv(path)
        runs.append(df.assign(method=df.method.replace(renames)))
        its = os.path.join(folder, "bo_iters.csv.gz")
        if os.path.exists(its):
            it = pd.read_csv(its)[["task", "method", "seed", "iter", "regret", "y"]]
            iters.append(it.assign(method=it.method.replace(renames)))
        note = f" (rows renamed: {', '.join(f'{a} → {b}' for a, b in renames.items())})" if renames else ""
        cmd = os.path.join(folder, "bo_command.txt")
        if os.path.exists(cmd):
            with open(cmd) as fh:
                commands += [ln.strip() + note for ln in fh if ln.strip()]
        mach = os.path.join(folder, "bo_machine.csv")
        if os.path.exists(mach):
            m = pd.read_csv(mach)
            machines += [f"{r.machine}; load average at the end {r.load_average:.1f}" for r in m.itertuples()]
    df = pd.concat(runs, ignore_index=True)
    key = ["task", "method", "seed"]
    twice = df[df.duplicated(key, keep=False)]
    for (task, method, seed), g in twice.groupby(key):
        if g.final_regret.nunique() > 1:
            raise SystemExit(f"--merge: the run {task} {method} seed {seed} is there twice with different results; "
                             "each run must come from one folder (rename one folder's method: DIR:METHOD=NEW_NAME)")
    # a run made twice with the same result (random search, TPE: deterministic) is kept once
    its = pd.concat(iters, ignore_index=True).drop_duplicates(key + ["iter"]) if iters else pd.DataFrame()
    return df.drop_duplicates(key).reset_index(drop=True), commands, machines, its


# ------------------------------------------------------------------------------------------------------ probe
def probe(tree: str, label: str, run: str, iters: pd.DataFrame, old: pd.DataFrame) -> dict:
    """Run :mod:`.probe` (``run`` = ``TASK,METHOD,SEED,K``) with ``tree``'s banditkit and compare its queried values
    with the new run's (``iters``, the merged ``bo_iters``): the first query where they differ (``None``: none of
    the ``K``), both best values, and the committed run's final regret (``old``)."""
    import subprocess
    import sys

    try:
        task, method, seed, k = run.split(",")
        seed_i, k_i = int(seed), int(k)
    except ValueError:
        raise SystemExit(f"--probe takes TASK,METHOD,SEED,K, e.g. branin,hilofi_ts,2,40; got {run!r}") from None
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
    out = subprocess.run([sys.executable, script, tree, task, method, str(seed_i), str(k_i)], capture_output=True,
                         text=True, check=False)
    if out.returncode:
        raise SystemExit(f"--probe: {script} failed:\n{out.stderr[-2000:]}")
    ys = np.array([float(line.split("y=")[1]) for line in out.stdout.splitlines() if "y=" in line])
    new = iters[(iters.task == task) & (iters.method == method) & (iters.seed == seed_i)].sort_values("iter")
    if len(new) < len(ys):
        raise SystemExit(f"--probe: the new runs hold {len(new)} queries of {task} {method} seed {seed_i}, fewer than "
                         f"K = {len(ys)}")
    y_new = new.y.to_numpy()[: len(ys)]
    differ = np.flatnonzero(~np.isclose(ys, y_new, rtol=1e-9, atol=0.0))
    committed = old[(old.task == task) & (old.method == method) & (old.seed == seed_i)].final_regret
    return dict(task=task, method=method, seed=seed_i, queries=len(ys), code=label,
                first_differing_query=int(differ[0]) + 1 if len(differ) else None,
                probe_best_y=float(ys.min()), new_run_best_y=float(y_new.min()),
                new_run_final_regret=float(new.regret.iloc[-1]) if len(new) == len(ys) else np.nan,
                committed_final_regret=float(committed.iloc[0]) if len(committed) else np.nan)


def probe_md(pr: pd.DataFrame) -> list[str]:
    """The probes' table: another checkout's code against the new run, query by query."""
    lines = ["## Probe: the code before the split, on this machine, against the new run (same seed, query by query)",
             "", "| task | method | seed | code probed | queries compared | first differing query | best y: probe / "
             "new run | final regret: new run / committed row |", "|---|---|---|---|---|---|---|---|"]
    for r in pr.itertuples():
        first = "none (all equal)" if pd.isna(r.first_differing_query) else str(int(r.first_differing_query))
        lines.append(f"| {r.task} | {r.method} | {r.seed} | {r.code} | {r.queries} | {first} | "
                     f"{r.probe_best_y:.10g} / {r.new_run_best_y:.10g} | {r.new_run_final_regret:.4g} / "
                     f"{r.committed_final_regret:.4g} |")
    return lines


# ---------------------------------------------------------------------------------------------------- report
def _pm(mean: float, se: float) -> str:
    return f"{mean:.4g} ± {se:.2g}"


def _z(z: float) -> str:
    if np.isnan(z):
        return "n/a (1 seed)"
    return "inf" if np.isinf(z) else f"{z:+.2f}"


def comparison_md(cmp: pd.DataFrame) -> list[str]:
    """The old-against-new table and its summary (observed flags against the count chance gives)."""
    lines = ["## Old against new: final simple regret (mean ± s.e. over the same seeds; lower is better)", "",
             "| task | method | seeds | old | new | new − old | z | worse beyond 1 s.e. | largest per-seed relative "
             "difference |", "|---|---|---|---|---|---|---|---|---|"]
    for r in cmp.itertuples():
        lines.append(f"| {r.task} | {r.method} | {r.seeds} | {_pm(r.old_mean, r.old_se)} | "
                     f"{_pm(r.new_mean, r.new_se)} | {r.diff:+.3g} | {_z(r.z)} | {'**WORSE**' if r.worse else ''} | "
                     f"{'0 (re-made)' if r.same else f'{r.max_rel:.1g}'} |")
    n, worse, z2 = len(cmp), int(cmp.worse.sum()), int((cmp.z > 2).sum())
    better = int((cmp.z < -1).sum())
    judged = int((~cmp.same & cmp.z.notna()).sum())  # cells not re-made exactly, with a standard error
    expected = 0.1587 * judged
    lines += ["", f"**Summary.** {n} cells; {int(cmp.same.sum())} re-made bit for bit; **{worse} worse beyond one "
              f"s.e.** (z > 1; {z2} beyond two), {better} better beyond one s.e. (z < −1).  With no change of method "
              f"and independent runs, z > 1 happens in ≈ 16% of the cells that are not re-made exactly "
              f"with two or more seeds (≈ {expected:.1f} of {judged} here), and so does z < −1."]
    if worse:
        lines += ["", "Worse beyond one s.e.: " + "; ".join(f"{r.task} {r.method} (z {_z(r.z)})"
                                                             for r in cmp[cmp.worse].itertuples()) + "."]
    return lines


def target_md(rk: pd.DataFrame, methods: list[str]) -> list[str]:
    """The issue-55 table for ``methods = [ours, a TPE, "random"]``: per task their mean ± s.e. and rank, the
    verdict."""
    ours, tpe = methods[0], methods[1]
    head = f"## Issue 55 target: `BayesOpt(bounds)` with nothing else set (`{ours}`) against `{tpe}` and random"
    if rk.empty:
        return [head, "", f"Not assessed: no task where all of {methods} ran."]
    tasks = list(dict.fromkeys(rk.task))
    lines = [head, "",
             "Rank per task by mean final regret over the seeds among these three methods (1 = best, ties averaged).",
             "", "| task | " + " | ".join(f"{m} (rank)" for m in methods) + f" | {ours} worse than random |",
             "|---" * (len(methods) + 2) + "|"]
    for t in tasks:
        g = rk[rk.task == t].set_index("method")
        worse = f"**yes** (z {_z(g.loc[ours, 'z_vs_random'])})" if g.loc[ours, "worse_than_random"] else "no"
        lines.append(f"| {t} | " + " | ".join(f"{_pm(g.loc[m, 'mean'], g.loc[m, 'se'])} ({g.loc[m, 'rank']:g})"
                                               for m in methods) + f" | {worse} |")
    avg = rk.groupby("method")["rank"].mean()
    lines.append(f"| **average rank** ({len(tasks)} tasks) | " + " | ".join(f"**{avg[m]:.2f}**" for m in methods)
                 + " | |")
    bad = [t for t in tasks if rk[(rk.task == t) & (rk.method == ours)].worse_than_random.iloc[0]]
    met = avg[ours] < avg[tpe] and not bad
    lines += ["", f"**Target** (ahead of `{tpe}` in average rank, no task worse than random): "
              f"{'MET' if met else 'NOT MET'} — average rank {avg[ours]:.2f} against {avg[tpe]:.2f}; worse than "
              f"random on {', '.join(bad) if bad else 'no task'}."]
    return lines


def all_ranks_md(new: pd.DataFrame) -> list[str]:
    """Context: the average rank of every method of the new runs over the tasks where all of them ran."""
    n_tasks = new.task.nunique()
    methods = [m for m, g in new.groupby("method", sort=False) if g.task.nunique() == n_tasks]
    if "random" not in methods:
        return []
    rk = ranks(new, methods)
    if rk.empty:
        return []
    avg = rk.groupby("method")["rank"].mean().sort_values()
    left = sorted(set(new.method) - set(methods))
    return ["", f"Context: average rank over all {n_tasks} tasks among the {len(methods)} methods of the new runs "
            f"that ran on every one (by mean final regret; seeds as in the table above): "
            + ", ".join(f"{m} {r:.2f}" for m, r in avg.items())
            + (f"; not ranked (not run on every task): {', '.join(left)}." if left else ".")]


def ordered(cmp: pd.DataFrame) -> pd.DataFrame:
    """``cmp`` sorted by the BO suite's order of tasks and methods (others after them, in their order)."""
    task_at = {t: i for i, t in enumerate(TASKS)}
    method_at = {m: i for i, m in enumerate(METHODS)}
    key = [(task_at.get(t, len(task_at)), method_at.get(m, len(method_at))) for t, m in zip(cmp.task, cmp.method,
                                                                                            strict=True)]
    return cmp.iloc[sorted(range(len(cmp)), key=lambda i: key[i])].reset_index(drop=True)


def render(old: pd.DataFrame, new: pd.DataFrame, command: str, provenance: list[str],
           probes: pd.DataFrame | None = None) -> tuple[pd.DataFrame, str]:
    """``(comparison table, Markdown)`` of the old and new run tables (and the ``--probe`` rows, if any)."""
    cmp = ordered(compare(old, new))
    lines = ["# BO suite after the split of `bo/optimizer.py`: old against new, and the defaults against TPE", "",
             f"**Command (this file):** `{command}`", "",
             "Old: `benchmarks/results/bo_runs.csv` as committed (its commands: `benchmarks/results/bo_command.txt`). "
             "New: `bo_split_runs.csv` here.  All tasks are synthetic test functions (no real data).", ""]
    lines += provenance + [""] + comparison_md(cmp)
    if probes is not None and len(probes):
        lines += [""] + probe_md(probes)
    ours, *rest = TARGET
    for tpe in ["tpe"] + sorted(m for m in set(new.method) if m.startswith("tpe_")):
        methods = [ours, tpe, *rest[1:]]
        have = all(m in set(new.method) for m in methods)
        lines += [""] + target_md(ranks(new, methods) if have else pd.DataFrame(), methods)
    lines += all_ranks_md(new)
    return cmp, "\n".join(lines) + "\n"


def provenance_md(commands: list[str], machines: list[str]) -> list[str]:
    return (["**New runs' commands:**", ""] + [f"- `{c}`" for c in commands] + ["", "**New runs' machines:**", ""]
            + [f"- {m}" for m in dict.fromkeys(machines)])


# ------------------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog=f"{PROG} study bo_split_check", description=__doc__.split("\n")[0])
    p.add_argument("--old", default=OLD, help="the committed run table (default: benchmarks/results/bo_runs.csv)")
    p.add_argument("--new", default=os.path.join(HERE, "bo_split_runs.csv"), help="the re-run's table")
    p.add_argument("--merge", default="",
                   help="comma list of `bo --out` folders, each DIR or DIR:METHOD=NEW_NAME[+...] (its rows of METHOD "
                        "renamed): their bo_runs.csv become --new (their commands and machine lines NEW's "
                        ".provenance.md) before rendering")
    p.add_argument("--out", default=HERE, help="where bo_split_check.md and bo_split_check.csv go")
    p.add_argument("--probe", default="", metavar="TASK,METHOD,SEED,K",
                   help="re-make one new run's first K queries with the banditkit of --tree (probe.py) and add the "
                        "comparison to NEW's _probe.csv (needs NEW's _iters.csv.gz, written by --merge)")
    p.add_argument("--tree", default="", help="--probe: a folder holding the banditkit/ to probe")
    p.add_argument("--tree-label", default="", help="--probe: how the table names --tree's code (e.g. its commit)")
    options.add_blas_threads(p)
    args = p.parse_args(argv)
    options.apply_blas_threads(args.blas_threads)
    stem = os.path.splitext(args.new)[0]
    prov_path, iters_path, probe_path = stem + ".provenance.md", stem + "_iters.csv.gz", stem + "_probe.csv"
    if args.merge:
        new, commands, machines, iters = merge_runs([f for f in args.merge.split(",") if f.strip()])
        os.makedirs(os.path.dirname(os.path.abspath(args.new)), exist_ok=True)
        new.to_csv(args.new, index=False)
        iters.to_csv(iters_path, index=False, compression="gzip")
        with open(prov_path, "w") as fh:
            fh.write("\n".join(provenance_md(commands, machines)) + "\n")
    for path in (args.old, args.new):
        if not os.path.exists(path):
            raise SystemExit(f"{path} does not exist; run the BO suite and collect its runs with --merge (see "
                             "benchmarks/studies/bo_split_check/README.md)")
    if args.probe:
        if not (args.tree and os.path.exists(iters_path)):
            raise SystemExit(f"--probe needs --tree and {iters_path} (made by --merge)")
        row = probe(args.tree, args.tree_label or args.tree, args.probe, pd.read_csv(iters_path), pd.read_csv(args.old))
        row["command"] = (f"{PROG} study bo_split_check --probe {args.probe} --tree {args.tree}"
                          + (f" --tree-label '{args.tree_label}'" if args.tree_label else ""))
        pr = pd.read_csv(probe_path) if os.path.exists(probe_path) else pd.DataFrame()
        pd.concat([pr, pd.DataFrame([row])], ignore_index=True).to_csv(probe_path, index=False)
    prov = []
    if os.path.exists(prov_path):
        with open(prov_path) as fh:
            prov = fh.read().rstrip("\n").split("\n")
    shown = ["--old", os.path.relpath(args.old, ROOT)] if args.old != OLD else []
    command = " ".join([f"{PROG} study bo_split_check", *shown] +
                       (["--merge", args.merge] if args.merge else []))
    probes = pd.read_csv(probe_path) if os.path.exists(probe_path) else None
    cmp, md = render(pd.read_csv(args.old), pd.read_csv(args.new), command, prov, probes)
    os.makedirs(args.out, exist_ok=True)
    cmp.to_csv(os.path.join(args.out, "bo_split_check.csv"), index=False)
    with open(os.path.join(args.out, "bo_split_check.md"), "w") as fh:
        fh.write(md)
    print(f"wrote {os.path.join(args.out, 'bo_split_check.md')}")


if __name__ == "__main__":
    main()
