"""Plots of run/compare DataFrames: mean ± standard-error bands per agent over steps.

``plot_regret(df)``       cumulative regret (bandit frames)
``plot_reward_rate(df)``  running mean reward ``(1/t) Σ_{s≤t} r_s``
``plot_bo(df)``           BO: simple regret (log scale) if the frame has ``simple_regret``, else best-so-far ``best_y``

Each takes ``path=None`` (save a PNG at dpi 150 when given) and ``ax=None`` (draw into an existing axes) and returns
the ``matplotlib.figure.Figure``.  The non-interactive Agg backend is used unless a backend was already chosen.
The band is ``mean ± std(ddof=1)/√n`` over seeds at every step (no band for a single seed).

The x axis counts from 1: a bandit frame's ``step`` is the 0-based round index, drawn at ``step + 1`` (round ``t``
after ``t`` rewards); a BO frame's ``step`` already counts evaluations from 1 and is drawn as it is.
"""

from __future__ import annotations

import os
import sys
import textwrap

import numpy as np
import pandas as pd


def _pyplot():
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


LINESTYLES = ("-", "--", ":", "-.")
LEGEND_INSIDE_MAX = 8  # more agents than this: the legend goes to the right of the axes, clear of the curves


def line_style(i: int) -> dict:
    """Colour and dash of the ``i``-th curve: the colour cycle (``C0``…``C9``), then the same colours dashed, dotted
    and dash-dotted, so up to 40 curves in one plot stay distinct."""
    return dict(color=f"C{i % 10}", linestyle=LINESTYLES[(i // 10) % len(LINESTYLES)])


def agent_legend(ax, n_lines: int, fontsize: int = 9) -> None:
    """The legend inside the axes for up to ``LEGEND_INSIDE_MAX`` curves, else beside them on the right."""
    if n_lines > LEGEND_INSIDE_MAX:
        ax.legend(frameon=False, fontsize=fontsize - 1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    else:
        ax.legend(frameon=False, fontsize=fontsize)


def _check(df: pd.DataFrame, column: str, what: str):
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} expects the DataFrame returned by run/compare, got {type(df).__name__}")
    missing = [c for c in ("agent", "seed", "step", column) if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs the columns agent, seed, step, {column}; missing {missing}")
    if df.empty:
        raise ValueError(f"{what}: the DataFrame is empty")


def _bands(df: pd.DataFrame, column: str) -> dict[str, pd.DataFrame]:
    out = {}
    for agent, g in df.groupby("agent", sort=False):
        wide = g.pivot_table(index="step", columns="seed", values=column, aggfunc="mean").sort_index()
        n = wide.notna().sum(axis=1)
        mean = wide.mean(axis=1)
        se = (wide.std(axis=1, ddof=1) / np.sqrt(n)).where(n > 1, 0.0).fillna(0.0)
        out[str(agent)] = pd.DataFrame({"mean": mean, "se": se, "n": n})
    return out


def _draw(df, column, ylabel, title, path, ax, logy=False, transform=None, shift=1, xlabel="step"):
    """One curve (and band) per agent of ``column`` against ``step + shift``."""
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=150)
    else:
        fig = ax.figure
    data = df if transform is None else transform(df)
    bands = _bands(data, column)
    n_seeds = int(data["seed"].nunique())
    for i, (agent, b) in enumerate(bands.items()):
        x = b.index.to_numpy() + shift
        (line,) = ax.plot(x, b["mean"].to_numpy(), lw=1.8, label=agent, **line_style(i))
        if n_seeds > 1:
            lo, hi = (b["mean"] - b["se"]).to_numpy(), (b["mean"] + b["se"]).to_numpy()
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2, lw=0)
    if logy:
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        fmt = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(fmt)
        ax.yaxis.set_minor_formatter(fmt)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    band = f"mean ± s.e. over {n_seeds} seeds" if n_seeds > 1 else "1 seed"
    ax.set_title(textwrap.fill(f"{title} ({band})", 70), fontsize=11)  # a long title would squeeze the axes
    ax.grid(True, alpha=0.3)
    agent_legend(ax, len(bands))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    if path is not None:
        path = os.fspath(path)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fig.savefig(path, dpi=150, bbox_inches="tight")
    return fig


def plot_regret(df: pd.DataFrame, path: str | os.PathLike | None = None, ax=None, *, title: str = "Cumulative regret"):
    """Cumulative regret per agent, mean ± standard error over seeds (the frame of ``bk.run`` / ``bk.compare``)."""
    _check(df, "cumulative_regret", "plot_regret")
    return _draw(df, "cumulative_regret", "cumulative regret", title, path, ax)


def _reward_rate(df: pd.DataFrame) -> pd.DataFrame:
    df = df.sort_values(["seed", "step"], kind="stable").copy()  # stable: agents keep their order of appearance
    grp = df.groupby(["agent", "seed"], sort=False)["reward"]
    df["reward_rate"] = grp.cumsum() / (grp.cumcount() + 1)
    return df


def plot_reward_rate(df: pd.DataFrame, path: str | os.PathLike | None = None, ax=None, *, title: str = "Reward rate"):
    """Running mean reward ``(1/t) Σ r`` per agent, mean ± standard error over seeds."""
    _check(df, "reward", "plot_reward_rate")
    return _draw(df, "reward_rate", "mean reward so far", title, path, ax, transform=_reward_rate)


def plot_bo(df: pd.DataFrame, path: str | os.PathLike | None = None, ax=None, *, title: str | None = None):
    """BO progress per agent: simple regret on a log axis (``simple_regret``), else best-so-far ``best_y``, against
    the evaluation count (the frame's ``step``, 1 for the first evaluation)."""
    if isinstance(df, pd.DataFrame) and "simple_regret" in df.columns:
        _check(df, "simple_regret", "plot_bo")
        positive = df["simple_regret"].dropna()
        logy = bool((positive > 0).all())
        return _draw(df, "simple_regret", "simple regret", title or "Simple regret", path, ax, logy=logy, shift=0,
                     xlabel="evaluation")
    _check(df, "best_y", "plot_bo")
    return _draw(df, "best_y", "best value so far", title or "Best value found", path, ax, shift=0,
                 xlabel="evaluation")
