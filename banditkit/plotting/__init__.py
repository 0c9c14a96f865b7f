"""Plots of run/compare DataFrames (mean ± standard error over seeds): regret, reward rate, BO progress."""

from banditkit.plotting.plots import plot_bo, plot_regret, plot_reward_rate

__all__ = ["plot_regret", "plot_reward_rate", "plot_bo"]
