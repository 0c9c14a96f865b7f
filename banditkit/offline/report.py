"""Files of an off-policy evaluation: the table as CSV and Markdown, and a plot of the estimates with intervals.

``write_report(table, out, name)`` writes ``<name>.csv``, ``<name>.md`` and ``<name>.png`` into ``out``: one panel
row per target policy, one marker per estimator at its value with a horizontal bar for its interval, and a dashed
vertical line at the logging policy's on-policy value.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from banditkit.checkpoint import atomic_file
from banditkit.offline.evaluate import to_markdown


def plot_ope(table: pd.DataFrame, path: str | os.PathLike) -> str:
    """The estimates of ``table`` (:func:`~banditkit.offline.evaluate.evaluate`) with their intervals, as a PNG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    targets = table[table.policy != "logging"]
    policies = list(dict.fromkeys(targets.policy))
    estimators = list(dict.fromkeys(targets.estimator))
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.28 * max(1, len(targets))))
    y, ticks, labels = 0, [], []
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for pol in policies:
        rows = targets[targets.policy == pol]
        for r in rows.itertuples(index=False):
            c = colours[estimators.index(r.estimator) % len(colours)]
            ax.errorbar(r.value, y, xerr=[[r.value - r.lower], [r.upper - r.value]], fmt="o", color=c, capsize=3,
                        label=r.estimator if pol == policies[0] else None)
            ticks.append(y)
            labels.append(f"{pol} · {r.estimator}")
            y -= 1
        y -= 0.6
    logging = table[table.policy == "logging"]
    if len(logging):
        v = float(logging.value.iloc[0])
        ax.axvline(v, color="0.4", linestyle="--", linewidth=1, label="logging policy (on-policy)")
    ax.set_yticks(ticks, labels, fontsize=8)
    alpha = table.attrs.get("alpha", 0.05)
    ax.set_xlabel(f"estimated value (mean reward per round), {100 * (1 - alpha):.0f}% intervals")
    ax.legend(fontsize=7, loc="best")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    target = os.fspath(path)
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def write_report(table: pd.DataFrame, out: str | os.PathLike, name: str = "evaluate", *,
                 extra_markdown: str | None = None) -> dict[str, str]:
    """``{csv, md, png}`` paths written into ``out`` (created if needed), each atomically
    (:func:`banditkit.checkpoint.atomic_file`); ``extra_markdown`` (e.g. the counterfactual report) follows the
    table in the ``.md`` file."""
    folder = os.fspath(out)
    os.makedirs(folder, exist_ok=True)
    paths = {ext: os.path.join(folder, f"{name}.{ext}") for ext in ("csv", "md", "png")}
    with atomic_file(paths["csv"], ".csv") as tmp:  # each file whole or not at all
        table.to_csv(tmp, index=False)
    with atomic_file(paths["md"], ".md") as tmp, open(tmp, "w") as fh:
        fh.write(to_markdown(table) + "\n" + ("" if extra_markdown is None else f"\n{extra_markdown}\n"))
    with atomic_file(paths["png"], ".png") as tmp:
        plot_ope(table, tmp)
    return paths


def relative_error(estimate: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``|estimate − truth| / |truth|`` (absolute error where ``truth = 0``)."""
    estimate, truth = np.asarray(estimate, np.float64), np.asarray(truth, np.float64)
    denom = np.where(truth == 0, 1.0, np.abs(truth))
    return np.abs(estimate - truth) / denom
