"""Subspace EKF (seed 002 §5.4–5.5): an EKF over ``z ∈ R^d`` with ``θ = A z + θ*``.

The network keeps all ``P`` parameters, but the filter only moves them inside the affine subspace spanned by the
columns of ``A (P, d)`` through the offset ``θ* (P,)``.  The filter over ``z`` *is* :func:`~banditkit.posteriors.ekf`
(``covariance="full"``, ``Σ_z (d, d)``, Joseph form) or :func:`~banditkit.posteriors.diag_ekf`
(``covariance="diagonal"``), applied to the reparametrised model ``z ↦ apply_fn(unravel(A z + θ*), x)``; the
Jacobian ``H_z = H_θ A (C, d)`` comes from one reverse pass per output through that map (``O(C_f + P d)``).

The basis is kept row-wise, ``Aᵀ (d, P)``: ``θ = θ* + zᵀAᵀ`` and the reverse pass's ``Aᵀ g`` then both stream
contiguous rows of length ``P``.  With the column layout ``A (P, d)`` XLA's CPU matrix–vector products are ~2× (the
forward) and ~4× (the transpose) slower: LeNet5 at ``d = 470`` (a 114 MB basis, read twice per update) measured
10.5 + 20.9 ms per pass pair against 5.7 + 4.8 ms.  Pass ``basis_rows=Aᵀ`` when the basis is built inside a traced
function (the bandit agent does), so no transpose is left inside the loop; a ``(P, d)`` ``basis`` is transposed
once, when the posterior is built.

State: ``inner`` (the EKF / diagonal-EKF state over ``z``) and ``offset θ* (P,)``.

predict:  ``z ← γ z`` (so ``θ`` shrinks toward ``θ*``), ``Σ_z ← γ² Σ_z + q I_d``
update:   the EKF update of the inner filter on ``y ≈ m(f(A z + θ*, x))``
predictive / sample / mean: those of the inner filter, mapped through ``θ = A z + θ*``.

Basis and offset are flat arrays in the ``jax.flatten_util.ravel_pytree`` order of the parameter pytree
(``ParamSpace.ravel``); the offset may also be given as a parameter pytree.  ``offset=None`` uses the
parameters passed to ``init``.  ``init(params)`` starts ``z`` at the least-squares coordinates of
``params − θ*`` in the basis, ``z_0 = argmin ‖A z − (params − θ*)‖`` (``= Aᵀ(params − θ*)`` for orthonormal
columns), so that ``mean(init(params))`` is the point of the subspace closest to ``params`` — zero in the usual
case ``θ* = params`` — and the prior ``z ~ N(z_0, init_cov · I)`` is centred where the user's weights are.

Helpers that build ``(basis, offset)``:
``subspace_from_sgd``  seed 002's protocol: optax SGD (momentum) on warm-up data, keep every ``skip``-th iterate
                       after ``burn_in`` steps, ``θ*`` = the final iterate, ``A`` = top-``d`` right singular
                       vectors of the *centred* iterate matrix (the reference code's sklearn PCA centres).
``subspace_random``    random orthonormal ``A`` (QR of a Gaussian draw; orthonormal so ``‖θ − θ*‖ = ‖z‖`` and an
                       isotropic prior on ``z`` is isotropic in the subspace), ``θ* = params``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from banditkit.convs import canonical_convs
from banditkit.debug import nonfinite_fields
from banditkit.likelihoods import Gaussian, Likelihood
from banditkit.posteriors import linalg
from banditkit.posteriors.base import ApplyFn, ParamSpace, Posterior, SpaceCell, check_common_hyper
from banditkit.posteriors.diag_ekf import diag_ekf
from banditkit.posteriors.ekf import ekf

Array = jax.Array
PyTree = Any


class SubspaceState(NamedTuple):
    inner: Any  # EKFState or DiagEKFState over z (d,)
    offset: Array  # θ* (P,)


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
    init_cov: float = 1.0,
    covariance: str = "full",
    dynamics_cov: float = 0.0,
    forgetting: float = 1.0,
) -> Posterior:
    """EKF on subspace coordinates ``z`` with ``θ = A z + θ*`` (see the module docstring).

    Args:
      apply_fn: ``apply_fn(params, x) -> (C,)`` for one unbatched input.
      likelihood: observation model.
      basis: ``A (P, d)``, columns spanning the subspace (orthonormal columns recommended).
      basis_rows: the same basis as ``Aᵀ (d, P)``, one basis vector per row: the layout the filter computes with.
        Give exactly one of ``basis`` / ``basis_rows``.
      offset: ``θ* (P,)`` flat, or a parameter pytree, or ``None`` (= the params given to ``init``).
      init_cov: prior variance of each coordinate of ``z``.
      covariance: ``"full"`` (``d × d`` covariance, EKF) or ``"diagonal"`` (VD-EKF on ``z``).
      dynamics_cov: ``q``, random-walk variance of ``z`` per ``predict``.
      forgetting: ``γ``, ``z ← γ z`` per ``predict`` (``θ`` shrinks toward ``θ*``).
    """
    check_common_hyper("subspace_ekf", init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)
    if covariance not in ("full", "diagonal"):
        raise ValueError(f"subspace_ekf: covariance={covariance!r} must be 'full' or 'diagonal'")
    if (basis is None) == (basis_rows is None) or jnp.ndim(basis if basis_rows is None else basis_rows) != 2:
        raise ValueError(
            "subspace_ekf: give basis, a (P, d) array whose columns span the subspace (or basis_rows, its (d, P) "
            "transpose), but not both; build one with subspace_from_sgd(...) or subspace_random(...)"
        )
    rows = basis_rows if basis_rows is not None else _rows_of(basis)
    cell = SpaceCell()

    def _theta_flat(z, off):  # θ* + Aᵀ-rows combination: (d,) @ (d, P) -> (P,)
        return off + z @ jnp.asarray(rows, z.dtype)

    def apply_z(z, xo):
        x, off = xo
        return apply_fn(cell.space.unravel(_theta_flat(z, off)), x)

    make = ekf if covariance == "full" else diag_ekf
    inner = make(apply_z, likelihood, init_cov=init_cov, dynamics_cov=dynamics_cov, forgetting=forgetting)

    def init(params) -> SubspaceState:
        space = cell.set(params)
        if jnp.shape(rows)[1] != space.size:
            raise ValueError(
                f"subspace_ekf: basis has {jnp.shape(rows)[1]} rows but the model has P={space.size} parameters; "
                "the basis must be (P, d) in ravel_pytree order (basis_rows: (d, P))"
            )
        theta = space.ravel(params)
        off = _flat_offset(offset, space)
        at = jnp.asarray(rows, theta.dtype)
        if off is None:
            off = theta
            z0 = jnp.zeros((at.shape[0],), theta.dtype)
        else:
            z0 = jnp.linalg.lstsq(at.T, theta - off)[0]
        return SubspaceState(inner.init(z0), off)

    def predict(state: SubspaceState) -> SubspaceState:
        return SubspaceState(inner.predict(state.inner), state.offset)

    def update(state: SubspaceState, x, y) -> SubspaceState:
        return SubspaceState(inner.update(state.inner, (x, state.offset), y), state.offset)

    def predictive(state: SubspaceState, x) -> tuple[Array, Array]:
        return inner.predictive(state.inner, (x, state.offset))

    def _theta(z, off):
        return cell.space.unravel(_theta_flat(z, off))

    def sample(key: Array, state: SubspaceState):
        return _theta(inner.sample(key, state.inner), state.offset)

    def mean(state: SubspaceState):
        return _theta(inner.mean(state.inner), state.offset)

    hyper = dict(
        init_cov=init_cov, covariance=covariance, dynamics_cov=dynamics_cov, forgetting=forgetting,
        dim=int(jnp.shape(rows)[0]),
    )
    return Posterior(init, predict, update, predictive, sample, mean, name="subspace_ekf", hyper=hyper)


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
