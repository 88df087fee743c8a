"""The Python reference: every public class and function has a numpydoc docstring whose
"Parameters" section names each of its parameters, and ``help()`` shows them."""

import inspect
import pydoc

import pytest

import dpml
from dpml import accounting, audit, events, learn, mechanisms, stats

MODULES = [accounting, audit, events, learn, mechanisms, stats]


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
