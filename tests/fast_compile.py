"""Tests' compile helper: ``jax.jit(fn)`` lowered and compiled for these arguments, outputs as NumPy arrays.

The compiler setting is suite-wide (``tests/conftest.py``: XLA's cheap LLVM pipeline unless
``BANDITKIT_TEST_FULL_XLA_OPT=1``), so this helper passes no options of its own."""

from __future__ import annotations

import jax
import numpy as np


def compiled(fn, *args):
    """``jax.jit(fn)`` lowered and compiled for these ``args`` (one program, compiled once)."""
    return jax.jit(fn).lower(*args).compile()


def compiled_call(fn, *args):
    """``jax.jit(fn)(*args)``, outputs as NumPy arrays (same pytree)."""
    return jax.tree_util.tree_map(np.asarray, compiled(fn, *args)(*args))
