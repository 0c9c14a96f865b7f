"""banditkit: contextual bandits and Bayesian optimisation with online Kalman-style neural posteriors.

``import banditkit as bk`` registers the Gymnasium environments (``banditkit/...-v0``) and exposes the
subpackages ``posteriors, likelihoods, models, policies, agents, environments, datasets, bo, experiments,
offline, plotting`` plus the shortcuts ``bk.run, bk.compare, bk.summarize, bk.plot_regret,
bk.BayesOpt``; ``bk.runtime`` (process-wide settings: BLAS threads, allocator) is imported on first use only.
"""

from banditkit import (  # noqa: F401
    agents,
    bo,
    checkpoint,
    datasets,
    debug,
    environments,
    experiments,
    likelihoods,
    models,
    offline,
    plotting,
    policies,
    posteriors,
    validation,
)
from banditkit._version import __version__  # noqa: F401

_SHORTCUTS = {
    "run": "banditkit.experiments",
    "compare": "banditkit.experiments",
    "summarize": "banditkit.experiments",
    "sweep": "banditkit.experiments",
    "plot_regret": "banditkit.plotting",
    "BayesOpt": "banditkit.bo",
}


# Process-wide settings, loaded on first use (``import banditkit`` applies and imports none of them), and the old
# names of moved modules (deprecated aliases: banditkit/_alias.py).
_LAZY = {"runtime", "memory", "threads", "convs", "rng"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"banditkit.{name}")
    if name in _SHORTCUTS:
        import importlib

        return getattr(importlib.import_module(_SHORTCUTS[name]), name)
    raise AttributeError(f"module 'banditkit' has no attribute {name!r}")
