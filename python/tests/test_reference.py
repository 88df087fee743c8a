"""The Python reference: every public class and function has a numpydoc docstring whose
"Parameters" section names each of its parameters, and ``help()`` shows them."""

import importlib
import importlib.util
import pathlib
import inspect
import pydoc

import pytest

import dpml
from dpml import accounting, audit, events, learn, mechanisms, stats, tuning

# `dpml.sql` is the function; its module is `dpml.sql` in sys.modules.
sql = importlib.import_module("dpml.sql")

MODULES = [accounting, audit, events, learn, mechanisms, sql, stats, tuning]


def _public():
    seen = set()
    for module in MODULES:
        for name in module.__all__:
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) not in seen:
                seen.add(id(obj))
                yield f"{module.__name__}.{name}", obj
    yield "dpml.Ledger", dpml.Ledger


def _parameters(obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    if inspect.isclass(obj) and target is object.__init__:
        return []
    sig = inspect.signature(target)
    return [
        p.name
        for p in sig.parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


PUBLIC = list(_public())


@pytest.mark.parametrize("name,obj", PUBLIC, ids=[n for n, _ in PUBLIC])
def test_every_public_name_documents_its_parameters(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{name} has no docstring"
    params = _parameters(obj)
    if not params:
        return
    # Result types (dataclasses) document their fields as Attributes.
    assert "Parameters\n----------" in doc or "Attributes\n----------" in doc, (
        f"{name}: no numpydoc Parameters section"
    )
    for p in params:
        assert f"{p} :" in doc or f", {p} :" in doc or f"{p}," in doc, f"{name}: {p} undocumented"
    shown = pydoc.render_doc(obj, renderer=pydoc.plaintext)
    for p in params:
        assert p in shown, f"help({name}) does not show {p}"


def test_functions_say_what_they_return():
    for name, obj in PUBLIC:
        if inspect.isfunction(obj) and inspect.signature(obj).return_annotation not in (
            "None",
            None,
        ):
            assert "Returns\n-------" in (inspect.getdoc(obj) or ""), name


def test_the_reference_chapter_is_generated_from_the_docstrings():
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("make_reference", root / "python" / "make_reference.py")
    assert spec is not None and spec.loader is not None
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    chapter = (root / "docs" / "src" / "python-reference.md").read_text()
    assert chapter == make.reference(), (
        "docs/src/python-reference.md is stale: run "
        "`python python/make_reference.py > docs/src/python-reference.md`"
    )
