"""Shared test fixtures."""

import jax
import pytest


@pytest.fixture
def x64():
    """Run one test in float64 (exact-oracle comparisons), restoring the default afterwards."""
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)
