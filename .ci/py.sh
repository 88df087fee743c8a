#!/usr/bin/env bash
# The Python package: build it with `pip install ./python` into a fresh virtual environment
# under target/ and run its pytest suite (with scikit-learn for the clone/cross_val_score
# checks, and pyarrow for dpml.sql's tables). The CLI-agreement tests use target/debug/dpml,
# built here if missing.
# Run from the repository root: bash .ci/py.sh
set -euo pipefail

venv=target/py-ci-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
cargo build --locked -p dpml
"$venv/bin/pip" install --quiet ./python pytest scikit-learn numpy pyarrow
# Run from outside the source tree so that `import dpml` finds the installed package.
cd python/tests
DPML_BIN="$(cd ../.. && pwd)/target/debug/dpml" "../../$venv/bin/python" -m pytest -q .
