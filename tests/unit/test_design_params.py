"""Skipping the design on a plain parameter change gives the same properties (app/tuning/design_params.py)."""

from __future__ import annotations

import panel as pn
import param
from bokeh.document import Document

from blocktrace.app.tuning import design_params
from blocktrace.explorables.components.drawn_view import DrawnView
from blocktrace.explorables.components.focus import focus_design


def event(obj, name, new):
    return param.parameterized.Event(what="value", name=name, obj=obj, cls=type(obj), old=None, new=new, type="changed")


def comparable(properties: dict) -> dict:
    """Stylesheet models are made afresh on each call: compare what they load, not which object they are."""
    def plain(value):
        if isinstance(value, list):
            return [plain(v) for v in value]
        if hasattr(value, "url"):
            return ("stylesheet", value.url)
        return value
    return {k: plain(v) for k, v in properties.items()}


def components():
    yield pn.widgets.FloatSlider(label="Attention update scale", start=0, end=3, step=0.05, design=focus_design())
    yield pn.widgets.Select(options={"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}, design=focus_design())
    yield pn.pane.HTML("<p>x</p>", design=focus_design())
    yield pn.Column(pn.pane.HTML("a"), design=focus_design())
    yield DrawnView(design=focus_design())  # what a drawn explorable's change updates


def test_every_change_gives_the_properties_panels_own_method_gives():
    for component in components():
        doc = Document()
        doc.add_root(component.get_root(doc))
        for name, new in (("value", 0.35), ("disabled", True), ("visible", False), ("css_classes", ["x"]),
                          ("stylesheets", [":host { color: red; }"]), ("margin", (2, 4)), ("meta", '{"ack": 1}')):
            if name not in component.param:
                continue
            events = [event(component, name, new)]
            ours = design_params._update_properties(component, *events, doc=doc)
            panels = design_params._original(component, *events, doc=doc)
            assert comparable(ours) == comparable(panels), (type(component).__name__, name)


def test_the_server_installs_it():
    from panel.reactive import Reactive

    from blocktrace.app.server.routes import routes

    routes()
    assert Reactive._update_properties is design_params._update_properties
