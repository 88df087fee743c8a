"""The user guide's Python blocks run as printed: every ```python block of each page of
docs/src, the blocks of one page in order and in one namespace, from a scratch folder holding a
copy of the repository's examples/ folder. A block marked ```python,no-run is shown only; one
marked ```python,mnist needs MNIST from $DPML_DATA_DIR and is skipped, visibly, without it."""

import os
import pathlib
import re
import shutil

import pytest

from conftest import ROOT, binary_path

PAGES = sorted((ROOT / "docs" / "src").glob("*.md"))
BLOCK = re.compile(r"^```python([^\n]*)\n(.*?)^```", re.S | re.M)


def python_blocks(text: str):
    """(attributes, code) of every python block of a page."""
    return [(set(filter(None, a.split(","))), code) for a, code in BLOCK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_of_the_guide_run(page: pathlib.Path, tmp_path, monkeypatch):
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip(f"{page.name} has no python blocks")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    binary = binary_path()
    if binary is not None:
        monkeypatch.setenv("PATH", f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    namespace: dict = {"__name__": "__guide__"}
    for i, (attrs, code) in enumerate(blocks, 1):
        if "no-run" in attrs:
            continue
        if "mnist" in attrs and not os.environ.get("DPML_DATA_DIR"):
            pytest.skip(f"{page.name} block {i} needs MNIST: set DPML_DATA_DIR")
        exec(compile(code, f"{page.name} python block {i}", "exec"), namespace)


def test_the_block_reader_reads_attributes():
    text = "x\n```python,no-run\na = 1\n```\n```python\nb = 2\n```\n"
    assert python_blocks(text) == [({"no-run"}, "a = 1\n"), (set(), "b = 2\n")]
