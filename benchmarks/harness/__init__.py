"""The harness every suite and study uses, one idea per module.

- :mod:`.options`: the shared command-line flags (``--steps``, ``--seeds``, ``--agents``, ``--out``, ``--chunk``,
  ``--blas-threads``, …), the seeds and agents they select, the ``--check`` state.
- :mod:`.provenance`: the command, machine, load, BLAS and commit lines every result file carries.
- :mod:`.run`: running a bandit suite's agents with the compiled runner (time caps, SIGUSR1, partial tables).
- :mod:`.tables`: per-seed rows, mean ± s.e., curves, shared Markdown blocks, ranks and Pareto fronts, CSV appends.
- :mod:`.merge`: ``--merge``, ``--add-seeds``, ``--render`` and ``--check`` against an existing table.
- :mod:`.report`: one bandit experiment's ``TAG.md`` / ``TAG_seeds.csv`` / ``TAG_curve.csv`` / ``TAG_regret.png``.
- :mod:`.plots`: the shared palette, mean ± s.e. bands, regret curves, labelled Pareto plots.
- :mod:`.commands`: the old script paths (``benchmarks/bench_*.py``) and the command each became.
"""
