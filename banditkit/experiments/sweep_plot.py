"""``plot_sweep(df)``: final cumulative regret against each axis of a :func:`banditkit.sweep` frame.

One panel per axis (``df.attrs["sweep_axes"]`` or ``axes=``).  In the panel of axis ``a``, one line per agent: at
each value ``v`` of ``a`` the mean over seeds *and over the other axes' values* of the final cumulative regret of the
lanes with ``a = v``, with the standard error over those lanes (``std(ddof=1)/√n``).  A numeric axis whose positive
values span more than a factor of 10 is drawn on a log scale; a non-numeric (structural) axis on categories.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from banditkit.plotting.plots import _pyplot, line_style


def final_regret(df: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """One row per lane (agent, axes, seed): its final ``cumulative_regret``."""
    keys = ["agent", *axes, "seed"]
    last = df.sort_values("step", kind="stable").groupby(keys, sort=False, dropna=False).tail(1)
    return last[keys + ["cumulative_regret"]].reset_index(drop=True)


def plot_sweep(df: pd.DataFrame, path: str | None = None, axes: list[str] | None = None):
    """The figure (saved as a PNG at dpi 150 when ``path`` is given); see the module docstring."""
    if not isinstance(df, pd.DataFrame) or df.empty:
        raise ValueError("plot_sweep needs the non-empty DataFrame returned by bk.sweep")
    axes = list(df.attrs.get("sweep_axes", []) if axes is None else axes)
    missing = [a for a in axes if a not in df.columns]
    if not axes or missing:
        raise ValueError(f"plot_sweep needs the sweep's axis columns (attrs['sweep_axes'] or axes=); missing {missing}"
                         if missing else "plot_sweep: the frame has no sweep axes (attrs['sweep_axes'] or axes=)")
    plt = _pyplot()
    lanes = final_regret(df, axes)
    fig, panels = plt.subplots(1, len(axes), figsize=(4.2 * len(axes), 3.4), squeeze=False)
    for ax, axis in zip(panels[0], axes, strict=True):
        values = pd.unique(lanes[axis])
        numeric = all(isinstance(v, (int, float, np.integer, np.floating)) for v in values)
        order = sorted(values) if numeric else list(values)
        for i, (agent, g) in enumerate(lanes.groupby("agent", sort=False)):
            stats = g.groupby(axis, sort=False)["cumulative_regret"].agg(["mean", "std", "count"]).reindex(order)
            se = (stats["std"] / np.sqrt(stats["count"])).where(stats["count"] > 1, 0.0).to_numpy()
            x = np.asarray(order, float) if numeric else np.arange(len(order))
            ax.errorbar(x, stats["mean"].to_numpy(), yerr=se, marker="o", capsize=3, label=str(agent),
                        **line_style(i))
        if numeric:
            pos = [float(v) for v in order if float(v) > 0]
            if len(pos) == len(order) and max(pos) > 10 * min(pos):
                ax.set_xscale("log")
        else:
            ax.set_xticks(range(len(order)), [str(v) for v in order])
        ax.set_xlabel(axis)
        ax.set_ylabel("final cumulative regret")
        ax.grid(alpha=0.3)
    panels[0][0].legend(frameon=False, fontsize=8)
    fig.suptitle("mean ± s.e. over seeds and the other axes", fontsize=9)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=150)
    return fig
