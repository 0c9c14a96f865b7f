"""Shared test fixtures, and the compiler setting of the test run.

Most of a small test's time is XLA compiling its programs, so the suite compiles with LLVM's cheap pipeline
(``--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true``, which ``tests/fast_compile.py``
had passed to a few programs only): the same HLO and the same maths, only the generated machine code is
less optimised, which the tests' tiny programs do not feel.  Measured on the 2-core CI machine kind, the whole suite
as ``scripts/test.sh`` runs it (two workers), back to back on one checkout: 1123 s with the compiler's defaults, 825 s
with these flags (user time 35.7 → 25.9 min).  Set
``BANDITKIT_TEST_FULL_XLA_OPT=1`` to run the suite with the compiler's defaults, as users' programs compile.
The flags are appended to any ``XLA_FLAGS`` already set, before JAX starts its backend; subprocesses the tests
start inherit them.
"""

import os
import sys

if os.environ.get("BANDITKIT_TEST_FULL_XLA_OPT", "0") != "1":
    _FAST = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST}".strip()

import jax  # noqa: E402  (after XLA_FLAGS: the backend reads them when it starts)
import pytest  # noqa: E402


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
