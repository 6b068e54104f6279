"""benchmarks/models_per_page.py counts the models of the document a browser holds, as Bokeh itself does."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

from bokeh.document import Document
from bokeh.models import Button, Column, Div, Row, TextInput
from bokeh.protocol import Protocol

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "models_per_page.py"


def load_benchmark() -> ModuleType:
    """benchmarks/models_per_page.py as a module (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("models_per_page_under_test", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def by_type(doc: Document) -> Counter:
    return Counter(type(model).__qualified_model__.rsplit(".", 1)[-1] for model in doc.models)


def test_counts_the_document_after_its_patches_as_bokeh_does() -> None:
    """From a pulled document and a patch that replaces a pane with another (a place filled after load), the
    count is Bokeh's own set of the document's models: the new pane's models in, the replaced pane's out."""
    count = load_benchmark().document_models
    doc = Document()
    field = TextInput(title="Input vector")
    page = Column(children=[Div(text="<p>Drawing the plot…</p>"), field])
    doc.add_root(page)
    pulled = Protocol().create("PULL-DOC-REPLY", "request", doc).content  # as the server sends it
    assert count(pulled, []) == by_type(doc)
    events = []
    doc.on_change(events.append)
    page.children = [Row(children=[Div(text="<table></table>"), Button(label="Commit prediction")]), field]
    patch = Protocol().create("PATCH-DOC", events)
    after = count(pulled, [patch.content])
    assert after == by_type(doc)
    assert after != count(pulled, [])
