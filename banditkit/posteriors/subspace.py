"""Subspace EKF (seed 002 §5.4–5.5): an EKF over ``z ∈ R^d`` with ``θ = A z + θ*``.

The network keeps all ``P`` parameters, but the filter only moves them inside the affine subspace spanned by the
columns of ``A (P, d)`` through the offset ``θ* (P,)``.  The filter over ``z`` *is* :func:`~banditkit.posteriors.ekf`
(``covariance="full"``, ``Σ_z (d, d)``, Joseph form) or :func:`~banditkit.posteriors.diag_ekf`
(``covariance="diagonal"``), applied to the reparametrised model ``z ↦ apply_fn(unravel(A z + θ*), x)``; the
Jacobian ``H_z = H_θ A (C, d)`` comes from one reverse pass per output through that map (``O(C_f + P d)``).

The basis is kept row-wise, ``Aᵀ (d, P)``: ``θ = θ* + zᵀAᵀ`` and the reverse pass's ``Aᵀ g`` then both stream
contiguous rows of length ``P``.  With the column layout ``A (P, d)`` XLA's CPU matrix–vector products are ~2× (the
forward) and ~4× (the transpose) slower: LeNet5 at ``d = 470`` (a 114 MB basis, read twice per update) measured
10.5 + 20.9 ms per pass pair against 5.7 + 4.8 ms.  A ``(P, d)`` ``basis`` is transposed once, when the posterior is
built; ``basis_rows=Aᵀ`` is taken as it is.

State ``SubspaceState(inner, offset, basis_rows, space)``: the EKF / diagonal-EKF state over ``z``, the offset
``θ* (P,)``, the basis ``Aᵀ (d, P)`` and the parameter layout (:class:`~banditkit.posteriors.base.ParamSpace`, static).
The basis and offset live in the state, so one posterior object serves states with different subspaces (every seed of
an agent fits its own) and a loaded state carries its subspace.  The inner filter reads them as part of its input:
``update`` / ``predictive`` pass ``x_z = (x, θ*, Aᵀ, space)`` to the model over ``z``.

predict:  ``z ← γ z`` (so ``θ`` shrinks toward ``θ*``), ``Σ_z ← γ² Σ_z + q I_d``
update:   the EKF update of the inner filter on ``y ≈ m(f(A z + θ*, x))``
predictive / sample / mean: those of the inner filter, mapped through ``θ = A z + θ*``.

Basis and offset are flat arrays in the ``jax.flatten_util.ravel_pytree`` order of the parameter pytree
(``ParamSpace.ravel``); the offset may also be given as a parameter pytree.  ``offset=None`` uses the
parameters passed to ``init``.  ``init(params)`` starts ``z`` at the least-squares coordinates of
``params − θ*`` in the basis, ``z_0 = argmin ‖A z − (params − θ*)‖`` (``= Aᵀ(params − θ*)`` for orthonormal
columns), so that ``mean(init(params))`` is the point of the subspace closest to ``params`` — zero in the usual
case ``θ* = params`` — and the prior ``z ~ N(z_0, init_cov · I)`` is centred where the user's weights are.

A learned subspace (no ``basis`` given): ``init`` stores a zero placeholder basis ``Aᵀ = 0 (dim, P)`` through the
initial weights, and the posterior does not learn until ``refit`` (the :class:`~banditkit.posteriors.base.Posterior`
hook) gives it a basis.  ``refit(key, state, xs, ys, weights)`` with ``xs`` (leading axes ``(n, E)``), ``ys (n, E,
C)`` and ``weights (n, E)``:

* ``n = 0``: a random orthonormal basis through the current mean, ``θ* = mean(state)`` (:func:`subspace_random`);
* ``n > 0``: seed 002's fit, :func:`subspace_from_sgd` from ``θ_0 = mean(state)`` on the model of one example
  ``g(θ, x_{i·}) = [f(θ, x_{i1}); …; f(θ, x_{iE})] (E, C)`` with the loss ``Σ_e w_ie · ½‖f(θ, x_ie) − y_ie‖²``
  (``sgd=dict(loss=...)`` changes it), then ``A`` = the SVD of the iterates (``fit_basis="svd"``) or a random
  orthonormal basis (``"random"``), through ``θ*`` = the final iterate.

The returned state starts at ``z = 0`` (``θ = θ*``, prior ``N(0, init_cov · I)``) and has *not* seen the data.  With
an explicit basis the subspace is fixed and ``refit`` is ``None``.

Helpers that build ``(basis, offset)``:

:``subspace_from_sgd``:  seed 002's protocol: optax SGD (momentum) on warm-up data, keep every ``skip``-th iterate
                       after ``burn_in`` steps, ``θ*`` = the final iterate, ``A`` = top-``d`` right singular
                       vectors of the *centred* iterate matrix (the reference code's sklearn PCA centres).
:``subspace_random``:    random orthonormal ``A`` (QR of a Gaussian draw; orthonormal so ``‖θ − θ*‖ = ‖z‖`` and an
                       isotropic prior on ``z`` is isotropic in the subspace), ``θ* = params``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from banditkit._xla.conv import canonical_convs
from banditkit.debug import nonfinite_fields
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, check_common_hyper
from banditkit.posteriors.diag_ekf import diag_ekf
from banditkit.posteriors.ekf import ekf
from banditkit.posteriors.registry import Backend, register

Array = jax.Array
PyTree = Any

#: the warm-up SGD's settings when ``sgd=`` does not set them (seed 002's bandit agent, on unit-scale rewards)
SGD_DEFAULTS = dict(n_iters=500, learning_rate=0.05, skip=2)
_SGD_RESERVED = ("dim", "key", "mask", "basis")  # set by refit itself (dim=, fit_basis=, its key, the weights)


class SubspaceState(NamedTuple):
    inner: Any  # EKFState or DiagEKFState over z (d,)
    offset: Array  # θ* (P,)
    basis_rows: Array  # Aᵀ (d, P), one basis vector per row
    space: ParamSpace  # the parameter layout (static, no leaves)


def _flat_offset(offset, space: ParamSpace) -> Array:
    if offset is None:
        return None
    if isinstance(offset, (jax.Array, jnp.ndarray)) or hasattr(offset, "shape"):
        off = jnp.ravel(jnp.asarray(offset, space.dtype))
    else:
        off = space.ravel(offset).astype(space.dtype)
    if off.shape != (space.size,):
        raise ValueError(f"subspace_ekf: offset has {off.size} entries but the model has P={space.size} parameters")
    return off


def subspace_ekf(
    apply_fn: ApplyFn,
    likelihood: Likelihood = Gaussian(1.0),
    *,
    basis: Array | None = None,
    basis_rows: Array | None = None,
    offset: Array | PyTree | None = None,
    dim: int | None = None,
    fit_basis: str = "svd",
    sgd: dict | None = None,
    init_cov: float = 1.0,
    covariance: str = "full",
    dynamics_cov: float = 0.0,
    forgetting: float = 1.0,
) -> Posterior:
    """EKF on subspace coordinates ``z`` with ``θ = A z + θ*`` (see the module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input.
      likelihood: observation model.
      basis: ``A (P, d)``, columns spanning the subspace (orthonormal columns recommended): a fixed subspace.
      basis_rows: the same basis as ``Aᵀ (d, P)``, one basis vector per row: the layout the filter computes with.
        Give at most one of ``basis`` / ``basis_rows``.  With neither, the subspace is learned: ``init`` keeps a
        zero placeholder and the posterior learns only after ``refit`` (a bandit agent calls it after its warm-up,
        or at ``init`` without one).
      offset: ``θ* (P,)`` flat, or a parameter pytree, or ``None`` (= the params given to ``init``).
      dim: ``d`` of a learned subspace (default 20); with a basis, ``d`` is the basis's (``dim`` must agree).
      fit_basis: a learned subspace's basis after the SGD fit: ``"svd"`` (the iterates' principal directions, seed
        002's EKF-Sub-SVD) or ``"random"`` (a random orthonormal basis through ``θ*``, EKF-Sub-RND).
      sgd: :func:`subspace_from_sgd` settings of ``refit``'s fit (default :data:`SGD_DEFAULTS`:
        ``n_iters=500, learning_rate=0.05, skip=2``; e.g. ``dict(n_iters=1000, learning_rate=0.8, clip_norm=0.1)``).
      init_cov: prior variance of each coordinate of ``z``.
      covariance: ``"full"`` (``d × d`` covariance, EKF) or ``"diagonal"`` (VD-EKF on ``z``).
      dynamics_cov: ``q``, random-walk variance of ``z`` per ``predict``.
      forgetting: ``γ``, ``z ← γ z`` per ``predict`` (``θ`` shrinks toward ``θ*``).
    """
    check_common_hyper("subspace_ekf", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if covariance not in ("full", "diagonal"):
        raise ValueError(f"subspace_ekf: covariance={covariance!r} must be 'full' or 'diagonal'")
    if basis is not None and basis_rows is not None:
        raise ValueError(
            "subspace_ekf: give basis, a (P, d) array whose columns span the subspace, or basis_rows, its (d, P) "
            "transpose, but not both (or neither, to learn the subspace with refit)"
        )
    given = basis if basis_rows is None else basis_rows
    if given is not None and jnp.ndim(given) != 2:
        raise ValueError(
            f"subspace_ekf: the basis must be a matrix, (P, d) as basis or (d, P) as basis_rows; got shape "
            f"{jnp.shape(given)}; build one with subspace_from_sgd(...) or subspace_random(...)"
        )
    rows = None if given is None else (basis_rows if basis_rows is not None else _rows_of(basis))
    if rows is not None and dim is not None and dim != jnp.shape(rows)[0]:
        raise ValueError(f"subspace_ekf: dim={dim} but the basis has d={jnp.shape(rows)[0]} directions")
    d = jnp.shape(rows)[0] if rows is not None else (20 if dim is None else dim)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"subspace_ekf: dim must be an integer >= 1, got {dim!r}")
    d = int(d)
    if fit_basis not in ("svd", "random"):
        raise ValueError(f"subspace_ekf: fit_basis={fit_basis!r} must be 'svd' or 'random'")
    sgd_opts = dict(SGD_DEFAULTS, **(sgd or {}))
    reserved = sorted(set(sgd_opts) & set(_SGD_RESERVED))
    if reserved:
        raise ValueError(f"subspace_ekf: sgd={sgd!r} sets {reserved}, which refit sets itself; pass dim= and "
                         "fit_basis= to subspace_ekf instead")

    def apply_z(z, xz):  # the model over z: x_z = (x, θ*, Aᵀ, space)
        x, off, at, space = xz
        return apply_fn(space.unravel(off + z @ at.astype(z.dtype)), x)

    make = ekf if covariance == "full" else diag_ekf
    inner = make(apply_z, likelihood, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)

    def _start(z0: Array, offset: Array, at: Array, space: ParamSpace) -> SubspaceState:
        return SubspaceState(inner.init(z0), offset, at, space)

    def init(params, example_x=None) -> SubspaceState:
        space = ParamSpace.of(params)
        if rows is not None and jnp.shape(rows)[1] != space.size:
            raise ValueError(
                f"subspace_ekf: basis has {jnp.shape(rows)[1]} rows but the model has P={space.size} parameters; "
                "the basis must be (P, d) in ravel_pytree order (basis_rows: (d, P))"
            )
        if rows is None and d > space.size:
            raise ValueError(f"subspace_ekf: dim={d} must be in [1, P={space.size}]")
        theta = space.ravel(params)
        at = jnp.zeros((d, space.size), theta.dtype) if rows is None else jnp.asarray(rows, theta.dtype)
        off = _flat_offset(offset, space)
        if off is None:
            return _start(jnp.zeros((d,), theta.dtype), theta, at, space)
        return _start(jnp.linalg.lstsq(at.T, theta - off)[0], off, at, space)

    def predict(state: SubspaceState) -> SubspaceState:
        return state._replace(inner=inner.predict(state.inner))

    def _xz(state: SubspaceState, x):
        return (x, state.offset, state.basis_rows, state.space)

    def update(state: SubspaceState, x, y) -> SubspaceState:
        return state._replace(inner=inner.update(state.inner, _xz(state, x), y))

    def predictive(state: SubspaceState, x) -> tuple[Array, Array]:
        return inner.predictive(state.inner, _xz(state, x))

    def _theta(state: SubspaceState, z: Array) -> PyTree:
        return state.space.unravel(state.offset + z @ state.basis_rows.astype(z.dtype))

    def sample(key: Array, state: SubspaceState):
        return _theta(state, inner.sample(key, state.inner))

    def mean(state: SubspaceState):
        return _theta(state, inner.mean(state.inner))

    def refit(key: Array, state: SubspaceState, xs: PyTree, ys: Array, weights: Array) -> SubspaceState:
        params = mean(state)
        if jnp.shape(ys)[0] == 0:  # no observations: a random subspace through the current mean
            a, off = subspace_random(key, params, d)
        else:

            def group_apply(p, xg):  # one example: its E observations, (E, C)
                return jax.vmap(lambda x: jnp.atleast_1d(apply_fn(p, x)))(xg)

            ys = jnp.asarray(ys)
            mask = jnp.broadcast_to(jnp.asarray(weights, ys.dtype)[..., None], ys.shape)
            a, off = subspace_from_sgd(group_apply, params, xs, ys, dim=d, key=key, mask=mask, basis=fit_basis,
                                       **sgd_opts)
        at = jnp.transpose(a).astype(off.dtype)  # (d, P): one basis vector per row, the filter's layout
        return _start(jnp.zeros((d,), off.dtype), off, at, state.space)

    hyper = dict(init_cov=init_cov, covariance=covariance, dynamics_cov=dynamics_cov, forgetting=forgetting, dim=d)
    if rows is None:  # a learned subspace: how refit fits it (settings that are plain values)
        plain = (bool, int, float, str, type(None))
        hyper.update(fit_basis=fit_basis, sgd={k: v for k, v in sorted(sgd_opts.items()) if isinstance(v, plain)})
    return Posterior(init, predict, update, predictive, sample, mean, name="subspace_ekf", hyper=hyper,
                     refit=refit if rows is None else None)


def _rows_of(basis: Array) -> Array:
    """``Aᵀ (d, P)`` stored row-major from a ``(P, d)`` basis: a NumPy array is copied here; a JAX array outside a
    trace is transposed eagerly (one copy); inside a trace the transpose is staged once, outside any loop over
    steps that calls the posterior."""
    if isinstance(basis, np.ndarray):
        return np.ascontiguousarray(basis.T)
    return jnp.transpose(jnp.asarray(basis))


def subspace_random(key: Array, params: PyTree, dim: int) -> tuple[Array, Array]:
    """Random subspace through ``params``: ``(A (P, dim)`` with orthonormal columns, ``θ* = ravel(params))``."""
    theta = ParamSpace(params).ravel(params)
    if not 0 < dim <= theta.size:
        raise ValueError(f"subspace_random: dim must be in [1, P={theta.size}], got {dim}")
    return linalg.orthonormal_rows(key, dim, theta.size, theta.dtype).T, theta


def _mse(f: Array, y: Array, w: Array) -> Array:
    return 0.5 * jnp.sum(w * (f - y) ** 2)


def _cross_entropy(f: Array, y: Array, w: Array) -> Array:
    return -jnp.sum(w * y * jax.nn.log_softmax(f))


def _bce(f: Array, y: Array, w: Array) -> Array:
    return -jnp.sum(w * (y * jax.nn.log_sigmoid(f) + (1 - y) * jax.nn.log_sigmoid(-f)))


_LOSSES = {"mse": _mse, "cross_entropy": _cross_entropy, "bce": _bce}


def subspace_from_sgd(
    apply_fn: ApplyFn,
    params: PyTree,
    xs: PyTree,
    ys: Array,
    *,
    dim: int,
    n_iters: int = 1000,
    learning_rate: float = 0.05,
    momentum: float = 0.9,
    batch_size: int | None = None,
    skip: int = 2,
    burn_in: int = 0,
    key: Array | None = None,
    loss: str | Callable[[Array, Array, Array], Array] = "mse",
    mask: Array | None = None,
    optimizer: optax.GradientTransformation | None = None,
    clip_norm: float | None = None,
    basis: str = "svd",
) -> tuple[Array, Array]:
    """Seed 002's learned subspace from a warm-up SGD trajectory.

    Runs ``n_iters`` optimiser steps (default ``optax.sgd(learning_rate, momentum)``, the reference code's
    setting; full batch unless ``batch_size``) on the mean per-example ``loss`` over ``(xs, ys)``, drops the
    first ``burn_in`` iterates, keeps every ``skip``-th of the rest (``n = (n_iters − burn_in) // skip`` iterates
    ``Θ (n, P)``), and returns

    ``offset θ* = θ_{n_iters}`` (the final iterate) and ``basis A (P, dim)`` = the top-``dim`` right singular vectors
    of the centred ``Θ − mean(Θ)`` (orthonormal columns).

    ``basis="random"`` is seed 002's EKF-Sub-RND: the same fit gives the offset ``θ*``, but ``A (P, dim)`` is a
    random orthonormal basis drawn from ``key`` (the QR of a Gaussian draw, :func:`subspace_random`'s), so only the
    offset is learned; ``dim`` may then exceed the number of kept iterates.

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one input.
      params: starting parameters (pytree).
      xs: warm-up inputs, any pytree with a leading axis ``N``.
      ys: warm-up targets ``(N, C)`` (or ``(N,)`` for ``C = 1``).
      dim: subspace dimension ``d ≤ n``.
      loss: ``"mse"`` (½‖f − y‖²), ``"cross_entropy"`` (one-hot ``y``, softmax logits), ``"bce"`` (sigmoid), or a
        callable ``loss(f (C,), y (C,), w (C,)) -> scalar``.
      mask: optional ``(N, C)`` weights; bandit feedback fits only the pulled arm's output (one-hot mask).
      key: PRNG key for the minibatches (needed only with ``batch_size``).
      clip_norm: optional bound on the gradient's L2 norm, ``g ← g · min(1, c/‖g‖)`` before the optimiser
        (``optax.clip_by_global_norm``); a guard for large learning rates (the reference's 0.8 with momentum 0.9
        diverges on some warm-up sets).  ``None`` (default) leaves the gradient as it is.
      basis: ``"svd"`` (default; the SGD iterates' principal directions) or ``"random"`` (needs ``key``).

    Raises ``FloatingPointError`` when the fit diverges (a non-finite final iterate) and the call is eager; under
    ``jit`` / ``vmap`` the NaN is returned (no error is possible there) — the experiment runner's health check
    flags it.
    """
    if isinstance(loss, str):
        if loss not in _LOSSES:
            raise ValueError(f"subspace_from_sgd: loss={loss!r} must be one of {sorted(_LOSSES)} or a callable")
        loss_fn = _LOSSES[loss]
    else:
        loss_fn = loss
    space = ParamSpace(params)
    theta0 = space.ravel(params)
    ys = jnp.asarray(ys, theta0.dtype)
    if ys.ndim == 1:
        ys = ys[:, None]
    n_data = ys.shape[0]
    leading = {jnp.shape(leaf)[0] for leaf in jax.tree_util.tree_leaves(xs)}
    if leading != {n_data}:
        raise ValueError(f"subspace_from_sgd: xs leading axes {sorted(leading)} do not match len(ys)={n_data}")
    w = jnp.ones_like(ys) if mask is None else jnp.asarray(mask, theta0.dtype).reshape(ys.shape)
    n_keep = (n_iters - burn_in) // skip if skip > 0 else 0
    if skip < 1 or burn_in < 0 or n_keep < 1:
        raise ValueError(
            f"subspace_from_sgd: need skip >= 1 and (n_iters - burn_in) // skip >= 1 kept iterates; got n_iters="
            f"{n_iters}, burn_in={burn_in}, skip={skip}"
        )
    if basis not in ("svd", "random"):
        raise ValueError(f"subspace_from_sgd: basis={basis!r} must be 'svd' or 'random'")
    if basis == "random" and key is None:
        raise ValueError("subspace_from_sgd: basis='random' draws the basis from a PRNG key; pass key=...")
    if basis == "random" and not 0 < dim <= theta0.size:
        raise ValueError(f"subspace_from_sgd: dim={dim} must be in [1, P={theta0.size}]")
    if basis == "svd" and not 0 < dim <= min(n_keep, theta0.size):
        raise ValueError(
            f"subspace_from_sgd: dim={dim} must be in [1, min(kept iterates={n_keep}, P={theta0.size})]; "
            "raise n_iters or lower skip"
        )
    if batch_size is not None and key is None:
        raise ValueError("subspace_from_sgd: batch_size needs a PRNG key (key=jax.random.PRNGKey(...))")
    if clip_norm is not None and not clip_norm > 0:
        raise ValueError(f"subspace_from_sgd: clip_norm={clip_norm!r} must be > 0 (or None for no clipping)")
    opt = optimizer if optimizer is not None else optax.sgd(learning_rate, momentum=momentum)
    if clip_norm is not None:
        opt = optax.chain(optax.clip_by_global_norm(clip_norm), opt)

    def batch_loss(theta, idx):
        xb = jax.tree_util.tree_map(lambda a: a[idx], xs)
        fb = jax.vmap(lambda x: jnp.atleast_1d(apply_fn(space.unravel(theta), x)))(xb)
        return jnp.mean(jax.vmap(loss_fn)(fb, ys[idx], w[idx]))

    full = jnp.arange(n_data)

    def step(carry, k):
        theta, opt_state = carry
        if batch_size is None:
            idx = full
        else:
            idx = jax.random.choice(k, n_data, (batch_size,), replace=n_data < batch_size)
        g = jax.grad(batch_loss)(theta, idx)
        upd, opt_state = opt.update(g, opt_state, theta)
        return (optax.apply_updates(theta, upd), opt_state), None

    def run(theta):
        keys = jax.random.split(key if key is not None else jax.random.PRNGKey(0), n_iters)
        carry = (theta, opt.init(theta))
        carry, _ = jax.lax.scan(step, carry, keys[:burn_in])
        rest = keys[burn_in : burn_in + n_keep * skip].reshape(n_keep, skip, *keys.shape[1:])

        def chunk(c, ks):  # keeps the iterate only where the SVD needs it (a random basis ignores the trajectory)
            c, _ = jax.lax.scan(step, c, ks)
            return c, (c[0] if basis == "svd" else None)

        carry, kept = jax.lax.scan(chunk, carry, rest)
        tail = keys[burn_in + n_keep * skip :]
        carry, _ = jax.lax.scan(step, carry, tail)
        return carry[0], kept

    theta_final, kept = jax.jit(canonical_convs(run))(theta0)  # the SGD loop's kernel gradients in the fast layout
    _raise_if_diverged(theta_final, (theta0, ys, xs), n_iters, learning_rate if optimizer is None else None,
                       clip_norm)
    if basis == "random":  # a key apart from the minibatch keys (split(key, n_iters) above)
        return subspace_random(jax.random.fold_in(key, n_iters), params, dim)[0], theta_final
    centred = kept - jnp.mean(kept, axis=0, keepdims=True)
    _, _, vt = jnp.linalg.svd(centred, full_matrices=False)
    return vt[:dim].T, theta_final


def _raise_if_diverged(theta: Array, inputs: PyTree, n_iters: int, learning_rate: float | None,
                       clip_norm: float | None) -> None:
    """Eager calls only: a non-finite final iterate is an error that says what to change (a no-op under tracing).
    ``inputs``: the starting parameters and the data, blamed instead of the step size when they are non-finite."""
    try:
        finite = bool(jnp.all(jnp.isfinite(theta)))
    except jax.errors.ConcretizationTypeError:  # traced (jit / vmap): the caller's health check sees the NaN
        return
    if finite:
        return
    if nonfinite_fields(inputs):
        raise FloatingPointError(
            "subspace_from_sgd: the starting parameters, inputs or targets contain NaN or inf; the fit cannot be "
            "finite — check the warm-up data"
        )
    rate = f"learning_rate={learning_rate}" if learning_rate is not None else "the optimiser's step size"
    raise FloatingPointError(
        f"subspace_from_sgd: the warm-up SGD diverged (non-finite parameters after {n_iters} iterations); "
        f"lower {rate}" + ("" if clip_norm is not None else " or pass clip_norm (e.g. 0.1) to bound the gradient")
    )


register(Backend(
    name="subspace_ekf", factory=subspace_ekf,
    bandit_defaults=dict(init_cov=1.0),
    gaussian_filter=True,
    # the subspace is fitted to warm-up data (refit) unless the caller gives the basis
    refit=lambda hyper: hyper.get("basis") is None and hyper.get("basis_rows") is None,
))
