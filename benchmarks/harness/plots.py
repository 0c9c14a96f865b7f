"""Plots shared by the suites: one colour per method, mean ± s.e. bands, labelled points and Pareto fronts.

``method_colours`` gives every suite the same palette (tab10, then tab20's light shades); ``band`` draws a mean with its
± s.e. band; ``plot_curve`` the bandit suites' cumulative-regret curves from a ``TAG_curve.csv`` frame (a merged table
has no per-step rows left); ``pareto_plot`` a time-against-quality scatter with its front (the BO suite's
``bo_pareto.png``); ``label_without_overlap`` places point labels that do not hide each other.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

import banditkit as bk


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def method_colours(n: int) -> list:
    """``n`` distinct colours: tab10's while they last, then tab20's light shades (the dark ones are tab10's)."""
    plt = _pyplot()
    tab20 = plt.get_cmap("tab20")(np.linspace(0, 1, 20))
    return [tab20[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20] for i in range(n)]


def band(ax, x, mean, err, *, alpha: float = 0.2, **style):
    """Plot ``mean`` against ``x`` with a ``mean ± err`` band in the line's colour; returns the line."""
    (line,) = ax.plot(x, mean, **style)
    ax.fill_between(x, np.asarray(mean) - np.asarray(err), np.asarray(mean) + np.asarray(err),
                    color=line.get_color(), alpha=alpha, lw=0)
    return line


def plot_curve(cur: pd.DataFrame, path: str, *, title: str) -> None:
    """Cumulative regret, mean ± s.e. over seeds, from a ``TAG_curve.csv`` frame (used for merged tables)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=150)
    groups = list(cur.groupby("agent", sort=False))
    for i, (agent, g) in enumerate(groups):
        band(ax, g["step"].to_numpy() + 1, g["cum_regret"].to_numpy(), g["cum_regret_se"].to_numpy(), lw=1.8,
             label=agent, **bk.plotting.plots.line_style(i))
    seeds = sorted(set(cur["n"]))
    ax.set_title(textwrap.fill(f"{title} (mean ± s.e. over {'/'.join(map(str, seeds))} seeds)", 70), fontsize=11)
    ax.set_xlabel("step")
    ax.set_ylabel("cumulative regret")
    ax.grid(True, alpha=0.3)
    bk.plotting.plots.agent_legend(ax, len(groups), fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


def label_without_overlap(ax, labels: list[tuple[str, float, float]], fontsize: float = 7.5) -> None:
    """Annotate each (text, x, y) at the first of a few offsets around its point whose text box overlaps neither
    an earlier label nor a marker (the last offset when none is free)."""
    renderer = ax.figure.canvas.get_renderer()
    offsets = [((5, 4), "left"), ((5, -11), "left"), ((-5, 4), "right"), ((-5, -11), "right"), ((5, 13), "left"),
               ((5, -20), "left"), ((-5, 13), "right"), ((-5, -20), "right")]
    marks = [ax.transData.transform((x, y)) for _, x, y in labels]
    taken = []
    for text, x, y in labels:
        for (dx, dy), ha in offsets:
            ann = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize, ha=ha)
            box = ann.get_window_extent(renderer)
            clash = any(box.overlaps(b) for b in taken) or any(
                box.x0 - 3 < mx < box.x1 + 3 and box.y0 - 3 < my < box.y1 + 3 for mx, my in marks)
            if not clash or (dx, dy) == offsets[-1][0]:
                taken.append(box)
                break
            ann.remove()


def pareto_plot(path: str, panels: list[tuple[str, pd.DataFrame]], *, xlabel: str, ylabel: str, title: str,
                peers=(), floor: float = 1e-3) -> None:
    """One panel per ``(title, frame)``: each name (the frame's index) at ``(cost, rank)`` (columns ``cost``, ``rank``,
    ``on_front``), cost on a log axis clipped below at ``floor`` (a name under it labelled so), the best rank at the
    top; the front joined by a step line in red; ``peers`` drawn as squares.  One legend below the panels."""
    if not panels:
        return
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.8), squeeze=False)
    for ax, (panel_title, df) in zip(axes[0], panels, strict=True):
        x = df.cost.clip(lower=floor)
        for m in df.index:
            peer = m in peers
            ax.scatter(x[m], df["rank"][m], s=46, marker="s" if peer else "o", zorder=3,
                       color="tab:red" if df.on_front[m] else ("tab:gray" if peer else "tab:blue"))
        front = df[df.on_front].sort_values("cost")
        ax.step(x[front.index], front["rank"], where="post", color="tab:red", lw=1.2, alpha=0.7,
                label="Pareto front: no method both faster and better")
        ax.set_xscale("log")
        ax.set_xlim(floor / 2, x.max() * 3)
        lo, hi = df["rank"].min(), df["rank"].max()
        ax.set_ylim(hi + 0.6, lo - 0.6)  # inverted: best rank at the top
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(panel_title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        order = df.sort_values("rank").index
        below = f" (< {floor * 1e3:g} ms)"
        label_without_overlap(ax, [(m + (below if df.cost[m] < floor else ""), x[m], df["rank"][m]) for m in order])
    fig.suptitle(title, fontsize=11)
    # one legend below the panels: inside a panel it hid the best method's point and label (top left)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
