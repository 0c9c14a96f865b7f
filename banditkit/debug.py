"""Checking mode: find where a compiled run first produced a NaN or an infinity.

The jitted core stays branch-free (no ``if isnan`` inside the filters).  Two tools sit outside it:

``first_nonfinite(posterior, state, xs, ys)``
    Replays a stream through ``predict`` + ``update`` in one ``lax.scan`` and records, per step ``t``, one
    finiteness flag for every input leaf (``x``, ``y``), the predictive moments at ``x_t`` before the update
    (``predictive.mean``, ``predictive.cov``; optional) and every leaf of the state after the update. It returns the
    first step with a non-finite flag and the fields involved, ordered cause-first (inputs, then the predictive,
    then the state)::

        {"step": k, "field": "y", "fields": ["y", ".mean", ".cov"], "steps": T, "finite_steps": k}

    ``step`` is ``None`` when everything stayed finite.  Cost: one extra reduction per leaf per step.

``debug_nans()``
    Context manager that turns on ``jax_debug_nans`` and ``jax_debug_infs`` for the block, thread-locally (JAX
    then re-runs the failing jitted function op by op and raises ``FloatingPointError`` at the first primitive
    that produced a NaN/inf) and restores the previous settings afterwards.  Slow; for interactive digging.

``nonfinite_fields(tree)``
    Python-side check of one concrete pytree (e.g. a state restored from disk): the paths of leaves that hold a
    NaN or an infinity.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["first_nonfinite", "debug_nans", "nonfinite_fields"]


def _finite_flags(tree: Any) -> list:
    """One boolean scalar per leaf: ``all(isfinite(leaf))`` (integer / bool / key leaves are always finite)."""
    flags = []
    for leaf in jax.tree_util.tree_leaves(tree):
        a = jnp.asarray(leaf) if not isinstance(leaf, jax.Array) else leaf
        if jnp.issubdtype(a.dtype, jnp.inexact):
            flags.append(jnp.all(jnp.isfinite(a)))
        else:
            flags.append(jnp.asarray(True))
    return flags


def _names(tree: Any, prefix: str) -> list[str]:
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    return [f"{prefix}{p}" for p in paths]


def first_nonfinite(
    posterior: Any,
    state: Any,
    xs: Any,
    ys: Any,
    *,
    predict: bool = True,
    check_predictive: bool = True,
) -> dict:
    """Run ``posterior`` over ``(xs, ys)`` in a compiled scan and report the first non-finite step.

    Args:
      posterior: a :class:`~banditkit.posteriors.Posterior` (``init`` already called for ``state``).
      state: the state to start from.
      xs: inputs stacked on a leading time axis ``T`` (any pytree, like the ``x`` that ``update`` takes).
      ys: observations ``(T, C)`` or ``(T,)``.
      predict: apply ``posterior.predict`` before each update, as a running agent does.
      check_predictive: also check ``posterior.predictive(state, x_t)`` before each update.

    Returns:
      ``dict(step, field, fields, steps, finite_steps)``: ``step`` the 0-based index of the first step at which some
      flag is false (``None`` if none), ``field`` the first offending field in cause-first order (``"x..."``,
      ``"y"``, ``"predictive.mean"``, ``"predictive.cov"``, then state paths such as ``".mean"``), ``fields`` all
      offending fields at that step, ``steps`` = ``T`` and ``finite_steps`` = number of leading all-finite steps.

    Raises:
      ValueError: ``xs`` and ``ys`` disagree on the number of steps, or are empty.
    """
    ys = jnp.asarray(ys)
    x_leaves = jax.tree_util.tree_leaves(xs)
    if not x_leaves or ys.ndim == 0:
        raise ValueError("xs and ys must be stacked on a leading time axis of length T >= 1")
    t_len = int(ys.shape[0])
    for leaf in x_leaves:
        if int(jnp.shape(leaf)[0]) != t_len:
            raise ValueError(
                f"xs and ys must have the same number of steps on axis 0; ys has {t_len}, an xs leaf has shape "
                f"{jnp.shape(leaf)}"
            )
    if ys.ndim == 1:
        ys = ys[:, None]

    x0 = jax.tree_util.tree_map(lambda a: a[0], xs)
    names = _names(x0, "x") + ["y"]
    if check_predictive:
        names += ["predictive.mean", "predictive.cov"]
    names += _names(state, "")

    def step(s, xy):
        x, y = xy
        if predict:
            s = posterior.predict(s)
        flags = _finite_flags(x) + _finite_flags(y)
        if check_predictive:
            m, c = posterior.predictive(s, x)
            flags += _finite_flags(m) + _finite_flags(c)
        s = posterior.update(s, x, y)
        flags += _finite_flags(s)
        return s, jnp.stack(flags)

    @jax.jit
    def run(s, xs_, ys_):
        return jax.lax.scan(step, s, (xs_, ys_))[1]

    flags = np.asarray(run(state, xs, ys))  # (T, n_fields)
    bad_steps = np.flatnonzero(~flags.all(axis=1))
    if bad_steps.size == 0:
        return {"step": None, "field": None, "fields": [], "steps": t_len, "finite_steps": t_len}
    k = int(bad_steps[0])
    fields = [n for n, ok in zip(names, flags[k], strict=True) if not ok]
    return {"step": k, "field": fields[0], "fields": fields, "steps": t_len, "finite_steps": k}


@contextlib.contextmanager
def debug_nans(infs: bool = True) -> Iterator[None]:
    """Within the block, jitted code raises ``FloatingPointError`` at the first NaN (and inf, if ``infs``)."""
    # jax's own context managers are part of the jit cache key, so functions already compiled (and cached) outside
    # the block are re-dispatched with the checks on; plain config.update would miss those cache hits.
    with jax.debug_nans(True), jax.debug_infs(bool(infs)):
        yield


def nonfinite_fields(tree: Any) -> list[str]:
    """Paths (``jax.tree_util.keystr``) of the leaves of a concrete pytree that hold a NaN or an infinity."""
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            continue
        a = np.asarray(leaf)
        if jnp.issubdtype(a.dtype, jnp.inexact) and not np.all(np.isfinite(a.astype(np.float64))):
            out.append(jax.tree_util.keystr(path))
    return out
