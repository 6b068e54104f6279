"""app/tuning/lean_properties.py: the same properties, values and kept defaults as Bokeh's own method."""

from __future__ import annotations

import asyncio

import pytest
from bokeh.core.property.descriptors import UnsetValueError
from bokeh.core.serialization import Serializer
from bokeh.document import Document
from bokeh.models import Div, Slider
from bokeh.themes import Theme
from panel.io.server import get_server

from blocktrace.app.server.routes import page_titles, routes, server_kwargs
from blocktrace.app.tuning import lean_properties
from tests.app.bokeh_ws_client import Session
from tests.conftest import free_port

ROUTES = routes()
TRACE = "/explorables/transformer-block-trace"


def serialized(descriptor) -> bool:
    return descriptor.serialized


def both(model, first: str = "lean", **kwargs) -> tuple[dict, dict]:
    """(this module's result, Bokeh's result) for one model, `first` asked first."""
    lean = lambda: lean_properties.query_properties_with_values(model, serialized, **kwargs)  # noqa: E731
    bokeh = lambda: lean_properties._original(model, serialized, **kwargs)  # noqa: E731
    if first == "lean":
        return lean(), bokeh()
    theirs = bokeh()
    return lean(), theirs


def same(lean: dict, bokeh: dict) -> bool:
    return list(lean) == list(bokeh) and all(lean[k] is bokeh[k] or lean[k] == bokeh[k] for k in lean)


def page_models(path: str) -> list:
    """A fresh build of a route's page, figures placed (built outside a session)."""
    return sorted(ROUTES[path]().get_root(Document()).references(), key=lambda m: m.id)


@pytest.mark.parametrize("path", sorted(ROUTES))
@pytest.mark.parametrize("first", ["lean", "bokeh"])
def test_every_model_of_every_page_gives_bokehs_result(path: str, first: str) -> None:
    """Set properties, unstable defaults and unset ones alike, whichever method meets a model first
    (Bokeh's keeps some defaults on the model as it reads them)."""
    for model in page_models(path):
        for kwargs in ({"include_defaults": False}, {"include_defaults": False, "include_undefined": True},
                       {"include_defaults": True}):
            assert same(*both(model, first, **kwargs)), (model, kwargs)


def test_theme_values_are_written_as_bokeh_writes_them() -> None:
    """A property the document's theme sets is written even though the model never set it."""
    doc = Document()
    div = Div(text="x")
    doc.add_root(div)
    doc.theme = Theme(json={"attrs": {"Div": {"width": 321}}})
    lean, bokeh = both(div, include_defaults=False)
    assert lean == bokeh and lean["width"] == 321


def test_passable_properties_are_stable_and_defined() -> None:
    """Containers and lists (kept on the model once read) and required values (which raise) are read."""
    assert "text" in lean_properties.passable(Div)
    assert "css_classes" not in lean_properties.passable(Div)  # a list: an unstable default
    assert "start" not in lean_properties.passable(Slider)  # required: no default
    assert "value" not in lean_properties.passable(Slider)


def test_an_unset_required_property_still_raises() -> None:
    slider = Slider(end=1, value=0)  # no start
    for method in (lean_properties.query_properties_with_values, lean_properties._original):
        with pytest.raises(UnsetValueError):
            method(slider, serialized, include_defaults=False)


