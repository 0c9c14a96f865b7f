"""Online posterior backends over a reward model's parameters, all behind one functional contract.

See :class:`banditkit.posteriors.base.Posterior`.  Every backend registers itself beside its module
(:mod:`banditkit.posteriors.registry`: its factory, defaults and capabilities), and ``REGISTRY`` lists the factories
so agents, the CLI and ``BayesOpt`` can resolve one by name with :func:`get`.  ``subspace_from_sgd`` and
``subspace_random`` are helpers that build the ``(A, θ*)`` basis of ``subspace_ekf``, ``adaptive_noise`` wraps a
filter backend to learn its observation variance online (by name: ``get("hilofi-adaptive_noise")``; ``name_of`` gives
a factory's name back) and ``noise_variance(state)`` reads the learned variance; they are exported but are not
backends.
"""

from banditkit.posteriors import noise, registry
from banditkit.posteriors.base import ParamSpace, Posterior
from banditkit.posteriors.bong import bong
from banditkit.posteriors.diag_ekf import diag_ekf
from banditkit.posteriors.ekf import ekf
from banditkit.posteriors.hilofi import hilofi, lolofi
from banditkit.posteriors.kalman_last_layer import kalman_last_layer
from banditkit.posteriors.laplace import last_layer_laplace
from banditkit.posteriors.linear import linear
from banditkit.posteriors.lofi import lofi
from banditkit.posteriors.lrkf import lrkf
from banditkit.posteriors.neural_linear import neural_linear
from banditkit.posteriors.noise import SUFFIX, adaptive_noise, noise_variance, split_suffix
from banditkit.posteriors.replay_sgd import replay_sgd
from banditkit.posteriors.subspace import subspace_ekf, subspace_from_sgd, subspace_random
from banditkit.posteriors.vbll import online_vbll, vbll

#: every backend factory by name, as registered beside its module (:mod:`banditkit.posteriors.registry`)
REGISTRY = registry.FACTORIES


def get(name: str):
    """The backend factory called ``name``; an unknown name lists the valid ones.  A name ending in
    ``-adaptive_noise`` (``"hilofi-adaptive_noise"``) is that backend wrapped by :func:`adaptive_noise` with its
    default settings: the backend learns its Gaussian observation variance online."""
    if not isinstance(name, str):
        raise TypeError(f"a posterior backend name is a string like 'hilofi', got {name!r}")
    base, learns = split_suffix(name)
    found = registry.find(base)
    if found is None:
        suffix = f" (optionally ending in -{SUFFIX})" if learns else ""
        raise ValueError(f"unknown posterior backend {base!r}; choose one of {sorted(REGISTRY)}{suffix}")
    return adaptive_noise(found.factory) if learns else found.factory


def name_of(factory) -> str | None:
    """The name :func:`get` resolves to ``factory`` (``"hilofi"``, ``"hilofi-adaptive_noise"`` for
    ``adaptive_noise("hilofi")`` with its default settings), or ``None`` for any other callable."""
    found = registry.of(factory)
    if found is not None:
        return found.name
    inner = registry.of(getattr(factory, "backend", None))
    if inner is not None and inner.gaussian_filter and factory is adaptive_noise(inner.factory):
        return f"{inner.name}-{SUFFIX}"
    return None


__all__ = [
    "Posterior", "ParamSpace", "REGISTRY", "registry", "noise", "get", "name_of", "split_suffix", "adaptive_noise",
    "noise_variance", "subspace_from_sgd", "subspace_random",
    # the backends (each registers itself beside its module)
    "bong", "diag_ekf", "ekf", "hilofi", "lolofi", "kalman_last_layer", "last_layer_laplace", "linear", "lofi", "lrkf",
    "neural_linear", "replay_sgd", "subspace_ekf", "vbll", "online_vbll",
]
