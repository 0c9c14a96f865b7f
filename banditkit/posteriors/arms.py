"""The arm-block structure of a ``K``-output head observed one arm at a time (``arms=K`` of ``linear``, ``hilofi``,
``kalman_last_layer``).

A ``K``-output ``Dense`` head has leaves whose last axis is ``K`` (kernel ``(D, K)``, bias ``(K,)``), and output ``k``
depends only on slice ``[..., k]`` of every leaf: the head's parameters split into ``K`` blocks ``θ_k (P_k,)``,
``P_k = P / K``.  A bandit agent observes the selected output ``f(θ, x)·e_a``, whose Jacobian row is zero outside
block ``a``, so a Gaussian posterior over the head that starts block-diagonal stays block-diagonal under every
Kalman update and isotropic time update: the ``K`` diagonal blocks are all there is to keep (``K P_k²`` numbers
instead of ``K² P_k²``, and an update touches one block).

:func:`arm_index` gives the ``(K, P_k)`` index of the blocks in a :class:`~banditkit.posteriors.base.ParamSpace`'s
flat vector (ravel order, or the last-layer vector of :meth:`ParamSpace.split`): a static numpy array derived from
the layout a backend keeps in its state, cached per ``(space, arms)``, so nothing is stored in the factory.
:func:`arm_blocks` is the same index for a parameter pytree; :func:`observed_block` finds the block a Jacobian row
touches.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from banditkit._xla import flat_random as rng

Array = jax.Array


def check_arms(arms, who: str) -> None:
    """``ValueError`` unless ``arms`` is a positive int."""
    if not isinstance(arms, int) or isinstance(arms, bool) or arms < 1:
        raise ValueError(f"{who}: arms must be a positive int (the number of arms) or None, got {arms!r}")


def _index(shapes, paths, arms: int, who: str) -> np.ndarray:
    """``(K, P_k)`` flat indices over the leaves ``shapes`` (named ``paths``), concatenated in order."""
    check_arms(arms, who)
    blocks, offset = [], 0
    for shape, path in zip(shapes, paths, strict=True):
        if not shape or shape[-1] != arms:
            raise ValueError(
                f"{who}(arms={arms}): parameter {path} has shape {shape}, but every parameter of the per-arm block "
                f"must have last axis {arms} (one slice per arm, as in a {arms}-output Dense head: kernel "
                f"(D, {arms}), bias ({arms},)); use arms=None for one joint block"
            )
        n = int(np.prod(shape))
        blocks.append(offset + np.arange(n).reshape(-1, arms).T)  # (K, n / K): element (..., k) -> arm k
        offset += n
    if not blocks:
        raise ValueError(f"{who}(arms={arms}): the per-arm block has no parameters")
    index = np.concatenate(blocks, axis=1).astype(np.int32)
    index.flags.writeable = False
    return index


def arm_blocks(params, arms: int, *, keep=None, who: str = "linear") -> np.ndarray:
    """``(K, P_k)`` flat indices of each arm's parameters.

    Args:
      params: the parameter pytree (only shapes are read).
      arms: ``K``; every kept leaf must have last axis ``K`` and arm ``k`` owns its slice ``[..., k]``.
      keep: optional list of booleans, one per leaf, selecting the leaves that form the flat vector (e.g. the last
        layer's, ``ParamSpace.is_last``); indices count only kept leaves, in tree order.
      who: the factory's name for error messages.

    Raises ``ValueError`` naming the first kept leaf that does not fit.
    """
    leaves, _ = jax.tree_util.tree_flatten_with_path(params)
    keep = [True] * len(leaves) if keep is None else list(keep)
    kept = [(tuple(np.shape(leaf)), jax.tree_util.keystr(path))
            for (path, leaf), k in zip(leaves, keep, strict=True) if k]
    return _index([s for s, _ in kept], [p for _, p in kept], arms, who)


@functools.lru_cache(maxsize=256)
def arm_index(space, arms: int, who: str = "linear", last: bool = False) -> np.ndarray:
    """``(K, P_k)`` arm blocks of a :class:`~banditkit.posteriors.base.ParamSpace`: indices into its ravel vector
    ``(P,)``, or with ``last=True`` into its last-layer vector ``ℓ (D_ℓ,)``.

    Static (a read-only numpy array read from the layout's shapes and paths), so a backend calls it at trace time on
    the ``space`` of the state it is given; cached per ``(space, arms, who, last)``.  ``ValueError`` as
    :func:`arm_blocks` for a leaf without last axis ``K``.
    """
    kept = [(s, p) for s, p, is_last in zip(space.shapes, space.paths, space.is_last, strict=True)
            if is_last or not last]
    return _index([s for s, _ in kept], [p for _, p in kept], arms, who)


def eye_blocks(arms: int, size: int, dtype) -> Array:
    """``K`` identity blocks ``(K, P_k, P_k)`` for a per-arm vector of ``size = K·P_k`` entries (a prior's root)."""
    pk = size // arms
    return jnp.broadcast_to(jnp.eye(pk, dtype=dtype), (arms, pk, pk))


def check_one_output(outputs: int, arms: int, who: str) -> None:
    """``ValueError`` unless an observation has one output (the agent's selected output ``f(x)·e_a``)."""
    if outputs != 1:
        raise ValueError(
            f"{who}(arms={arms}) observes one arm at a time: the model must return one output per observation (the "
            f"agent's selected-output model f(x)·e_a), got {outputs}; use arms=None for one joint block over several "
            f"outputs"
        )


def observed_block(row: Array, index: np.ndarray) -> tuple[Array, Array, Array, Array]:
    """The block a Jacobian row ``(P,)`` touches: ``(k, row_k (P_k,), index_k (P_k,), seen)``.

    ``k = argmax_k ‖row_k‖`` — for one-arm observations the only nonzero block; ``seen`` is False when the row is
    zero everywhere (then ``k = 0`` and an update with ``row_k = 0`` changes no mean or covariance).
    """
    idx = jnp.asarray(index)
    blocks = row[idx]  # (K, P_k)
    norms = jnp.sum(blocks * blocks, axis=1)
    k = jnp.argmax(norms)
    return k, blocks[k], idx[k], norms[k] > 0


def sample_blocks(key: Array, roots: Array) -> Array:
    """``(K, P_k)`` draws ``U_kᵀ z_k`` from upper square roots ``U (K, P_k, P_k)`` (``Σ_k = U_kᵀ U_k``)."""
    z = rng.normal(key, roots.shape[:2], roots.dtype)
    return jnp.einsum("kji,kj->ki", roots, z)


def scatter_blocks(blocks: Array, index: np.ndarray, size: int) -> Array:
    """The flat ``(size,)`` vector whose arm-``k`` entries are ``blocks[k]`` (the inverse of gathering by index)."""
    return jnp.zeros((size,), blocks.dtype).at[jnp.asarray(index)].set(blocks)
