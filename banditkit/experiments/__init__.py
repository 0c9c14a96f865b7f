"""Experiment runner: ``run`` (compiled ``lax.scan`` × ``vmap`` over seeds, or the Gymnasium loop), ``compare``,
``summarize`` — tidy DataFrames of regret and reward (see :mod:`banditkit.experiments.runner`)."""

from banditkit.experiments.frames import COLUMNS
from banditkit.experiments.prequential import StreamLearner, run_stream
from banditkit.experiments.runner import compare, run
from banditkit.experiments.summary import summarize, to_markdown
from banditkit.experiments.sweep import sweep

__all__ = ["run", "compare", "sweep", "summarize", "to_markdown", "COLUMNS", "run_stream", "StreamLearner"]
