"""Plots: files written, the bands are mean ± standard error, BO frames, clear errors."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from banditkit.plotting import plot_bo, plot_regret, plot_reward_rate  # noqa: E402
from banditkit.plotting.plots import _bands  # noqa: E402


def _bandit_frame(seeds=3, steps=20):
    rows = []
    rng = np.random.default_rng(0)
    for agent, rate in [("good", 0.1), ("bad", 0.5)]:
        for s in range(seeds):
            regret = rng.uniform(0, 2 * rate, steps)
            rows.append(
                pd.DataFrame(
                    dict(
                        agent=agent,
                        seed=s,
                        step=np.arange(steps),
                        reward=1 - regret,
                        regret=regret,
                        cumulative_regret=np.cumsum(regret),
                    )
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_bands_are_mean_and_standard_error():
    df = _bandit_frame()
    band = _bands(df, "cumulative_regret")["good"]
    wide = df[df.agent == "good"].pivot(index="step", columns="seed", values="cumulative_regret")
    np.testing.assert_allclose(band["mean"], wide.mean(axis=1))
    np.testing.assert_allclose(band["se"], wide.std(axis=1, ddof=1) / np.sqrt(3))


def test_plot_regret_writes_a_png_with_one_line_per_agent(tmp_path):
    path = tmp_path / "sub" / "regret.png"
    fig = plot_regret(_bandit_frame(), path)
    assert path.exists() and path.stat().st_size > 5000
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["good", "bad"]
    assert ax.get_xlabel() == "step" and "regret" in ax.get_ylabel()
    assert len(ax.collections) == 2  # one standard-error band per agent
    np.testing.assert_allclose(ax.lines[0].get_ydata(), _bands(_bandit_frame(), "cumulative_regret")["good"]["mean"])
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), np.arange(1, 21))  # 0-based round index -> round 1..T
    plt.close(fig)


def test_many_agents_keep_distinct_lines_and_the_legend_leaves_the_axes():
    df = _bandit_frame(seeds=2, steps=5)
    many = pd.concat([df[df.agent == "good"].assign(agent=f"agent{i}") for i in range(23)], ignore_index=True)
    fig = plot_regret(many)
    ax = fig.axes[0]
    styles = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in ax.lines}
    assert len(ax.lines) == 23 and len(styles) == 23  # colours repeat after 10, then dashed, then dotted
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.x0 > 1.0  # beside the axes, not over the curves
    plt.close(fig)
    fig = plot_regret(df)  # two agents: the legend stays inside
    assert fig.axes[0].get_legend().get_bbox_to_anchor().transformed(fig.axes[0].transAxes.inverted()).x0 <= 0.0
    plt.close(fig)


def test_plot_into_existing_axes_and_single_seed_has_no_band():
    fig, ax = plt.subplots()
    out = plot_reward_rate(_bandit_frame(seeds=1), ax=ax)
    assert out is fig and len(ax.lines) == 2 and len(ax.collections) == 0
    # reward rate = running mean of the reward
    df = _bandit_frame(seeds=1)
    r = df[df.agent == "good"]["reward"].to_numpy()
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.cumsum(r) / np.arange(1, len(r) + 1))
    plt.close(fig)


def test_plot_bo_simple_regret_log_axis_and_best_y(tmp_path):
    rows = []
    for s in range(2):
        y = np.random.default_rng(s).normal(size=15)
        best = np.maximum.accumulate(y)
        rows.append(
            pd.DataFrame(dict(agent="ei", seed=s, step=np.arange(1, 16), y=y, best_y=best, simple_regret=3 - best))
        )
    df = pd.concat(rows)  # BO frames count evaluations from 1 (the CLI's bo.csv, bk.bo.optimize)
    fig = plot_bo(df, tmp_path / "bo.png")
    assert (tmp_path / "bo.png").exists() and fig.axes[0].get_yscale() == "log"
    np.testing.assert_array_equal(fig.axes[0].lines[0].get_xdata(), np.arange(1, 16))  # the first evaluation at 1
    assert fig.axes[0].get_xlabel() == "evaluation"
    plt.close(fig)
    fig = plot_bo(df.drop(columns="simple_regret"))
    assert fig.axes[0].get_yscale() == "linear" and "best" in fig.axes[0].get_ylabel()
    plt.close(fig)


def test_clear_errors():
    with pytest.raises(ValueError, match="cumulative_regret"):
        plot_regret(pd.DataFrame(dict(agent=["a"], seed=[0], step=[0])))
    with pytest.raises(TypeError, match="DataFrame"):
        plot_regret([1, 2, 3])
    with pytest.raises(ValueError, match="empty"):
        plot_regret(_bandit_frame().iloc[:0])
