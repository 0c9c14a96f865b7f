"""Shared test fixtures, and the compiler setting of the test run.

Most of a small test's time is XLA compiling its programs, so the suite compiles with LLVM's cheap pipeline
(``--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true``, which ``tests/fast_compile.py``
had passed to a few programs only): the same HLO and the same maths, only the generated machine code is
less optimised, which the tests' tiny programs do not feel.  Measured on the 2-core CI machine kind, the whole suite
as ``scripts/test.sh`` runs it (two workers), back to back on one checkout: 1123 s with the compiler's defaults, 825 s
with these flags (user time 35.7 → 25.9 min).  On the pinned jaxlib series (``.ci/constraints.txt``, 0.10) the CPU
backend also emits its fusions with the classic loop emitters instead of the MLIR fusion emitters
(``--xla_cpu_use_fusion_emitters=false``): the same optimised HLO, a cheaper code generator (its compile time is
what most tests pay).  That flag is added only for jaxlib 0.10.x, where it exists and was measured: XLA stops the
process on a flag it does not know, and a later jaxlib (``BANDITKIT_UNPINNED=1``) may not have it.  Set
``BANDITKIT_TEST_FULL_XLA_OPT=1`` to run the suite with the compiler's defaults, as users' programs compile.
The flags are appended to any ``XLA_FLAGS`` already set, before JAX starts its backend; subprocesses the tests
start inherit them.
"""

import os
import shutil
import sys
import tempfile


def _jaxlib_series() -> tuple[int, ...]:
    """``(major, minor)`` of the installed jaxlib, read without importing it (``()`` if it cannot be read)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return tuple(int(v) for v in version("jaxlib").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return ()


if os.environ.get("BANDITKIT_TEST_FULL_XLA_OPT", "0") != "1":
    _FAST = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    if _jaxlib_series() == (0, 10):
        _FAST += " --xla_cpu_use_fusion_emitters=false"
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
    """A benchmark command run with ``--check`` leaves ``benchmarks.harness.options.CHECK`` set (the next command's
    ``check_args`` resets it); tests that call ``write_outputs`` directly, without a command, must not inherit it
    from an earlier test in the same worker."""
    yield
    options = sys.modules.get("benchmarks.harness.options")
    if options is not None:
        options.CHECK.update(rounds=None, differs=[])


def pytest_unconfigure(config):
    """The process that made the run's compilation cache removes it (the workers found it set and leave it)."""
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


# ------------------------------------------------------------------------------------------------------------------
# The fast tier (``bash scripts/test.sh --fast``) and the per-test durations it is chosen from.
#
# ``BANDITKIT_RECORD_DURATIONS=FILE`` writes every test's seconds (setup + call + teardown, as the controller saw
# them) to FILE as JSON at the end of the run; ``scripts/test.sh --record-durations`` does it into
# ``tests/durations.json``, which is committed.  ``BANDITKIT_FAST=1`` runs a subset chosen from that file: the
# cheapest test of every test file (so every module the suite covers is touched), then the remaining tests in order
# of recorded time while the total stays within ``BANDITKIT_FAST_BUDGET_S`` (default 100 worker-seconds: the recorded
# times come from a full run whose later tests reuse programs compiled by earlier ones, so a subset pays more compile
# time than it recorded — 100 gives about two minutes on 2 cores).  A test with no recorded time (new since the file
# was made) is always kept.
# ------------------------------------------------------------------------------------------------------------------
DURATIONS_FILE = os.path.join(os.path.dirname(__file__), "durations.json")
_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if os.environ.get("BANDITKIT_RECORD_DURATIONS"):
        _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + float(report.duration)


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("BANDITKIT_RECORD_DURATIONS")
    if path and _SECONDS and not hasattr(session.config, "workerinput"):  # the controller (or a single process)
        import json

        with open(path, "w") as f:
            json.dump({k: round(v, 3) for k, v in sorted(_SECONDS.items())}, f, indent=0)
            f.write("\n")


def fast_selection(nodeids: list[str], seconds: dict[str, float], budget: float) -> set[str]:
    """The fast tier's tests among ``nodeids``: every file's cheapest recorded test, every unrecorded test, then
    the rest by increasing recorded time while the recorded total stays ``<= budget``."""
    keep = {n for n in nodeids if n not in seconds}
    by_file: dict[str, list[str]] = {}
    for n in nodeids:
        if n in seconds:
            by_file.setdefault(n.split("::")[0], []).append(n)
    for tests in by_file.values():
        keep.add(min(tests, key=lambda n: seconds[n]))
    total = sum(seconds[n] for n in keep if n in seconds)
    for n in sorted((n for n in nodeids if n not in keep), key=lambda n: seconds[n]):
        if total + seconds[n] > budget:
            break
        keep.add(n)
        total += seconds[n]
    return keep


def pytest_collection_modifyitems(config, items):
    if os.environ.get("BANDITKIT_FAST", "0") != "1":
        return
    import json

    if not os.path.exists(DURATIONS_FILE):
        raise pytest.UsageError(f"the fast tier is chosen from {DURATIONS_FILE}; make it with "
                                "`bash scripts/test.sh --record-durations` (a full run)")
    with open(DURATIONS_FILE) as f:
        seconds = json.load(f)
    keep = fast_selection([i.nodeid for i in items], seconds, float(os.environ.get("BANDITKIT_FAST_BUDGET_S", "100")))
    config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in keep])
    items[:] = [i for i in items if i.nodeid in keep]
