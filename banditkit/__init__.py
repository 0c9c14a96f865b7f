"""banditkit: contextual bandits and Bayesian optimisation with online Kalman-style neural posteriors.

``import banditkit as bk`` registers the Gymnasium environments (``banditkit/...-v0``) and exposes the
subpackages ``posteriors, likelihoods, models, policies, agents, environments, datasets, bo, experiments,
offline, plotting, memory, threads, convs, rng`` plus the shortcuts ``bk.run, bk.compare, bk.summarize, bk.plot_regret,
bk.BayesOpt``.
"""

from banditkit import (  # noqa: F401
    agents,
    bo,
    checkpoint,
    convs,
    datasets,
    debug,
    environments,
    experiments,
    likelihoods,
    memory,
    models,
    offline,
    plotting,
    policies,
    posteriors,
    rng,
    threads,
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


def __getattr__(name):
    if name in _SHORTCUTS:
        import importlib

        return getattr(importlib.import_module(_SHORTCUTS[name]), name)
    raise AttributeError(f"module 'banditkit' has no attribute {name!r}")
