"""Online posterior backends over a reward model's parameters, all behind one functional contract.

See :class:`banditkit.posteriors.base.Posterior`.  Backends register themselves in ``REGISTRY`` so agents,
the CLI and ``BayesOpt`` can resolve them by name.
"""

from banditkit.posteriors.base import ParamSpace, Posterior
from banditkit.posteriors.ekf import ekf

REGISTRY = {"ekf": ekf}

# Backends written in their own modules are added here as they land; a missing optional module must not
# break the import of the others.
for _mod, _names in [
    ("diag_ekf", ["diag_ekf"]),
    ("linear", ["linear"]),
    ("subspace", ["subspace_ekf", "subspace_from_sgd", "subspace_random"]),
    ("lofi", ["lofi"]),
    ("hilofi", ["hilofi", "lolofi"]),
    ("lrkf", ["lrkf"]),
    ("neural_linear", ["neural_linear"]),
    ("kalman_last_layer", ["kalman_last_layer"]),
    ("replay_sgd", ["replay_sgd"]),
    ("bong", ["bong"]),
    ("vbll", ["vbll", "online_vbll"]),
    ("laplace", ["last_layer_laplace"]),
]:
    try:
        _m = __import__(f"banditkit.posteriors.{_mod}", fromlist=_names)
    except ModuleNotFoundError as _e:  # pragma: no cover - only while a backend is being written
        if _e.name != f"banditkit.posteriors.{_mod}":
            raise
        continue
    for _n in _names:
        globals()[_n] = getattr(_m, _n)
        if not _n.startswith("subspace_"):
            REGISTRY[_n] = getattr(_m, _n)


def get(name: str):
    """The backend factory called ``name``; an unknown name lists the valid ones."""
    key = name.strip().lower().replace("-", "_")
    if key not in REGISTRY:
        raise ValueError(f"unknown posterior backend {name!r}; choose one of {sorted(REGISTRY)}")
    return REGISTRY[key]


__all__ = ["Posterior", "ParamSpace", "REGISTRY", "get", *REGISTRY]
