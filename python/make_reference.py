"""Writes the guide's Python reference chapter from the package's docstrings.

    python python/make_reference.py > docs/src/python-reference.md

The pytest suite regenerates it and compares (python/tests/test_reference.py), so the chapter
cannot drift from the docstrings ``help()`` shows.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any, Iterator, List, Tuple

# Run as a script from python/, the source tree (without its compiled half) would shadow the
# installed package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

# The modules in the order the chapter lists them; `dpml` itself for its top-level names.
# A name re-exported by a later module (accounting re-exports the events) is listed once.
MODULES = ["dpml", "dpml.sql", "events", "accounting", "mechanisms", "stats", "learn", "tuning", "audit"]


def _module(name: str) -> Any:
    return importlib.import_module(name if name.startswith("dpml") else f"dpml.{name}")


def _names(module: Any, seen: set) -> Iterator[Tuple[str, Any]]:
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or id(obj) in seen:
            continue
        # Top-level re-exports are listed with the module that defines them.
        if module.__name__ == "dpml" and obj.__module__ != "dpml.ledger":
            continue
        seen.add(id(obj))
        yield name, obj


def _signature(obj: Any) -> str:
    try:
        target = obj.__init__ if inspect.isclass(obj) else obj
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return "(...)"
    params = [p for p in sig.parameters.values() if p.name != "self"]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def reference() -> str:
    out: List[str] = [
        "# Python reference",
        "",
        "Generated from the package's docstrings by `python python/make_reference.py` (the",
        "tests check that it is current); `help(name)` in Python shows the same text.",
        "",
    ]
    seen: set = set()
    for mod_name in MODULES:
        module = _module(mod_name)
        title = module.__name__ if mod_name != "dpml" else "dpml (top level)"
        out += [f"## `{title}`", ""]
        if mod_name != "dpml":
            out += ["```text", (inspect.getdoc(module) or "").strip(), "```", ""]
        for name, obj in _names(module, seen):
            kind = "class" if inspect.isclass(obj) else "def"
            out += [f"### `{name}`", "", "```text", f"{kind} {name}{_signature(obj)}", ""]
            out += [(inspect.getdoc(obj) or "").strip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(reference(), end="")
