"""The end of an experiment command: the per-agent summary table (printed and saved as Markdown) and its plot."""

from __future__ import annotations

import pandas as pd

from banditkit.experiments.results_folder import ResultsFolder


def save_plot(plot, df: pd.DataFrame, png: str) -> str:
    """``plot(df, path)`` (a :mod:`banditkit.plotting` function) saved to ``png`` atomically; figures closed."""
    import matplotlib.pyplot as plt

    from banditkit.checkpoint import atomic_file

    with atomic_file(png, ".png") as tmp:
        plot(df, tmp)
    plt.close("all")
    return png


def report(df: pd.DataFrame, folder: ResultsFolder, quiet: bool, bo: bool = False) -> None:
    """``<name>_summary.md`` (printed too) and ``<name>_regret.png`` (bandits) or ``<name>_simple_regret.png`` (BO),
    mean ± s.e. over seeds."""
    from banditkit.experiments import summarize, to_markdown
    from banditkit.plotting import plot_bo, plot_regret

    md = to_markdown(summarize(df))
    summary = folder.write_text("_summary.md", md + "\n")
    png = save_plot(plot_bo if bo else plot_regret, df, folder.path("_simple_regret.png" if bo else "_regret.png"))
    print(md)
    if not quiet:
        print(f"\nwrote {folder.csv}, {summary}, {png}")

