"""The functional contract every posterior backend meets, and the pieces they share.

A backend is a factory returning :class:`Posterior`, a NamedTuple of pure functions over a state pytree
(the optax ``GradientTransformation`` idiom)::

    state = post.init(params)               # params: the model's parameter pytree
    state = post.predict(state)             # time update θ ← γθ, Σ ← γ²Σ + qI (identity by default)
    state = post.update(state, x, y)        # measurement update with one observation
    mean, cov = post.predictive(state, x)   # moments of y | x: (C,), (C, C), epistemic + aleatoric
    draw = post.sample(key, state)          # one parameter draw, same pytree as params
    point = post.mean(state)                # point estimate, same pytree as params

Shared here: :class:`ParamSpace` (flattening a parameter pytree and splitting it into a hidden and a
last-layer block by parameter *path*), :func:`linearize` (the observation mean, its Jacobian and the
observation covariance at a linearisation point) and :func:`as_obs`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from banditkit.likelihoods import Likelihood

Array = jax.Array
PyTree = Any
ApplyFn = Callable[[PyTree, Array], Array]


class Posterior(NamedTuple):
    """Pure functions of an online posterior over a model's parameters (see module docstring).

    ``name`` and ``hyper`` record the factory and its hyper-parameters so a state can be saved and restored
    with the backend that made it.
    """

    init: Callable[[PyTree], Any]
    predict: Callable[[Any], Any]
    update: Callable[[Any, Array, Array], Any]
    predictive: Callable[[Any, Array], tuple[Array, Array]]
    sample: Callable[[Array, Any], PyTree]
    mean: Callable[[Any], PyTree]
    name: str = ""
    hyper: dict = {}


def as_obs(y: Array | float, dtype=None) -> Array:
    """Observation as a ``(C,)`` array: a scalar becomes ``(1,)``."""
    y = jnp.asarray(y, dtype=dtype)
    return jnp.atleast_1d(y)


def _path_names(path) -> list[str]:
    names = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                names.append(str(getattr(k, attr)))
                break
    return names


class ParamSpace:
    """Flatten a parameter pytree, optionally split into a hidden block and a last-layer block by path.

    ``last_layer`` names a submodule (e.g. ``"head"``): every leaf whose path contains that name belongs
    to the last block ``ℓ``; all other leaves form the hidden block ``h``.  With ``last_layer=None`` there is
    one block and ``split``/``merge`` are trivial.

    Attributes:
      size: total number of parameters ``P``; ``size_last`` (``D_ℓ``) and ``size_hidden`` (``D_h``).
    """

    def __init__(self, params: PyTree, last_layer: str | None = None):
        self.treedef = jax.tree_util.tree_structure(params)
        flat, self._unravel_all = ravel_pytree(params)
        self.dtype = flat.dtype
        self.size = flat.size
        self.last_layer = last_layer
        leaves_with_path = jax.tree_util.tree_flatten_with_path(params)[0]
        if last_layer is None:
            self.is_last = [False] * len(leaves_with_path)
        else:
            self.is_last = [last_layer in _path_names(p) for p, _ in leaves_with_path]
            if not any(self.is_last):
                paths = ["/".join(_path_names(p)) for p, _ in leaves_with_path]
                raise ValueError(
                    f"last_layer={last_layer!r} matches no parameter path; the model's parameter paths are "
                    f"{paths}. Name the last submodule {last_layer!r} or pass last_layer= one of its names."
                )
            if all(self.is_last):
                raise ValueError(f"last_layer={last_layer!r} matches every parameter; no hidden block is left.")
        leaves = [leaf for _, leaf in leaves_with_path]
        self._shapes = [jnp.shape(leaf) for leaf in leaves]
        self._dtypes = [jnp.asarray(leaf).dtype for leaf in leaves]
        self.size_last = int(sum(int(jnp.size(leaf)) for leaf, last in zip(leaves, self.is_last, strict=True) if last))
        self.size_hidden = self.size - self.size_last

    # whole-vector view -------------------------------------------------------------------------------
    def ravel(self, params: PyTree) -> Array:
        """``θ (P,)`` from a pytree (leaf order of ``jax.tree_util``)."""
        return ravel_pytree(params)[0]

    def unravel(self, theta: Array) -> PyTree:
        """Pytree from ``θ (P,)``."""
        return self._unravel_all(theta)

    # hidden / last split -----------------------------------------------------------------------------
    def split(self, params: PyTree) -> tuple[Array, Array]:
        """``(h (D_h,), ℓ (D_ℓ,))`` from a pytree."""
        leaves = jax.tree_util.tree_leaves(params)
        hid = [jnp.ravel(v) for v, last in zip(leaves, self.is_last, strict=True) if not last]
        lst = [jnp.ravel(v) for v, last in zip(leaves, self.is_last, strict=True) if last]
        h = jnp.concatenate(hid) if hid else jnp.zeros((0,), self.dtype)
        ell = jnp.concatenate(lst) if lst else jnp.zeros((0,), self.dtype)
        return h, ell

    def merge(self, h: Array, ell: Array) -> PyTree:
        """Pytree from ``(h, ℓ)`` (inverse of :meth:`split`)."""
        leaves = []
        ih = il = 0
        for shape, dtype, last in zip(self._shapes, self._dtypes, self.is_last, strict=True):
            n = 1
            for s in shape:
                n *= s
            if last:
                leaves.append(ell[il : il + n].reshape(shape).astype(dtype))
                il += n
            else:
                leaves.append(h[ih : ih + n].reshape(shape).astype(dtype))
                ih += n
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


def check_common_hyper(
    name: str, *, init_cov=None, dynamics_cov=None, forgetting=None, rank=None, min_rank: int = 1, **variances
) -> None:
    """Raise ``ValueError`` for an impossible shared hyper-parameter (concrete values only; tracers pass).

    ``init_cov > 0`` (a variance), ``dynamics_cov ≥ 0`` (a variance), ``0 < forgetting ≤ 1``, ``rank`` an int
    ``≥ min_rank``; extra keyword ``init_cov_*`` / ``dynamics_cov_*`` are checked like their base names.
    Shared by every backend factory so the messages read the same.
    """

    def concrete(v):
        return v is not None and not isinstance(v, jax.core.Tracer) and jnp.ndim(v) == 0

    checks = [("init_cov", init_cov), ("dynamics_cov", dynamics_cov)] + sorted(variances.items())
    for key, v in checks:
        if not concrete(v):
            continue
        if key.startswith("init_cov") and not float(v) > 0:
            raise ValueError(f"{name}: {key} is a prior variance and must be > 0, got {v!r}")
        if key.startswith("dynamics_cov") and not float(v) >= 0:
            raise ValueError(f"{name}: {key} is a drift variance and must be >= 0, got {v!r}")
    if concrete(forgetting) and not 0 < float(forgetting) <= 1:
        raise ValueError(f"{name}: forgetting (gamma) must lie in (0, 1] (1 = no forgetting), got {forgetting!r}")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < min_rank):
        raise ValueError(f"{name}: rank must be an integer >= {min_rank}, got {rank!r}")


def linearize(
    obs_fn: Callable[[Array], Array], theta: Array, likelihood: Likelihood
) -> tuple[Array, Array, Array]:
    """Linearise the observation model at ``θ``.

    Args:
      obs_fn: ``θ (P,) -> f (C,)``, the model output (before the likelihood's link).
      theta: linearisation point.
      likelihood: maps the output to the observation mean ``m(f)`` and covariance ``R(f)``.

    Returns:
      ``(ŷ (C,), J (C, P), R (C, C))`` with ``ŷ = m(f(θ))``, ``J = ∂m(f(θ))/∂θ`` (reverse mode: one
      backward pass per output) and ``R = R(f(θ))``.
    """

    def mean_and_aux(t):
        f = jnp.atleast_1d(obs_fn(t))
        m = likelihood.mean(f)
        return m, f

    jac, f = jax.jacrev(mean_and_aux, has_aux=True)(theta)
    yhat = likelihood.mean(f)
    return yhat, jac, likelihood.cov(f)


def linearize_blocks(
    obs_fn: Callable[[Array, Array], Array], h: Array, ell: Array, likelihood: Likelihood
) -> tuple[Array, Array, Array, Array]:
    """Like :func:`linearize` for a two-block parameter ``(h, ℓ)``.

    Returns ``(ŷ (C,), H̃ (C, D_h), L̃ (C, D_ℓ), R (C, C))``.
    """

    def mean_and_aux(hh, ll):
        f = jnp.atleast_1d(obs_fn(hh, ll))
        return likelihood.mean(f), f

    (jh, jl), f = jax.jacrev(mean_and_aux, argnums=(0, 1), has_aux=True)(h, ell)
    return likelihood.mean(f), jh, jl, likelihood.cov(f)


class SpaceCell:
    """Holds the :class:`ParamSpace` a factory's ``init`` discovers from the parameter pytree.

    Backends are created from ``apply_fn`` alone; the parameter structure is known only when ``init(params)``
    is called.  The functions other than ``init`` read it from here, and raise a clear error if ``init`` was
    never called (e.g. a state restored from disk into a fresh backend: call ``init`` on a template first).
    """

    def __init__(self, last_layer: str | None = None):
        self.last_layer = last_layer
        self._space: ParamSpace | None = None

    def set(self, params: PyTree) -> ParamSpace:
        self._space = ParamSpace(params, self.last_layer)
        return self._space

    @property
    def space(self) -> ParamSpace:
        if self._space is None:
            raise RuntimeError(
                "this posterior has not seen the model's parameters yet: call post.init(params) once before "
                "update/predictive/sample/mean (after loading a saved state, init on template parameters first)."
            )
        return self._space
