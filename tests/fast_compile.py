"""Tests' compile helper: most of a small test's time is XLA compiling, so compile its one program with LLVM's cheap
pipeline (the same maths; only the generated code's speed differs, which tiny test programs do not feel)."""

from __future__ import annotations

import jax
import numpy as np

FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def compiled(fn, *args):
    """``jax.jit(fn)`` for these ``args``, compiled with :data:`FAST_COMPILE` (the default compiler if this JAX does
    not take the options)."""
    lowered = jax.jit(fn).lower(*args)
    try:
        return lowered.compile(FAST_COMPILE)
    except Exception:  # pragma: no cover - a JAX without compiler options
        return lowered.compile()


def compiled_call(fn, *args):
    """``jax.jit(fn)(*args)`` compiled with :data:`FAST_COMPILE`, outputs as NumPy arrays (same pytree)."""
    return jax.tree_util.tree_map(np.asarray, compiled(fn, *args)(*args))
