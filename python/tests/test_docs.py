"""Every ```python block of README.md and of the user guide (docs/src) runs here, so the
documentation's Python examples cannot drift from the package.

The conventions are those of the command blocks (crates/dpml/tests/docs_examples.rs): a page's
blocks run in order in one scratch folder that holds a copy of the repository's examples/, and
a page's ```sh blocks run there too (with the dpml binary on PATH), so that a Python block can
read what a command wrote. The Python blocks of a page share one namespace, as in a notebook.
Blocks marked `mnist` run only when $DPML_DATA_DIR holds mnist/; `python,torch` blocks need
PyTorch and safetensors; `no-run` blocks are shown only; `cargo` and `pip` commands are not
run. What was skipped is named in the skip message of the page's test.
"""

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, binary_path

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.S | re.M)


def _pages():
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs" / "src").rglob("*.md"))
    return [p for p in pages if re.search(r"^```python", p.read_text(encoding="utf-8"), re.M)]


def _blocks(text):
    """(language, attributes, body) of each fenced block, in order."""
    for m in FENCE.finditer(text):
        words = [w.strip() for w in m.group(1).split(",")]
        yield words[0], set(words[1:]), m.group(2)


def _commands(body):
    """The commands of an sh block: continuations joined, comments and blank lines dropped."""
    commands, pending = [], ""
    for line in body.splitlines():
        code = re.sub(r"(^|\s)#.*$", "", line.strip()).rstrip()
        if code.endswith("\\"):
            pending += code[:-1].rstrip() + " "
            continue
        command, pending = (pending + code).strip(), ""
        if command:
            commands.append(command)
    return commands


def _mnist_dir():
    data = os.environ.get("DPML_DATA_DIR")
    if not data:
        return None
    path = (ROOT / data).resolve()
    return path if (path / "mnist").is_dir() else None


def _has_torch():
    return all(importlib.util.find_spec(m) for m in ("torch", "safetensors"))


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_of(page, tmp_path, monkeypatch):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    mnist = _mnist_dir()
    env = dict(os.environ)
    if mnist:
        (tmp_path / "data").symlink_to(mnist)
        env["DPML_DATA_DIR"] = str(mnist)
    else:
        env.pop("DPML_DATA_DIR", None)
    binary = binary_path()
    if binary is not None:
        env["PATH"] = f"{binary.parent}{os.pathsep}{env.get('PATH', '')}"

    namespace, ran, skipped = {"__name__": "__docs__"}, 0, []
    for lang, attrs, body in _blocks(page.read_text(encoding="utf-8")):
        if lang not in ("sh", "python"):
            continue
        if "no-run" in attrs:
            continue
        if "mnist" in attrs and mnist is None:
            skipped.append(f"a {lang} block needing MNIST (set DPML_DATA_DIR)")
            continue
        if lang == "python":
            if "torch" in attrs and not _has_torch():
                skipped.append("a python block needing PyTorch and safetensors")
                continue
            exec(compile(body, str(page), "exec"), namespace)
            ran += 1
            continue
        for command in _commands(body):
            if command.startswith(("cargo ", "pip ")):
                continue
            if binary is None:
                pytest.skip("no dpml binary for the page's commands: cargo build -p dpml")
            expected = int(next((a[5:] for a in attrs if a.startswith("exit=")), 0))
            r = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
            assert r.returncode == expected, f"{command}: exit {r.returncode}\n{r.stderr}"
    assert ran or skipped, f"{page}: no python block ran"
    if skipped:
        pytest.skip(f"ran {ran} python blocks; skipped " + "; ".join(skipped))


def test_blocks_and_commands_are_read_as_the_rust_test_reads_them():
    text = (
        "x\n```sh,exit=2\ndpml a \\\n  --b 1  # note\n# only\ndpml c --d#e\n```\n"
        "```python,torch\nb = 2\n```\n"
    )
    blocks = list(_blocks(text))
    assert [(lang, attrs) for lang, attrs, _ in blocks] == [("sh", {"exit=2"}), ("python", {"torch"})]
    assert _commands(blocks[0][2]) == ["dpml a --b 1", "dpml c --d#e"]
    assert blocks[1][2] == "b = 2\n"
