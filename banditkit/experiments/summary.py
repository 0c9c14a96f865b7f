"""``summarize(df)``: one row per agent from a run/compare DataFrame (bandit or BO).

Bandit frames (``cumulative_regret`` column): final cumulative regret per seed → mean and standard error
(``std(ddof=1) / √n``, 0 for one seed), mean reward over all rounds and seeds, and the wall time per step
(``df.attrs["timing"]``; execution only, compilation reported separately).
BO frames (``simple_regret`` / ``best_y`` columns): final simple regret and best value per seed → mean ± s.e.
A frame with a ``synthetic`` column (every run frame) keeps it per row: True when any of the group's rows ran on
generated data (``env.unwrapped.synthetic``); :func:`synthetic_note` says so in words.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _mean_se(values: pd.Series) -> tuple[float, float]:
    v = np.asarray(values, np.float64)
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0
    return float(np.mean(v)), se


def summarize(df: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Per-agent table (index ``agent``), sorted by the headline metric (lower regret first).

    ``by``: more columns to group by, after ``agent`` (the index becomes ``agent, *by``); default: the frame's
    ``attrs["sweep_axes"]`` (a :func:`banditkit.sweep` frame: one row per agent and grid point), else none.

    Bandit columns: ``final_cumulative_regret``, ``final_cumulative_regret_se``, ``mean_reward``, ``seeds``,
    ``steps``, ``ms_per_step``, ``compile_s``.  BO columns: ``final_simple_regret`` (± ``_se``), ``best_y``
    (± ``_se``), ``seeds``, ``steps``.  Both: ``synthetic`` (bool) last when the frame has that column.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"summarize expects the DataFrame returned by run/compare, got {type(df).__name__}")
    if "agent" not in df.columns or "seed" not in df.columns or "step" not in df.columns:
        raise ValueError("summarize needs the columns agent, seed, step (the frame returned by run/compare)")
    timing = df.attrs.get("timing", {}) if hasattr(df, "attrs") else {}
    rows = []
    bo = "simple_regret" in df.columns and "cumulative_regret" not in df.columns
    axes = [c for c in (df.attrs.get("sweep_axes", []) if by is None else by) if c in df.columns]
    if by is not None and len(axes) != len(by):
        raise ValueError(f"summarize(by={by}): the frame has no column(s) {sorted(set(by) - set(axes))}")
    for key, g in df.groupby(["agent", *axes], sort=False, dropna=False):
        agent = key[0]
        last = g.sort_values("step").groupby("seed").tail(1)
        row = {"agent": agent} | dict(zip(axes, key[1:], strict=True))
        row |= {"seeds": int(g["seed"].nunique()), "steps": int(g["step"].nunique())}
        if bo:
            row["final_simple_regret"], row["final_simple_regret_se"] = _mean_se(last["simple_regret"])
            if "best_y" in g.columns:
                row["best_y"], row["best_y_se"] = _mean_se(last["best_y"])
        else:
            if "cumulative_regret" not in g.columns:
                raise ValueError("summarize needs a cumulative_regret (bandit) or simple_regret (BO) column")
            row["final_cumulative_regret"], row["final_cumulative_regret_se"] = _mean_se(last["cumulative_regret"])
            row["mean_reward"] = float(g["reward"].mean()) if "reward" in g.columns else np.nan
            t = timing.get(agent, {})
            row["ms_per_step"] = 1e3 * t["per_step_s"] if "per_step_s" in t else np.nan
            row["compile_s"] = t.get("compile_s", np.nan)
        if "synthetic" in g.columns:
            row["synthetic"] = bool(g["synthetic"].fillna(False).astype(bool).any())
        rows.append(row)
    out = pd.DataFrame(rows).set_index(["agent", *axes])
    key = "final_simple_regret" if bo else "final_cumulative_regret"
    return out.sort_values(key, kind="stable")


def synthetic_note(summary: pd.DataFrame) -> str | None:
    """A line naming the rows of a :func:`summarize` table that ran on synthetic data (generated problems or
    look-alikes of data sets the user did not supply), or ``None`` when none did (or the table does not say)."""
    if "synthetic" not in summary.columns or not summary["synthetic"].any():
        return None
    rows = [", ".join(map(str, k)) if isinstance(k, tuple) else str(k) for k in summary.index[summary["synthetic"]]]
    which = "every row" if len(rows) == len(summary) else ", ".join(rows)
    return f"data: synthetic (env.unwrapped.synthetic; generated, not a real data set) for {which}"


def _fmt(v, digits: int) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    v = float(v)
    if not np.isfinite(v):
        return "—"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if abs(v) >= 10**digits:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def to_markdown(summary: pd.DataFrame, digits: int = 3) -> str:
    """The summary as a Markdown table with ``mean ± se`` cells (no extra dependency; a row of one seed shows the
    mean alone: it has no standard error).  The ``synthetic`` column is shown (``yes`` / ``no``) only when some row
    ran on synthetic data."""
    cols = [c for c in summary.columns if not c.endswith("_se")]
    if "synthetic" in cols and not summary["synthetic"].any():
        cols.remove("synthetic")
    keys = [str(n) for n in summary.index.names] if summary.index.nlevels > 1 else ["agent"]

    def one_seed(row) -> bool:
        return "seeds" in summary.columns and summary.at[row, "seeds"] == 1

    header = keys + cols
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for agent in summary.index:
        labels = agent if isinstance(agent, tuple) else (agent,)
        cells = [_fmt(v, digits) if isinstance(v, (float, np.floating)) else str(v) for v in labels]
        for c in cols:
            v = summary.at[agent, c]
            if f"{c}_se" in summary.columns and one_seed(agent):  # one seed has no standard error to show
                cells.append(_fmt(v, digits))
            elif f"{c}_se" in summary.columns:
                cells.append(f"{_fmt(v, digits)} ± {_fmt(summary.at[agent, f'{c}_se'], digits)}")
            else:
                cells.append(_fmt(v, digits))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
