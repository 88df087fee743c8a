"""Shared fixtures: the dpml command-line binary (for CLI-vs-Python agreement tests)."""

import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def binary_path():
    """The dpml binary: $DPML_BIN, else target/debug or target/release; None without one."""
    explicit = os.environ.get("DPML_BIN")
    if explicit:
        return pathlib.Path(explicit)
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "dpml"
        if p.exists():
            return p
    return None


@pytest.fixture(scope="session")
def dpml_cli():
    """Runs the dpml binary with --json and returns its parsed output (skips without one)."""
    binary = binary_path()
    if binary is None:
        pytest.skip("no dpml binary: build it with `cargo build -p dpml` or set DPML_BIN")

    def run(*args, check=True):
        r = subprocess.run(
            [str(binary), "--json", *map(str, args)], capture_output=True, text=True
        )
        if check and r.returncode != 0:
            raise AssertionError(f"dpml {' '.join(map(str, args))} failed: {r.stderr}")
        return r if not check else json.loads(r.stdout)

    return run
