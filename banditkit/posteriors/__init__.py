"""Online posterior backends over a reward model's parameters, all behind one functional contract.

See :class:`banditkit.posteriors.base.Posterior`.  Every backend factory is listed in ``REGISTRY`` so agents,
the CLI and ``BayesOpt`` can resolve it by name with :func:`get`.  ``subspace_from_sgd`` and ``subspace_random``
are helpers that build the ``(A, θ*)`` basis of ``subspace_ekf``, ``adaptive_noise`` wraps a filter backend to learn
its observation variance online and ``noise_variance(state)`` reads the learned variance; they are exported but are
not backends.
"""

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
from banditkit.posteriors.noise import adaptive_noise, noise_variance
from banditkit.posteriors.replay_sgd import replay_sgd
from banditkit.posteriors.subspace import subspace_ekf, subspace_from_sgd, subspace_random
from banditkit.posteriors.vbll import online_vbll, vbll

REGISTRY = {
    "ekf": ekf,
    "diag_ekf": diag_ekf,
    "lofi": lofi,
    "hilofi": hilofi,
    "lolofi": lolofi,
    "lrkf": lrkf,
    "subspace_ekf": subspace_ekf,
    "neural_linear": neural_linear,
    "kalman_last_layer": kalman_last_layer,
    "linear": linear,
    "replay_sgd": replay_sgd,
    "bong": bong,
    "vbll": vbll,
    "online_vbll": online_vbll,
    "last_layer_laplace": last_layer_laplace,
}


def get(name: str):
    """The backend factory called ``name``; an unknown name lists the valid ones."""
    key = name.strip().lower().replace("-", "_")
    if key not in REGISTRY:
        raise ValueError(f"unknown posterior backend {name!r}; choose one of {sorted(REGISTRY)}")
    return REGISTRY[key]


__all__ = ["Posterior", "ParamSpace", "REGISTRY", "get", "adaptive_noise", "noise_variance", "subspace_from_sgd",
           "subspace_random", *REGISTRY]
