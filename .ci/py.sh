#!/usr/bin/env bash
# The Python package: build it with `pip install ./python` into a fresh virtual environment
# under target/ and run its pytest suite (with scikit-learn and joblib for the clone, pickling
# and cross_val_score checks, pyarrow for dpml.sql's tables), then check the type stubs: mypy type-checks the package against
# them and stubtest compares the compiled module with its stub. The CLI-agreement tests use
# target/debug/dpml, built here if missing.
#
# Users' `pip install ./python` builds the release profile; CI builds the dev profile (the
# workspace's: dependencies optimised, dpml's crates at opt-level 1), which reuses what `cargo
# test` built, so CI time does not grow. Set DPML_PY_PROFILE=release to test what users get.
# Run from the repository root: bash .ci/py.sh
set -euo pipefail

venv=target/py-ci-venv
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
cargo build --locked -p dpml
MATURIN_PEP517_ARGS="--profile ${DPML_PY_PROFILE:-dev}" \
  "$venv/bin/pip" install --quiet ./python pytest scikit-learn joblib numpy mypy pyarrow
# The stubs against the package and the compiled module.
(cd python && "../$venv/bin/python" -m mypy --config-file pyproject.toml -p dpml)
"$venv/bin/python" -m mypy.stubtest dpml._native
# Run from outside the source tree so that `import dpml` finds the installed package.
cd python/tests
DPML_BIN="$(cd ../.. && pwd)/target/debug/dpml" "../../$venv/bin/python" -m pytest -q .
