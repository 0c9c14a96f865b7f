"""The finished investigations behind the README's numbers, one sub-package each with its write-up (``README.md``) and
its outputs (``results/``): run as ``python -m benchmarks study NAME [options]``."""
