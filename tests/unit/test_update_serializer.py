"""Our PATCH-DOC serializer writes exactly the message Bokeh's own writes (app/tuning/update_serializer.py)."""

from __future__ import annotations

import copy
import re

import numpy as np
import panel as pn
from bokeh.core.json_encoder import serialize_json
from bokeh.document import Document
from bokeh.models import ColumnDataSource, Div
from bokeh.plotting import figure
from bokeh.protocol.messages.patch_doc import patch_doc

from blocktrace.app.tuning import update_serializer
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable


def served_page() -> tuple[Document, TraceExplorable]:
    view = TraceExplorable(predict=False)
    doc = Document()
    root = pn.Column(view).get_root(doc)
    doc.add_root(root)
    doc.models.flush_synced()  # the browser has the page now
    return doc, view


def capture(doc: Document, change) -> list:
    events = []
    doc.on_change(lambda event: events.append(event))
    change()
    doc.callbacks._change_callbacks.clear()
    return events


def both_ways(doc: Document, events: list) -> tuple[tuple, tuple]:
    """(content, buffers, models still new) from Bokeh's create and from ours, each on the same starting state."""
    new_before = set(doc.models._new_models)
    results = []
    for create in (update_serializer._original_create, lambda evs: update_serializer.create(patch_doc, evs)):
        doc.models._new_models = set(new_before)
        msg = create(events)
        content = msg.content_json
        for n, buffer in enumerate(msg.buffers):  # buffer ids are drawn afresh each time
            content = content.replace(str(buffer.id), f"buffer-{n}")
        buffers = [b.to_bytes() for b in msg.buffers]
        results.append((content, buffers, {m.id for m in doc.models._new_models}))
    return results[0], results[1]


def test_a_slider_change_serialises_exactly_as_bokeh_does():
    doc, view = served_page()
    events = capture(doc, lambda: setattr(view.state, "attention_scale", 0.35))
    assert len(events) >= 3  # the payload (its words and its numbers, a binary buffer) and the diagram
    bokeh, ours = both_ways(doc, events)
    assert ours == bokeh


def test_new_models_are_sent_whole_and_known_ones_by_reference_exactly_as_bokeh_does():
    doc, view = served_page()
    holder = doc.roots[0]

    def add_new():
        source = ColumnDataSource({"x": [1.0, 2.0], "y": np.array([3.0, 4.0])})  # a NumPy column: a buffer
        fig = figure(height=100)
        fig.line("x", "y", source=source)
        holder.children = [*holder.children, fig, Div(text="<b>new</b>")]
        view.state.norm = "layernorm"

    events = capture(doc, add_new)
    assert doc.models._new_models  # the browser does not have the figure yet
    bokeh, ours = both_ways(doc, events)
    assert ours == bokeh
    assert '"type":"object"' in ours[0] and ours[1]  # the figure went whole, its NumPy column as a buffer


def test_the_server_installs_it():
    from blocktrace.app.server.routes import routes

    routes()
    assert patch_doc.create.__func__ is update_serializer.create


def test_events_from_two_documents_are_refused_as_bokeh_refuses_them():
    doc_a, view_a = served_page()
    doc_b, view_b = served_page()
    events = capture(doc_a, lambda: setattr(view_a.state, "mlp_scale", 0.5))
    events += capture(doc_b, lambda: setattr(view_b.state, "mlp_scale", 0.5))
    for create in (update_serializer._original_create, lambda evs: update_serializer.create(patch_doc, evs)):
        try:
            create(copy.copy(events))
        except ValueError as err:
            assert "more than one document" in str(err)
        else:
            raise AssertionError("accepted events from two documents")


# --- the browser's updates -------------------------------------------------------------------

def twin_documents() -> tuple[Document, Document]:
    """Two copies of a served page: the same models under the same ids, and no Panel behind either."""
    doc, _view = served_page()
    return Document.from_json(doc.to_json()), Document.from_json(doc.to_json())


def applied(doc: Document, apply, patch: dict) -> tuple[str, list, set]:
    seen = []
    doc.on_change(lambda event: seen.append((type(event).__name__, getattr(getattr(event, "model", None), "id", None),
                                             getattr(event, "attr", None), repr(getattr(event, "new", None))[:200],
                                             event.setter)))
    apply(doc, patch, setter="the-session")
    doc.callbacks._change_callbacks.clear()
    roots = serialize_json(doc.to_json().content["roots"])
    roots = re.sub(r'"data":\{"id":"[^"]+"\}', '"data":{"id":"buffer"}', roots)  # a NumPy array's buffer: a fresh id
    return roots, seen, {m.id for m in doc.models._new_models}


def find(doc: Document, name: str, **attrs):
    for model in doc.models:
        if type(model).__name__ == name and all(getattr(model, k, None) == v for k, v in attrs.items()):
            return model
    raise LookupError(name)


def test_a_browser_update_is_applied_exactly_as_bokeh_applies_it():
    a, b = twin_documents()
    change = '{"name": "attention_scale", "value": 0.35, "n": 1}'  # the browser-drawn slider's change
    component = next(m for m in a.models if "sent" in m.properties())  # the drawing component's data
    column = next(m for m in a.models if type(m).__name__ == "Column" and m.children)
    new_div = {"type": "object", "name": "Div", "id": "p-new-div", "attributes": {"text": "typed <b>x</b>"}}
    patch = {"events": [
        {"kind": "ModelChanged", "model": {"id": component.id}, "attr": "sent", "new": change},
        {"kind": "ModelChanged", "model": {"id": column.id}, "attr": "children",
         "new": [*({"id": c.id} for c in column.children), new_div]},
    ]}
    bokeh = applied(a, lambda d, p, setter: update_serializer._original_apply(d, copy.deepcopy(p), setter=setter),
                    patch)
    ours = applied(b, lambda d, p, setter: update_serializer.apply_json_patch(d, copy.deepcopy(p), setter=setter),
                   patch)
    assert ours == bokeh
    assert b.get_model_by_id(component.id).sent == change
    assert any(e[2] == "sent" and e[4] == "the-session" for e in ours[1])  # the setter stops the echo


def test_unknown_and_removed_references_are_treated_as_bokeh_treats_them():
    import pytest
    from bokeh.core.serialization import UnknownReferenceError

    for apply in (update_serializer._original_apply, update_serializer.apply_json_patch):
        doc, _ = twin_documents()
        with pytest.raises(UnknownReferenceError):
            apply(doc, {"events": [{"kind": "ModelChanged", "model": {"id": "never-seen"}, "attr": "value",
                                    "new": 1}]})
        root = doc.roots[0]
        gone = root.id
        doc.remove_root(root)  # a model the browser may still send an update for
        apply(doc, {"events": [{"kind": "ModelChanged", "model": {"id": gone}, "attr": "visible", "new": False}]})
