#!/usr/bin/env bash
# What `pip install banditkit` gives a user, checked the way a user gets it (CI runs this; issue 60):
#   1. build the sdist and, from it, the wheel (python -m build: an isolated build, so the sdist must be complete);
#   2. install the wheel (not the checkout) into a fresh venv outside the checkout, pinned by .ci/constraints.txt;
#   3. from a folder outside the checkout, with an empty data cache, run `banditkit demo` at a tiny size;
#   4. run tests/check_installed_wheel.py there with the venv's Python (banditkit is the venv's copy, every module
#      imports, the shipped tables load, py.typed is present).
# Options: --extras  also check that each extra (data, optuna, serve, bench, test, docs) resolves on its own
#                    (pip install --dry-run into the fresh venv; needs the package index).
#          --keep    keep the work folder (the built sdist / wheel, the venv) and print its path.
# Pip's cache (~/.cache/pip) makes the venv's install of jax & co. a copy, not a download.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EXTRAS=0
KEEP=0
for arg in "$@"; do
  case "$arg" in
    --extras) EXTRAS=1 ;;
    --keep) KEEP=1 ;;
    *) echo "scripts/wheel_check.sh: unknown option $arg (use --extras, --keep)" >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/banditkit-wheel.XXXXXX")
# the venv is ~1 GB of files: removed in the background, so that deleting it does not hold up CI
if [[ "$KEEP" == "1" ]]; then echo "work folder: $WORK"; else trap '(rm -rf "$WORK" &)' EXIT; fi
stamp() { echo "[wheel_check $((SECONDS))s] $*"; }

python -m pip install -q -c .ci/constraints.txt build
stamp "building the sdist and the wheel"
python -m build --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
SDIST=$(ls "$WORK"/dist/banditkit-*.tar.gz)
WHEEL=$(ls "$WORK"/dist/banditkit-*.whl)
for archive in "$SDIST" "$WHEEL"; do  # pyproject's license-files: the LICENSE travels with both
  python -c "import sys, tarfile, zipfile; a = sys.argv[1]
names = tarfile.open(a).getnames() if a.endswith('.tar.gz') else zipfile.ZipFile(a).namelist()
sys.exit(0 if any(n.endswith(('/LICENSE', '.dist-info/licenses/LICENSE')) for n in names) else f'{a}: no LICENSE')" "$archive"
done
stamp "built $(basename "$SDIST") ($(du -k "$SDIST" | cut -f1) KiB) and $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB)"

stamp "installing the wheel into a fresh venv"
python -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
# --no-compile: no .pyc for the thousands of files of jax, scipy & co. (Python compiles what it imports anyway)
"$PY" -m pip install -q --no-compile -c .ci/constraints.txt "$WHEEL" pytest

OUTSIDE="$WORK/outside"
mkdir -p "$OUTSIDE"
printf '[pytest]\n' > "$OUTSIDE/pytest.ini"  # this folder is pytest's root: no ini file of the checkout applies
cp tests/check_installed_wheel.py "$OUTSIDE/"
cd "$OUTSIDE"
export BANDITKIT_DATA="$WORK/empty-cache" BANDITKIT_CHECKOUT="$ROOT"
unset BANDITKIT_TABLES PYTHONPATH
stamp "banditkit demo (tiny) from $OUTSIDE with an empty data cache"
# One agent, 20 rounds, XLA's cheap compile pipeline (as the test suite compiles; tests/conftest.py): the point is
# that the installed command finds its modules and its shipped data, and compiling is most of a tiny run's time.
XLA_FLAGS="${XLA_FLAGS:-} --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true" \
  "$WORK/venv/bin/banditkit" demo --agents HiLoFi-TS --steps 20 --seeds 1 --out "$OUTSIDE/demo" --quiet
test -s "$OUTSIDE/demo/demo.csv" || { echo "the demo wrote no demo.csv" >&2; exit 1; }
stamp "tests/check_installed_wheel.py against the installed package"
"$PY" -m pytest -q -p no:cacheprovider check_installed_wheel.py

if [[ "$EXTRAS" == "1" ]]; then
  for extra in data optuna serve bench test docs; do
    stamp "extra [$extra] on its own (pip install --dry-run)"
    "$PY" -m pip install -q --dry-run --ignore-installed -c "$ROOT/.ci/constraints.txt" "$WHEEL[$extra]" > /dev/null
  done
fi
stamp "the wheel works outside the checkout"
