"""app/tuning/shared_stylesheets.py: a served page's document carries each text stylesheet once."""

from __future__ import annotations

import gc
import json
import weakref
from collections import Counter

import pytest
from bokeh.document import Document
from bokeh.models import Div, ImportedStyleSheet, InlineStyleSheet

from blocktrace.app.server.routes import routes
from blocktrace.app.tuning import shared_stylesheets
from blocktrace.explorables.components.style import stylesheet
from tests.app.bokeh_ws_client import models, pull_document

ROUTES = routes()
BOKEH_STYLED = {"Tooltip", "Figure", "Toolbar"}  # a widget's help text; explorables/components/focus.py
PAGES = ["/", "/explorables/transformer-block-trace", "/lessons/transformer-block", "/explorables/block-floor"]


@pytest.mark.parametrize("path", PAGES)
def test_a_served_document_holds_each_stylesheet_text_once(server, path: str) -> None:
    """Our house sheet and Panel's own rules: one InlineStyleSheet each, listed by many models."""
    document = pull_document(server.url(path))
    sheets = [m for m in models(document) if m.get("name") == "InlineStyleSheet"]
    texts = Counter(m["attributes"]["css"] for m in sheets)
    assert texts and max(texts.values()) == 1, [t[:60] for t, n in texts.items() if n > 1]
    house = [m["id"] for m in sheets if m["attributes"]["css"] == stylesheet()]
    assert len(house) == 1
    listing = [m for m in models(document) if any(isinstance(s, dict) and s.get("id") == house[0]
                                                  for s in m.get("attributes", {}).get("stylesheets", []))]
    assert len(listing) >= 2  # shared, not merely present
    assert json.dumps(document).count("blocktrace: one stylesheet") == 1
    # Text is left only on the few Bokeh models we style directly rather than through Panel.
    assert {m["name"] for m in models(document)
            if any(isinstance(s, str) for s in m.get("attributes", {}).get("stylesheets", []))} <= BOKEH_STYLED


@pytest.mark.parametrize("path", ["/explorables/transformer-block-trace", "/lessons/transformer-block"])
def test_a_page_built_outside_a_session_keeps_its_text_stylesheets(path: str) -> None:
    """Without a served session a model may end up in any document, so nothing is shared."""
    root = ROUTES[path]().get_root(Document())
    texts = [s for m in root.references() for s in getattr(m, "stylesheets", ()) if isinstance(s, str)]
    assert stylesheet() in texts


def test_one_model_per_text_per_document() -> None:
    """The same text gets the same model in one document, another model in another document."""
    first, second = Document(), Document()
    a = shared_stylesheets.shared(first, ["p { color: red; }", "b {}"])
    b = shared_stylesheets.shared(first, ["b {}", "p { color: red; }"])
    c = shared_stylesheets.shared(second, ["p { color: red; }"])
    assert all(isinstance(s, InlineStyleSheet) for s in a + b + c)
    assert (a[0] is b[1], a[1] is b[0], a[0] is c[0]) == (True, True, False)
    assert a[0].css == "p { color: red; }"


def test_stylesheet_models_are_left_as_they_are() -> None:
    """Panel's imported stylesheets (and any other model) pass through unchanged, in order."""
    doc = Document()
    imported = ImportedStyleSheet(url="a.css")
    out = shared_stylesheets.shared(doc, [imported, "x {}"])
    assert out[0] is imported and out[1].css == "x {}"


def test_a_destroyed_documents_sheets_go_with_it() -> None:
    """Once Bokeh destroys a session's document, nothing here keeps it (or its sheets) alive."""
    doc = Document()
    doc.add_root(Div(text="hi", stylesheets=shared_stylesheets.shared(doc, ["div { margin: 0; }"])))
    gone = weakref.ref(doc)
    assert doc in shared_stylesheets.SHEETS

    def session(event) -> None:  # Bokeh destroys a document with the session that listens to it
        pass

    doc.on_change(session)
    doc.destroy(session)
    del doc
    gc.collect()
    assert gone() is None
