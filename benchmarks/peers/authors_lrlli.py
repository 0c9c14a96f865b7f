"""The authors' HiLoFi and LRKF, from a user's own checkout, timed beside banditkit's (issue 58).

``python -m benchmarks speed --reference-dir DIR`` imports the filters of the HiLoFi paper's code
(github.com/gerdm/low-rank-last-layer-inference; nothing of it is copied into banditkit) from ``DIR``, a checkout
of that repository, and times them in the same process, in the same interleaved windows and against the same floor
as banditkit's backends, on the same model and parameters:

* ``authors_hilofi`` = ``methods.low_rank_last_layer.LowRankLastLayer(apply, cov, rank=r, dynamics_hidden=0,
  dynamics_last=0, rank_last=None)`` (a rank-``r`` hidden block and a full last layer, as banditkit's ``hilofi``),
  ``init_bel(params, cov_hidden=1, cov_last=1, low_rank_diag=True, diag_last=True)``;
* ``authors_lrkf`` = ``methods.low_rank_filter_revised.LowRankCovarianceFilter(apply, cov, dynamics_covariance=0,
  rank=r)``, ``init_bel(params, cov=1, low_rank_diag=True)``;

both with the observation covariance ``0.1 · I`` and stepped by ``update(predict(bel), y, x)`` (their argument order,
``y`` before ``x``).  Their code finds the last layer as ``params["params"]["last_layer"]`` and takes it to be the
last block of the flattened parameters; banditkit's models call it ``head``, which also flattens last, so the
adapter renames the key in the parameters it hands over and back in the model function it wraps — the same weights
and the same function.

The checkout's own dependencies (``chex``, ``distrax``) are the user's to install: they are not banditkit's.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import SimpleNamespace

import jax.numpy as jnp

#: backend names of the speed suite that this module builds
NAMES = ("authors_hilofi", "authors_lrkf")
#: the observation variance of every filter in the speed suite (``Gaussian(0.1)``)
OBS_VAR = 0.1
#: the name the authors' code looks up for the last layer, and banditkit's
THEIR_LAST, OUR_LAST = "last_layer", "head"


def load_modules(reference_dir: str):
    """``(low_rank_last_layer, low_rank_filter_revised)`` imported from ``reference_dir/experiments/methods``."""
    root = os.path.join(os.path.abspath(reference_dir), "experiments")
    wanted = [os.path.join(root, "methods", f) for f in ("low_rank_last_layer.py", "low_rank_filter_revised.py")]
    missing = [w for w in wanted if not os.path.isfile(w)]
    if missing:
        raise FileNotFoundError(
            f"--reference-dir {reference_dir!r} is not a checkout of gerdm/low-rank-last-layer-inference: "
            f"{', '.join(missing)} not found (clone the repository and pass its top folder)")
    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        return (importlib.import_module("methods.low_rank_last_layer"),
                importlib.import_module("methods.low_rank_filter_revised"))
    except ImportError as e:
        raise ImportError(
            f"the authors' code in {reference_dir!r} did not import ({e}); it needs its own dependencies, e.g. "
            "`pip install chex distrax`") from e


def rename_last(params, old: str, new: str):
    """``params`` with the top-level layer ``old`` under ``params["params"]`` renamed ``new`` (same arrays)."""
    inner = dict(params["params"])
    if old not in inner:
        raise KeyError(f"the model has no layer {old!r} (layers: {sorted(inner)})")
    inner[new] = inner.pop(old)
    return {**params, "params": inner}


def make(name: str, reference_dir: str, apply, params, rank: int) -> SimpleNamespace:
    """The authors' filter ``name`` (:data:`NAMES`) on ``apply(params, x)`` as an object with banditkit's step
    methods — ``init(params)``, ``predict(state)``, ``update(state, x, y)`` — which is what the speed suite times."""
    if name not in NAMES:
        raise ValueError(f"unknown reference backend {name!r}; choose from {NAMES}")
    lll, lrf = load_modules(reference_dir)

    def their_apply(p, x):  # their parameter names → ours, then banditkit's model
        return apply(rename_last(p, THEIR_LAST, OUR_LAST), x)

    def cov(*_):
        return OBS_VAR * jnp.eye(1)

    if name == "authors_hilofi":
        f = lll.LowRankLastLayer(their_apply, cov, rank=rank, dynamics_hidden=0.0, dynamics_last=0.0, rank_last=None)

        def init(p):
            return f.init_bel(rename_last(p, OUR_LAST, THEIR_LAST), cov_hidden=1.0, cov_last=1.0, low_rank_diag=True,
                              diag_last=True)
    else:
        f = lrf.LowRankCovarianceFilter(their_apply, cov, dynamics_covariance=0.0, rank=rank)

        def init(p):
            return f.init_bel(rename_last(p, OUR_LAST, THEIR_LAST), cov=1.0, low_rank_diag=True)

    return SimpleNamespace(init=init, predict=f.predict, update=lambda bel, x, y: f.update(bel, y, x), filter=f)
