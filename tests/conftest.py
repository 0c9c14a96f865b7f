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
import shutil
import sys
import tempfile

if os.environ.get("BANDITKIT_TEST_FULL_XLA_OPT", "0") != "1":
    _FAST = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST}".strip()

# One XLA compilation cache for the whole run, shared by the pytest-xdist workers and the subprocesses the tests
# start (a resumed run, a CLI command and its reference compile the same programs).  The controller makes it
# before the workers start (they inherit the variables) and removes it at the end; an entry is a compiled
# executable keyed by its HLO, flags and versions, so a hit runs the very program a compile would have made.
# BANDITKIT_TEST_COMPILE_CACHE=0 compiles every program afresh; a JAX_COMPILATION_CACHE_DIR of your own is kept.
_OWN_CACHE = None
if os.environ.get("BANDITKIT_TEST_COMPILE_CACHE", "1") != "0" and not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    _OWN_CACHE = tempfile.mkdtemp(prefix="banditkit-tests-xla-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_CACHE
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"

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


def pytest_unconfigure(config):
    """The process that made the run's compilation cache removes it (the workers found it set and leave it)."""
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)
