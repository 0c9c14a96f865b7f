"""The end of an experiment command: the per-agent summary table (printed and saved as Markdown, with a line saying
so when the rows ran on synthetic data) and its plot."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the functions themselves: building the parser imports neither
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


def summary_markdown(df: pd.DataFrame) -> str:
    """The per-agent summary of ``df`` as Markdown; then, when some rows ran on synthetic data (the frame's
    ``synthetic`` column), a line saying which (:func:`banditkit.experiments.summary.synthetic_note`)."""
    from banditkit.experiments.summary import summarize, synthetic_note, to_markdown

    table = summarize(df)
    note = synthetic_note(table)
    return to_markdown(table) + ("" if note is None else f"\n{note}\n")


def report(df: pd.DataFrame, folder: ResultsFolder, quiet: bool, bo: bool = False) -> None:
    """``<name>_summary.md`` (printed too) and ``<name>_regret.png`` (bandits) or ``<name>_simple_regret.png`` (BO),
    mean ± s.e. over seeds."""
    from banditkit.plotting import plot_bo, plot_regret

    md = summary_markdown(df)
    summary = folder.write_text("_summary.md", md + "\n")
    png = save_plot(plot_bo if bo else plot_regret, df, folder.path("_simple_regret.png" if bo else "_regret.png"))
    print(md)
    if not quiet:
        print(f"\nwrote {folder.csv}, {summary}, {png}")