def bufferless(node, buffers: dict | None = None):
    """A document's JSON with each binary buffer (a NumPy array's bytes, e.g. the drawing component's numbers)
    as its bytes' hex, so two serializations compare by content (a buffer's id is drawn afresh each time)."""
    if hasattr(node, "content") and hasattr(node, "buffers"):  # Bokeh's Serialized: content + buffers by id
        return bufferless(node.content, {b.id: b.to_bytes().hex() for b in node.buffers or []})
    buffers = buffers or {}
    if isinstance(node, dict):
        if set(node) == {"id"} and node["id"] in buffers:
            return buffers[node["id"]]
        return {k: bufferless(v, buffers) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [bufferless(v, buffers) for v in node]
    if isinstance(node, memoryview | bytes):
        return bytes(node).hex()
    if hasattr(node, "to_bytes") and hasattr(node, "id"):  # Bokeh's Buffer
        return node.to_bytes().hex()
    return node


def test_a_served_document_is_written_as_bokeh_writes_it() -> None:
    """A session's document (Panel's theme, a page the browser has pulled) serializes the same either
    way, model by model and as a whole."""

    async def scenario() -> None:
        port = free_port()
        server = get_server(ROUTES, port=port, address="127.0.0.1", start=False, show=False,
                            title=page_titles(ROUTES), websocket_origin=[f"127.0.0.1:{port}"], **server_kwargs())
        server.start()
        try:
            client = await Session.open(f"ws://127.0.0.1:{port}{TRACE}/ws")
            try:
                [session] = list(server._tornado._applications[TRACE].sessions)
                doc = session.document  # read with no await in between: nothing changes it meanwhile
                assert client.document["doc"]["roots"]
                assert all(same(*both(model, include_defaults=False)) for model in doc.models)
                lean = Serializer().encode(bufferless(doc.to_json()))
                saved = lean_properties.HasProps.query_properties_with_values
                lean_properties.HasProps.query_properties_with_values = lean_properties._original
                try:
                    bokehs = Serializer().encode(bufferless(doc.to_json()))
                finally:
                    lean_properties.HasProps.query_properties_with_values = saved
                assert saved is lean_properties.query_properties_with_values
                assert lean == bokehs
            finally:
                await client.close_and_wait()
        finally:
            server.stop()
            server.unlisten()

    asyncio.run(scenario())


def walked(model, walk) -> list[str]:
    """The ids `walk` visits from `model`, in order."""
    seen: list[str] = []
    walk(model, lambda found: seen.append(found.id))
    return seen


@pytest.mark.parametrize("path", sorted(ROUTES))
@pytest.mark.parametrize("first", ["lean", "bokeh"])
def test_the_walk_finds_the_models_bokehs_walk_finds(path: str, first: str) -> None:
    """Every model of every page refers to the same models, in the same order, whichever walk meets it
    first (Bokeh's keeps unstable defaults on the model as it reads them)."""
    walks = [lean_properties.visit_immediate_value_references, lean_properties._original_walk]
    if first == "bokeh":
        walks.reverse()
    for model in page_models(path):
        first_seen, second_seen = (walked(model, walk) for walk in walks)
        assert first_seen == second_seen, model


@pytest.mark.parametrize("path", sorted(set(ROUTES) - {"/"}))  # every page but the index (8 models)
@pytest.mark.parametrize("walk", ["lean", "bokeh"])
def test_a_documents_model_set_is_bokehs(path: str, walk: str, monkeypatch) -> None:
    """The document's own recompute (through Bokeh's module) gives the set Bokeh's walk gives, on every page."""
    from bokeh.model import util

    doc = Document()
    ROUTES[path]().server_doc(doc)
    monkeypatch.setattr(util, "visit_immediate_value_references", lean_properties._original_walk)
    doc.models._push_freeze()
    doc.models._pop_freeze()
    bokehs = {m.id for m in doc.models}
    chosen = {"lean": lean_properties.visit_immediate_value_references, "bokeh": lean_properties._original_walk}
    monkeypatch.setattr(util, "visit_immediate_value_references", chosen[walk])
    doc.models._push_freeze()
    doc.models._pop_freeze()
    assert {m.id for m in doc.models} == bokehs and len(bokehs) > 30  # a whole page (the fewest: the block trace, 41)


def test_a_passed_property_refers_to_no_model() -> None:
    """What the lean walk passes over (a passable property never set) holds a plain value on every model
    class the pages use: walking it with Bokeh's own function finds nothing."""
    from bokeh.model import util

    checked = 0
    for path in sorted(ROUTES):
        for model in page_models(path):
            for name in lean_properties.passable(type(model)) & set(model.properties_with_refs()):
                if name in model._property_values:
                    continue
                found: list = []
                util.visit_value_and_its_immediate_references(getattr(model, name), found.append)
                assert found == [], (type(model).__name__, name)
                checked += 1
    assert checked > 100  # the walk does pass over properties that could hold models


def test_a_property_given_a_model_is_walked() -> None:
    """A passable property (one that is None until set) is walked once the code gives it a model."""
    from bokeh.models import ColumnDataSource, GlyphRenderer, Scatter

    renderer = GlyphRenderer(data_source=ColumnDataSource(), glyph=Scatter())
    assert "hover_glyph" in lean_properties.passable(GlyphRenderer)
    unset = walked(renderer, lean_properties.visit_immediate_value_references)
    assert unset == walked(renderer, lean_properties._original_walk)
    renderer.hover_glyph = hover = Scatter()
    lean = walked(renderer, lean_properties.visit_immediate_value_references)
    assert hover.id in lean and hover.id not in unset
    assert lean == walked(renderer, lean_properties._original_walk)


def test_bokehs_module_uses_the_lean_walk_when_tuned() -> None:
    from bokeh.model import util

    assert util.visit_immediate_value_references is lean_properties.visit_immediate_value_references
