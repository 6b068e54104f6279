"""benchmarks/models_per_page.py counts the models of the document a browser holds, as Bokeh itself does."""

from __future__ import annotations

from collections import Counter

from bokeh.document import Document
from bokeh.models import Button, Column, Div, Row, TextInput
from bokeh.protocol import Protocol

from tests.benchmark_module import load_benchmark


def by_type(doc: Document) -> Counter:
    return Counter(type(model).__qualified_model__.rsplit(".", 1)[-1] for model in doc.models)


def test_counts_the_document_after_its_patches_as_bokeh_does() -> None:
    """From a pulled document and a patch that replaces a pane with another (a place filled after load), the
    count is Bokeh's own set of the document's models: the new pane's models in, the replaced pane's out."""
    count = load_benchmark("models_per_page").document_models
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
