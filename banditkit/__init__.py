"""banditkit: contextual bandits and Bayesian optimisation with online Kalman-style neural posteriors.

``import banditkit as bk`` registers the Gymnasium environments (``banditkit/...-v0``, :mod:`banditkit.gym_ids`) and
exposes the subpackages ``posteriors, likelihoods, models, policies, agents, environments, datasets, bo, experiments,
offline, plotting`` plus the shortcuts ``bk.run, bk.compare, bk.summarize, bk.sweep, bk.plot_regret, bk.BayesOpt``.

Each subpackage and shortcut is imported on first use (``bk.posteriors``, ``bk.compare``): ``import banditkit``
itself imports neither JAX nor pandas, so the ``banditkit`` command answers ``--help`` and argument errors at once.
Type checkers and IDEs see every name through the explicit imports under ``TYPE_CHECKING`` below.  ``bk.runtime``
(process-wide settings: BLAS threads, allocator) is likewise loaded on first use and applies nothing by itself.

"Seed 000" … "seed 004" in docstrings and comments name the five method papers banditkit implements (LoFi; the
Kalman last layer with learned forgetting; subspace-EKF neural bandits; HiLoFi / LoLoFi / LRKF; BONG): the glossary
(``docs/glossary.md``) gives each paper's title and authors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from banditkit._version import __version__
from banditkit.gym_ids import register_all as _register_envs

_register_envs()  # entry points are strings: the environments' modules load on the first gymnasium.make

if TYPE_CHECKING:  # what the lazy look-up below returns, spelled out for type checkers
    from banditkit import (
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
        runtime,
        validation,
    )
    from banditkit.bo import BayesOpt
    from banditkit.experiments import compare, run, summarize, sweep
    from banditkit.plotting import plot_regret

_SUBMODULES = frozenset({
    "agents", "bo", "checkpoint", "datasets", "debug", "environments", "experiments", "likelihoods", "models",
    "offline", "plotting", "policies", "posteriors", "validation",
    # process-wide settings, and the old names of moved modules (deprecated aliases: banditkit/_alias.py)
    "runtime", "memory", "threads", "convs", "rng",
})
_SHORTCUTS = {
    "run": "banditkit.experiments",
    "compare": "banditkit.experiments",
    "summarize": "banditkit.experiments",
    "sweep": "banditkit.experiments",
    "plot_regret": "banditkit.plotting",
    "BayesOpt": "banditkit.bo",
}

__all__ = [
    "__version__",
    "agents", "bo", "checkpoint", "datasets", "debug", "environments", "experiments", "likelihoods", "models",
    "offline", "plotting", "policies", "posteriors", "runtime", "validation",
    "BayesOpt", "compare", "plot_regret", "run", "summarize", "sweep",
]


def __getattr__(name: str) -> Any:
    """``bk.<subpackage>`` and ``bk.<shortcut>``, imported on first use (PEP 562)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"banditkit.{name}")
    if name in _SHORTCUTS:
        return getattr(importlib.import_module(_SHORTCUTS[name]), name)
    raise AttributeError(f"module 'banditkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES) | set(_SHORTCUTS))
