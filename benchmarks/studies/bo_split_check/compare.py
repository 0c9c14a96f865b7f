"""The numbers of the split check: old against new final regret per task × method, and the defaults' ranks.

Both inputs are BO-suite run tables (``bo_runs.csv``: one row per ``task, method, seed`` with ``final_regret``,
lower is better).  Only the seeds present in both tables are compared, so a cell's two means are over the same seeds.

Per cell (:func:`compare`), with ``m`` the mean and ``s = std(ddof=1) / √n`` the standard error over the ``n`` seeds:

    diff = m_new − m_old,    s_diff = √(s_old² + s_new²),    z = diff / s_diff

(``z = 0`` where ``diff = 0``, ``±inf`` where ``s_diff = 0 ≠ diff``; NaN, and no verdict, for a cell with one
seed in common, which has no standard error).  A cell is *worse* when ``z > 1``: the new mean
exceeds the old by more than one standard error of the difference.  With no change in the method and independent
runs, ``P(z > 1) ≈ 0.16`` per cell, so a few flags among dozens of cells are what chance gives; the report states
the expected count next to the observed one.  ``same`` says whether every seed's value is equal to ``1e-9`` relative
(the run re-made bit for bit); ``max_rel`` is the largest per-seed relative difference ``|new − old| / |old|`` (a run
that parts from the old one by rounding alone stays near float32's 1e-7 – 1e-5; a different trajectory gives O(1)).

The issue-55 target (:func:`ranks`): on each task the methods are ranked by their mean final regret over seeds (1 =
lowest, ties averaged); a method's average rank is the mean of its ranks over the tasks.  ``worse_than_random``:
the method's mean final regret is above random search's on that task (``z`` as above, against random).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

KEY = ["task", "method", "seed"]


def _check(runs: pd.DataFrame, name: str) -> pd.DataFrame:
    missing = [c for c in KEY + ["final_regret"] if c not in runs.columns]
    if missing:
        raise ValueError(f"{name}: a BO-suite run table needs the columns {KEY + ['final_regret']}; {missing} "
                         f"missing (columns: {list(runs.columns)})")
    dup = runs.duplicated(KEY)
    if dup.any():
        first = runs[dup].iloc[0]
        raise ValueError(f"{name}: {int(dup.sum())} duplicate task × method × seed row(s), e.g. {first.task} "
                         f"{first.method} seed {first.seed}; keep one row per run")
    return runs.assign(seed=runs["seed"].astype(int))


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """``(mean, std(ddof=1) / √n)``; the standard error of a single value is 0."""
    v = np.asarray(values, np.float64)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0


def z_score(diff: float, s_diff: float) -> float:
    """``diff / s_diff``, with ``0`` for ``diff = 0`` and ``±inf`` for ``s_diff = 0 ≠ diff``."""
    if diff == 0:
        return 0.0
    return diff / s_diff if s_diff > 0 else float(np.copysign(np.inf, diff))


def compare(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """One row per ``(task, method)`` cell present in both tables, on the seeds both have: ``seeds`` (their
    number), ``old_mean, old_se, new_mean, new_se, diff, diff_se, z``, ``worse`` (``z > 1``) and ``same`` (every
    seed's value equal to 1e-9 relative), ``max_rel`` (the largest per-seed relative difference).  Rows in the new
    table's order of tasks and methods."""
    old, new = _check(old, "old table"), _check(new, "new table")
    both = new.merge(old, on=KEY, suffixes=("_new", "_old"))
    rows = []
    for (task, method), g in both.groupby(["task", "method"], sort=False):
        om, os_ = mean_se(g.final_regret_old)
        nm, ns = mean_se(g.final_regret_new)
        diff, s_diff = nm - om, float(np.hypot(os_, ns))
        z = z_score(diff, s_diff) if len(g) > 1 else float("nan")  # one seed: no standard error, no verdict
        same = bool(np.allclose(g.final_regret_new, g.final_regret_old, rtol=1e-9, atol=0.0))
        o, n = g.final_regret_old.to_numpy(np.float64), g.final_regret_new.to_numpy(np.float64)
        rel = np.abs(n - o) / np.maximum(np.abs(o), 1e-300)
        rows.append(dict(task=task, method=method, seeds=len(g), old_mean=om, old_se=os_, new_mean=nm, new_se=ns,
                         diff=diff, diff_se=s_diff, z=z, worse=bool(z > 1), same=same, max_rel=float(rel.max())))
    cols = ["task", "method", "seeds", "old_mean", "old_se", "new_mean", "new_se", "diff", "diff_se", "z", "worse",
            "same", "max_rel"]
    return pd.DataFrame(rows, columns=cols)


def ranks(runs: pd.DataFrame, methods: Sequence[str], baseline: str = "random") -> pd.DataFrame:
    """Per task on which every one of ``methods`` ran: each method's ``mean``, ``se`` and ``rank`` among
    ``methods`` by mean final regret (1 = lowest, ties averaged), and, for every method but ``baseline``,
    ``worse_than_random`` (its mean above ``baseline``'s) with ``z_vs_random``.  Long format: one row per task ×
    method.  The average rank of a method is ``ranks(...).groupby("method").rank.mean()``."""
    if baseline not in methods:
        raise ValueError(f"ranks: the baseline {baseline!r} must be one of the methods {list(methods)}")
    runs = _check(runs, "run table")
    rows = []
    for task, g in runs[runs.method.isin(methods)].groupby("task", sort=False):
        if set(g.method) != set(methods):
            continue
        stats = {m: mean_se(g[g.method == m].final_regret) for m in methods}
        order = pd.Series({m: stats[m][0] for m in methods}).rank(method="average")
        bm, bs = stats[baseline]
        for m in methods:
            mu, s = stats[m]
            rows.append(dict(task=task, method=m, seeds=int((g.method == m).sum()), mean=mu, se=s,
                             rank=float(order[m]),
                             worse_than_random=bool(mu > bm) if m != baseline else False,
                             z_vs_random=z_score(mu - bm, float(np.hypot(s, bs))) if m != baseline else 0.0))
    return pd.DataFrame(rows, columns=["task", "method", "seeds", "mean", "se", "rank", "worse_than_random",
                                       "z_vs_random"])
