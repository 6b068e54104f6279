"""One Bokeh InlineStyleSheet per distinct CSS text in a session's document, instead of a copy per model.

Panel gives each component its stylesheets as a list, and Bokeh writes a text stylesheet into the
document once for every model that lists it. Our house stylesheet (8 KB, on every pane) came to
123 KB of the explorable's 192 KB document; Panel's loading rule (274 bytes) and the focus ring are
on every model too. All of it went over the websocket and through the server's serializer and
the browser's parser on every page load.

Here, as Panel makes a component's model in a served session, each text stylesheet is replaced by
that session's InlineStyleSheet model for the same text: a model is written into the document once
and referred to by id afterwards. BokehJS gives every view its own <style> element from either form,
so the page looks the same (tests/app/test_shared_stylesheets.py, and the browser tests).

Outside a served session (a page built in a test) nothing changes: a Bokeh model may belong to one
document only. A document's entry goes when the document does: Bokeh clears its models' links to the
document when the session is destroyed.

Upstream: app/tuning/UPSTREAM.md, "shared_stylesheets" (what would retire this patch).
"""

from __future__ import annotations

from weakref import WeakKeyDictionary

from bokeh.document import Document
from bokeh.models import InlineStyleSheet
from panel.reactive import Reactive

_original = Reactive._get_properties
SHEETS: WeakKeyDictionary[Document, dict[str, InlineStyleSheet]] = WeakKeyDictionary()


def shared(doc: Document, sheets: list) -> list:
    """`sheets` with each text replaced by the document's one InlineStyleSheet for that text."""
    known = SHEETS.setdefault(doc, {})
    out = []
    for sheet in sheets:
        if isinstance(sheet, str):
            if sheet not in known:
                known[sheet] = InlineStyleSheet(css=sheet)
            sheet = known[sheet]
        out.append(sheet)
    return out


def _get_properties(self, doc):
    properties = _original(self, doc)
    if doc is not None and doc.session_context is not None and properties.get("stylesheets"):
        properties["stylesheets"] = shared(doc, properties["stylesheets"])
    return properties


def apply() -> None:
    """Install once (idempotent)."""
    if Reactive._get_properties is not _get_properties:
        Reactive._get_properties = _get_properties
