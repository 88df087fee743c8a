"""The README's Python example runs as printed and prints an epsilon and a test accuracy."""

import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_prints_epsilon_and_accuracy():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    printed = out.getvalue()
    eps = [float(x) for x in re.findall(r"epsilon = ([0-9.]+)", printed)]
    acc = [float(x) for x in re.findall(r"test accuracy = ([0-9.]+)", printed)]
    assert len(eps) == 2 and all(0 < e < 10 for e in eps), printed
    assert len(acc) == 1 and acc[0] > 0.8, printed
