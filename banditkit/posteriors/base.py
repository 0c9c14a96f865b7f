"""The functional contract every posterior backend meets, and the pieces they share.

A backend is a factory returning :class:`Posterior`, a NamedTuple of pure functions over a state pytree
(the optax ``GradientTransformation`` idiom)::

    state = post.init(params)               # params: the model's parameter pytree (example_x=: one input)
    state = post.predict(state)             # time update θ ← γθ, Σ ← γ²Σ + qI (identity by default)
    state = post.update(state, x, y)        # measurement update with one observation
    mean, cov = post.predictive(state, x)   # moments of y | x: (C,), (C, C), epistemic + aleatoric
    draw = post.sample(key, state)          # one parameter draw, same pytree as params
    point = post.mean(state)                # point estimate, same pytree as params

Every function depends only on its arguments and on what the factory was given: ``init(params, example_x=None)``
derives the parameter layout (:class:`ParamSpace`, a static leafless pytree) and keeps it *in the state*, so a
backend built once serves any number of models and any loaded state.  ``example_x`` (one input) is read by the
backends that keep a buffer of inputs and ignored by the others.

Shared here: :class:`ParamSpace` (flattening a parameter pytree and splitting it into a hidden and a
last-layer block by parameter *path*), :func:`check_common_hyper` (the one validator of the shared
hyper-parameters), :func:`linearize` (the observation mean, its Jacobian and the observation covariance at a
linearisation point), :func:`flat_obs` (the model output as a function of the flat parameter vector) and
:func:`as_obs`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from banditkit.likelihoods import Likelihood

Array = jax.Array
PyTree = Any
ApplyFn = Callable[[PyTree, Array], Array]


class _PosteriorFields(NamedTuple):
    init: Callable[..., Any]
    predict: Callable[[Any], Any]
    update: Callable[[Any, Array, Array], Any]
    predictive: Callable[[Any, Array], tuple[Array, Array]]
    sample: Callable[[Array, Any], PyTree]
    mean: Callable[[Any], PyTree]
    name: str = ""
    hyper: Mapping[str, Any] = MappingProxyType({})
    refit: Callable[..., Any] | None = None
    diagnostics: Callable[[Any], dict] | None = None
    sample_outputs: Callable[..., Array] | None = None
    rescale: Callable[[Any, Array], Any] | None = None


class Posterior(_PosteriorFields):
    """Pure functions of an online posterior over a model's parameters (see module docstring).

    ``name`` and ``hyper`` record the factory and its hyper-parameters so a state can be saved and restored
    with the backend that made it; ``hyper`` is a read-only mapping (a ``dict`` given here is copied and frozen).

    Optional hooks declare what a backend can do beyond the six functions, so agents, runners and BO use it without
    knowing which backend they hold.  Two declare work a backend needs *outside* a step:

    ``refit(key, state, xs, ys, weights) -> state``
        A new prior built from a batch of stored observations (the subspace EKF's warm-up: fit, then a new basis).
        ``xs``: a pytree of inputs with leading axes ``(n, E)`` — ``n`` examples of ``E`` observations each;
        ``ys (n, E, C)``; ``weights (n, E)``: example ``i`` contributes ``Σ_e w_ie · ℓ(f(θ, x_ie), y_ie)`` to a
        fitting loss.  ``n = 0`` asks for the backend's data-free reset (a random subspace through ``mean(state)``).
        The returned state has *not* seen the observations: the caller filters them with ``update`` / ``predict``
        if it wants them in the posterior.  A backend with ``refit`` is not updated by a warm-up's observations
        before its refit (the agent buffers them instead).
    ``diagnostics(state) -> dict``
        Numbers about a finished run, computed outside ``jit`` on one concrete (unbatched) state.  The key
        ``"warning"``, when present, is a message the runner shows the user.

    One offers a cheaper Thompson draw:

    ``sample_outputs(key, state, fn) -> (C,)``
        A draw of ``fn(θ̃)``, ``θ̃ ~ q(θ)``, for ``fn(params) -> (C,)`` *affine in the backend's last layer* (a network
        whose outputs are a ``Dense`` head of features: ``fn = f(·, x)``), drawn without a full parameter draw: the
        other parameters drawn as ``sample`` draws them, then the ``C`` outputs from their Gaussian given that draw,
        ``N(fn(h̃, μ_ℓ), J Σ_ℓ Jᵀ)`` with ``J = ∂fn/∂ℓ`` — the distribution of ``fn(sample(key, state))`` exactly when
        ``fn`` is affine in ``ℓ``.  A caller uses it only for such an ``fn``; a wrapper that replaces ``sample`` must
        replace or drop it.

    One lets an agent change the units of what it observes:

    ``rescale(state, c, cov=True) -> state``
        The posterior of the model whose outputs are ``c`` times this one's, ``f̃ = c f``, exact for a model whose
        outputs are affine in the backend's last layer with that layer's covariance kept in its own block (HiLoFi:
        ``μ_ℓ ← c μ_ℓ``, ``Σ_ℓ ← c² Σ_ℓ``; the other layers unchanged).  ``cov=False`` moves the mean only (the
        learned function in the new units, its uncertainty left as it was).  ``c`` may be traced.  An agent that
        learns the reward's scale (``BanditAgent(reward_scale="auto")``) calls it with ``c = s_old / s_new`` when the
        scale grows, so what the model has learned keeps its meaning in reward units.
    """

    __slots__ = ()

    def __new__(cls, init, predict, update, predictive, sample, mean, name="", hyper=None, refit=None,
                diagnostics=None, sample_outputs=None, rescale=None):
        frozen = MappingProxyType(dict(hyper or {}))
        return super().__new__(cls, init, predict, update, predictive, sample, mean, name, frozen, refit,
                               diagnostics, sample_outputs, rescale)

    def _replace(self, **changes):  # keep ``hyper`` frozen when it is replaced
        return type(self)(**{**self._asdict(), **changes})


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
    """The layout of a parameter pytree: flattening, and a split into a hidden and a last-layer block by path.

    ``last_layer`` names a submodule (e.g. ``"head"``): every leaf whose path contains that name belongs
    to the last block ``ℓ``; all other leaves form the hidden block ``h``.  With ``last_layer=None`` there is
    one block and ``split``/``merge`` are trivial.

    A ``ParamSpace`` is immutable, hashable and a pytree with no leaves: a backend keeps it in its *state* (it is
    static structure, like a ``treedef``), so the backend's functions read the layout from their arguments and a
    backend made once works on any model and on any loaded state.  :meth:`of` memoises construction.

    Attributes:
      size: total number of parameters ``P``; ``size_last`` (``D_ℓ``) and ``size_hidden`` (``D_h``).
      shapes, dtypes, paths: per leaf, in ``jax.tree_util`` order; ``is_last``: per leaf, in the last block.
    """

    __slots__ = ("treedef", "shapes", "dtypes", "paths", "is_last", "last_layer", "dtype", "size", "size_last",
                 "size_hidden", "_key")

    def __init__(self, params: PyTree, last_layer: str | None = None):
        leaves_with_path, treedef = jax.tree_util.tree_flatten_with_path(params)
        names = [_path_names(p) for p, _ in leaves_with_path]
        if last_layer is None:
            is_last = [False] * len(leaves_with_path)
        else:
            is_last = [last_layer in n for n in names]
            if not any(is_last):
                paths = ["/".join(n) for n in names]
                raise ValueError(
                    f"last_layer={last_layer!r} matches no parameter path; the model's parameter paths are "
                    f"{paths}. Name the last submodule {last_layer!r} or pass last_layer= one of its names."
                )
            if all(is_last):
                raise ValueError(f"last_layer={last_layer!r} matches every parameter; no hidden block is left.")
        leaves = [leaf for _, leaf in leaves_with_path]
        set_ = object.__setattr__
        set_(self, "treedef", treedef)
        set_(self, "shapes", tuple(tuple(int(d) for d in jnp.shape(leaf)) for leaf in leaves))
        set_(self, "dtypes", tuple(jnp.dtype(jnp.result_type(leaf)) for leaf in leaves))
        set_(self, "paths", tuple(jax.tree_util.keystr(p) for p, _ in leaves_with_path))
        set_(self, "is_last", tuple(is_last))
        set_(self, "last_layer", last_layer)
        set_(self, "dtype", jnp.dtype(jnp.result_type(*self.dtypes)) if leaves else jnp.dtype(jnp.float32))
        sizes = [math.prod(s) for s in self.shapes]
        set_(self, "size", int(sum(sizes)))
        set_(self, "size_last", int(sum(n for n, last in zip(sizes, is_last, strict=True) if last)))
        set_(self, "size_hidden", self.size - self.size_last)
        set_(self, "_key", (treedef, self.shapes, self.dtypes, self.is_last, last_layer))

    @staticmethod
    def of(params: PyTree, last_layer: str | None = None) -> ParamSpace:
        """``ParamSpace(params, last_layer)``, one object per layout (only shapes and dtypes are read)."""
        leaves, treedef = jax.tree_util.tree_flatten(params)
        key = (treedef, tuple(tuple(jnp.shape(v)) for v in leaves), tuple(jnp.result_type(v) for v in leaves),
               last_layer)
        space = _SPACES.get(key)
        if space is None:
            space = _SPACES[key] = ParamSpace(params, last_layer)
        return space

    def __setattr__(self, name, value):
        raise AttributeError("ParamSpace is immutable")

    def __eq__(self, other) -> bool:
        return isinstance(other, ParamSpace) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"ParamSpace(P={self.size}, last_layer={self.last_layer!r}, D_last={self.size_last})"

    # whole-vector view -------------------------------------------------------------------------------
    def ravel(self, params: PyTree) -> Array:
        """``θ (P,)`` from a pytree (leaf order of ``jax.tree_util``, in the common dtype ``self.dtype``)."""
        leaves = jax.tree_util.tree_leaves(params)
        if not leaves:
            return jnp.zeros((0,), self.dtype)
        return jnp.concatenate([jnp.ravel(jnp.asarray(v)).astype(self.dtype) for v in leaves])

    def unravel(self, theta: Array) -> PyTree:
        """Pytree from ``θ (P,)``, each leaf in its own dtype (inverse of :meth:`ravel`)."""
        sizes = [math.prod(shape) for shape in self.shapes]
        cuts = list(itertools.accumulate(sizes))[:-1]
        parts = jnp.split(theta, cuts) if sizes else []
        leaves = [v.reshape(shape).astype(dtype)
                  for v, shape, dtype in zip(parts, self.shapes, self.dtypes, strict=True)]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    # hidden / last split -----------------------------------------------------------------------------
    def split(self, params: PyTree) -> tuple[Array, Array]:
        """``(h (D_h,), ℓ (D_ℓ,))`` from a pytree."""
        leaves = jax.tree_util.tree_leaves(params)
        hid = [jnp.ravel(v).astype(self.dtype) for v, last in zip(leaves, self.is_last, strict=True) if not last]
        lst = [jnp.ravel(v).astype(self.dtype) for v, last in zip(leaves, self.is_last, strict=True) if last]
        h = jnp.concatenate(hid) if hid else jnp.zeros((0,), self.dtype)
        ell = jnp.concatenate(lst) if lst else jnp.zeros((0,), self.dtype)
        return h, ell

    def merge(self, h: Array, ell: Array) -> PyTree:
        """Pytree from ``(h, ℓ)`` (inverse of :meth:`split`)."""
        leaves = []
        ih = il = 0
        for shape, dtype, last in zip(self.shapes, self.dtypes, self.is_last, strict=True):
            n = math.prod(shape)
            if last:
                leaves.append(ell[il : il + n].reshape(shape).astype(dtype))
                il += n
            else:
                leaves.append(h[ih : ih + n].reshape(shape).astype(dtype))
                ih += n
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


jax.tree_util.register_pytree_node(ParamSpace, lambda s: ((), s), lambda s, _: s)


_SPACES: dict = {}  # layout key -> ParamSpace (ParamSpace.of)


def check_common_hyper(
    name: str, *, init_cov=None, dynamics_cov=None, forgetting=None, rank=None, min_rank: int = 1,
    zero_prior: bool = False, **variances
) -> None:
    """Raise ``ValueError`` for an impossible shared hyper-parameter (concrete values only; tracers pass).

    The one validator of the shared names (``../API.md``), used by every backend factory so the same value gets
    the same answer and the messages read the same: ``init_cov > 0`` (a prior variance), ``dynamics_cov ≥ 0`` (a
    drift variance), ``0 < forgetting ≤ 1``, ``rank`` an int ``≥ min_rank``; extra keywords ``init_cov_*`` /
    ``dynamics_cov_*`` are checked like their base names.  ``zero_prior=True`` is for backends that keep the prior
    as a *covariance* factor (HiLoFi, LRKF, EKF): there ``init_cov = 0`` is a valid point-mass prior that freezes
    the block; backends that keep a *precision* (``1 / init_cov``) refuse it.
    """

    def concrete(v):
        return v is not None and not isinstance(v, jax.core.Tracer) and jnp.ndim(v) == 0

    checks = [("init_cov", init_cov), ("dynamics_cov", dynamics_cov)] + sorted(variances.items())
    for key, v in checks:
        if not concrete(v):
            continue
        if key.startswith("init_cov") and not (float(v) >= 0 if zero_prior else float(v) > 0):
            bound = ">= 0 (0 freezes the block)" if zero_prior else "> 0 (this backend keeps its inverse)"
            raise ValueError(f"{name}: {key} is a prior variance and must be {bound}, got {v!r}")
        if key.startswith("dynamics_cov") and not float(v) >= 0:
            raise ValueError(f"{name}: {key} is a drift variance and must be >= 0, got {v!r}")
    if concrete(forgetting) and not 0 < float(forgetting) <= 1:
        raise ValueError(f"{name}: forgetting (gamma) must lie in (0, 1] (1 = no forgetting), got {forgetting!r}")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < min_rank):
        raise ValueError(f"{name}: rank must be an integer >= {min_rank}, got {rank!r}")


def flat_obs(apply_fn: ApplyFn, space: ParamSpace, x) -> Callable[[Array], Array]:
    """``θ (P,) ↦ apply_fn(space.unravel(θ), x)``: the model output at input ``x`` as a function of the flat parameter
    vector of layout ``space`` (the ``obs_fn`` the full-vector filters hand to :func:`linearize`)."""
    return lambda theta: apply_fn(space.unravel(theta), x)


def linearize(
    obs_fn: Callable[[Any], Array], theta: Any, likelihood: Likelihood
) -> tuple[Array, Array, Array]:
    """Linearise the observation model at ``θ``.

    Args:
      obs_fn: ``θ -> f (C,)``, the model output (before the likelihood's link).
      theta: linearisation point: a flat vector ``(P,)``, or the parameter *pytree* itself (then ``obs_fn`` takes the
        pytree, e.g. ``lambda p: apply_fn(p, x)``, and ``J``'s columns are its leaves' entries in ravel order).
      likelihood: maps the output to the observation mean ``m(f)`` and covariance ``R(f)``.

    Returns:
      ``(ŷ (C,), J (C, P), R (C, C))`` with ``ŷ = m(f(θ))``, ``J = ∂m(f(θ))/∂θ`` (reverse mode: one
      backward pass per output) and ``R = R(f(θ))``.

    Pass the pytree when you have it (``space.unravel(μ)``, not ``μ`` with the unravel inside ``obs_fn``): the
    Jacobian is then taken leaf by leaf and concatenated once, where differentiating a flat vector sliced inside the
    model transposes every slice into a ``pad`` to ``P`` entries and sums them (``L`` leaves: ``L`` passes over
    ``(C, P)``).  The numbers are the same.
    """

    def mean_and_aux(t):
        f = jnp.atleast_1d(obs_fn(t))
        return likelihood.mean(f), f

    jac, f = jax.jacrev(mean_and_aux, has_aux=True)(theta)
    c = f.shape[0]
    jac = jnp.concatenate([jnp.reshape(j, (c, -1)) for j in jax.tree_util.tree_leaves(jac)], axis=1)
    return likelihood.mean(f), jac, likelihood.cov(f)


def linearize_blocks(
    obs_fn: Callable[[Any, Any], Array], h: Any, ell: Any, likelihood: Likelihood
) -> tuple[Array, Array, Array, Array]:
    """Like :func:`linearize` for a two-block parameter ``(h, ℓ)``: ``obs_fn(h, ℓ) -> f (C,)``.

    ``h`` and ``ℓ`` are flat vectors ``(D_h,)``, ``(D_ℓ,)`` or pytrees (e.g. the lists of hidden and last-layer
    leaves of a :class:`ParamSpace`, for the same leaf-wise Jacobian as :func:`linearize` on a pytree).

    Returns ``(ŷ (C,), H̃ (C, D_h), L̃ (C, D_ℓ), R (C, C))``.
    """
    def mean_and_aux(hh, ll):
        f = jnp.atleast_1d(obs_fn(hh, ll))
        return likelihood.mean(f), f

    jacs, f = jax.jacrev(mean_and_aux, argnums=(0, 1), has_aux=True)(h, ell)
    c = f.shape[0]
    jh, jl = (jnp.concatenate([jnp.reshape(j, (c, -1)) for j in jax.tree_util.tree_leaves(b)], axis=1) for b in jacs)
    return likelihood.mean(f), jh, jl, likelihood.cov(f)
