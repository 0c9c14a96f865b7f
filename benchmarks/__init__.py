"""banditkit's benchmarks: the suites that make the README's numbers, the studies behind them, and their harness.

One entry point, ``python -m benchmarks SUITE [options]`` (``python -m benchmarks --list`` names every suite and study
and the files it writes).  ``benchmarks/README.md`` is the guide.  Nothing in ``banditkit`` imports this package.
"""
