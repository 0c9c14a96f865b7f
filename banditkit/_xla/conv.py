"""Convolutions in the layout XLA's CPU backend runs fast, inside loops too.

XLA:CPU rewrites every convolution of a jitted program's entry computation into the layout its fast kernels take
(input ``NHWC``, kernel ``HWIO``, output ``NHWC``; in HLO ``dim_labels=b01f_01io->b01f``), but not the convolutions
inside a ``while`` body (jax-ml/jax#12868). A kernel gradient — JAX's transpose rule emits it as a convolution that
contracts the batch axis, ``f01b_i01o->01bf`` — then runs on a slow generic loop: for LeNet-5's second kernel and
200 images, 129 ms inside ``lax.scan`` against 13 ms in the fast layout on this machine (``docs/usage.md`` §6).
Every SGD fit that loops over batched gradients (the subspace EKF's warm-up, neural-linear's body retraining, replay
SGD) pays it.

:func:`canonical_convs` ``(f)`` is ``f`` with every ``conv_general_dilated`` — including those inside ``jit``,
``scan``, ``while`` and ``cond`` bodies — written as ``transpose → convolution in the fast layout → transpose``.
The arithmetic is the same convolution (same window, padding, dilation, groups, precision); XLA:CPU does not fold
explicit transposes back into a convolution, so the loop body keeps the fast layout.  Functions without
convolutions are returned unchanged in effect (the rewrite is the identity on them).

Convolutions inside ``custom_jvp`` / ``custom_vjp`` rules and ``jax.checkpoint`` (remat) blocks are left as they are
(only ``jit``, ``scan``, ``while`` and ``cond`` are opened).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.extend import core as jcore

_CONV = lax.conv_general_dilated_p


def _fast_specs(nd: int) -> lax.ConvDimensionNumbers:
    """``NHWC, HWIO, NHWC`` for ``nd`` spatial axes, as ``(batch, feature, spatial...)`` index tuples."""
    spatial = tuple(range(1, nd + 1))
    return lax.ConvDimensionNumbers(
        lhs_spec=(0, nd + 1, *spatial), rhs_spec=(nd + 1, nd, *range(nd)), out_spec=(0, nd + 1, *spatial)
    )


def _order(spec: Sequence[int], kernel: bool = False) -> tuple[int, ...]:
    """The axes of an operand, in fast-layout order: ``(batch, spatial..., feature)`` for an image,
    ``(spatial..., in, out)`` for a kernel (``spec`` is ``(batch|out, feature|in, spatial...)``)."""
    return (*spec[2:], spec[1], spec[0]) if kernel else (spec[0], *spec[2:], spec[1])


def _conv(lhs, rhs, *, dimension_numbers: lax.ConvDimensionNumbers, **params):
    """One ``conv_general_dilated`` in the fast layout: transpose the operands in, the result back."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    fast = _fast_specs(len(lhs_spec) - 2)
    if dimension_numbers == fast:
        return _CONV.bind(lhs, rhs, dimension_numbers=fast, **params)
    lhs, rhs = lax.transpose(lhs, _order(lhs_spec)), lax.transpose(rhs, _order(rhs_spec, kernel=True))
    y = _CONV.bind(lhs, rhs, dimension_numbers=fast, **params)
    return lax.transpose(y, tuple(int(i) for i in np.argsort(_order(out_spec))))


def _has_conv(jaxpr: jcore.Jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive is _CONV:
            return True
        for sub in jcore.jaxprs_in_params(eqn.params):
            if _has_conv(sub):
                return True
    return False


def _rewrite_closed(closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
    """``closed`` with its convolutions in the fast layout (the same inputs and outputs)."""
    if not _has_conv(closed.jaxpr):
        return closed
    avals = [v.aval for v in closed.jaxpr.invars]
    return jax.make_jaxpr(functools.partial(_eval, closed.jaxpr, closed.consts))(*avals)


def _rewrite_param(value: Any) -> Any:
    if isinstance(value, jcore.ClosedJaxpr):
        return _rewrite_closed(value)
    if isinstance(value, tuple) and value and all(isinstance(v, jcore.ClosedJaxpr) for v in value):
        return tuple(_rewrite_closed(v) for v in value)
    return value


_SUBJAXPR_PRIMITIVES = {"scan", "while", "cond"}


def _eval(jaxpr: jcore.Jaxpr, consts: Sequence[Any], *args: Any) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v):
        return v.val if isinstance(v, jcore.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        with eqn.ctx.manager:
            if eqn.primitive is _CONV:
                outvals = [_conv(*invals, **eqn.params)]
            elif name in ("jit", "pjit") and _has_conv(eqn.params["jaxpr"].jaxpr):  # inline: we are under a trace
                inner = eqn.params["jaxpr"]
                outvals = _eval(inner.jaxpr, inner.consts, *invals)
            elif name in _SUBJAXPR_PRIMITIVES and any(_has_conv(j) for j in jcore.jaxprs_in_params(eqn.params)):
                params = {k: _rewrite_param(v) for k, v in eqn.params.items()}
                outvals = eqn.primitive.bind(*invals, **params)
            else:
                outvals = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
        if not eqn.primitive.multiple_results and not isinstance(outvals, list):
            outvals = [outvals]
        for v, val in zip(eqn.outvars, outvals, strict=True):
            if not isinstance(v, jcore.DropVar):
                env[v] = val
    return [read(v) for v in jaxpr.outvars]


def canonical_convs(fun: Callable) -> Callable:
    """``fun`` with its convolutions (at any depth of ``jit`` / ``scan`` / ``while`` / ``cond``) in XLA:CPU's fast
    layout; same arguments (positional pytrees), same results.  Wrap the function you ``jax.jit``, outside any
    ``vmap``: ``jax.jit(canonical_convs(jax.vmap(step)))``, so the batched convolutions are rewritten too."""

    @functools.wraps(fun)
    def wrapped(*args):
        closed, out_shape = jax.make_jaxpr(fun, return_shape=True)(*args)
        if not _has_conv(closed.jaxpr):
            return fun(*args)
        out = _eval(closed.jaxpr, closed.consts, *jax.tree_util.tree_leaves(args))
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), out)

    return wrapped
