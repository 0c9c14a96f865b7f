#!/usr/bin/env bash
# Build the documentation (Sphinx; docs/conf.py says why Sphinx) into docs/_build/html, from scratch and with
# warnings as errors (-W --keep-going: every broken reference or bad docstring markup is listed, then the build
# fails), then check that every public name of the API contract is documented (scripts/check_api_docs.py).
# Needs the docs extra: pip install -c .ci/constraints.txt -e '.[docs]'.  Extra arguments go to sphinx-build.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python -c "import sphinx, myst_nb, furo" 2>/dev/null; then
  echo "scripts/docs.sh: the docs extra is not installed: pip install -c .ci/constraints.txt -e '.[docs]'" >&2
  exit 2
fi
start=$SECONDS
python -m sphinx -b html -E -W --keep-going -q docs docs/_build/html "$@"
python scripts/check_api_docs.py docs/_build/html
echo "docs built in $((SECONDS - start)) s: docs/_build/html/index.html"
