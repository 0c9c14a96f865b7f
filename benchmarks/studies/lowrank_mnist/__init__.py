"""Why LRKF-TS and LoLoFi-TS fall short of the paper on the MNIST bandit (issue 5, item 1; diagnostic).

This study is the ``mnist`` suite (``--protocol seed003``) run with the opt-in variants of ``agents.seed003_agents``,
each changing one thing of banditkit's agent: the observation model (``_r1e-2`` / ``_r1e-4``: Gaussian variance
1e-2 / 1e-4; ``_bern``: moment-matched Bernoulli; ``_sigm``: the authors' sigmoid mean with a fixed variance), the
Thompson draw (``_pred``), the initial factor (``_coord``: the authors' coordinate rows), the dynamics (``_auth_q0``,
``_auth_gain``), or all of the authors' configuration at once (``_auth``).  ``python -m benchmarks study
lowrank_mnist [mnist options]`` is the mnist suite with this study's defaults: ``--protocol seed003 --tag
diag_lowrank_mnist --out benchmarks/studies/lowrank_mnist/results`` (any of them can be given).

Usage (the commands of the committed tables are at their tops)::

    python -m benchmarks study lowrank_mnist --steps 5000 --seeds 3 --chunk 1000 --agents lrkf_ts_coord,lrkf_ts_auth
    python -m benchmarks study lowrank_mnist --steps 40000 --seeds 3 --chunk 1000 --tag diag_lowrank_mnist_40k \\
        --agents hilofi_ts_auth,lolofi_ts_auth,lrkf_ts_auth
"""

from __future__ import annotations

import os

from benchmarks.suites import mnist

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")  # this study's outputs
DEFAULTS = {"--protocol": "seed003", "--tag": "diag_lowrank_mnist", "--out": HERE}


def main(argv=None):
    """The mnist suite with this study's defaults for the flags ``argv`` does not give."""
    argv = list(argv or [])
    given = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    for flag, value in DEFAULTS.items():
        if flag not in given:
            argv += [flag, value]
    return mnist.main(argv)
