"""Shared test fixtures."""

import sys

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


@pytest.fixture(autouse=True)
def _fresh_bench_check_state():
    """A benchmark command run with ``--check`` leaves ``benchmarks.common``'s per-command ``--check`` state set
    (the next command's ``check_args`` resets it); tests that call ``write_outputs`` directly, without a command,
    must not inherit it from an earlier test in the same worker."""
    yield
    common = sys.modules.get("benchmarks.common")
    if common is not None:
        common._CHECK.update(rounds=None, differs=[])
