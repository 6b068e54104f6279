"""One component that draws an explorable in the browser from one payload per change (issue 39).

The server sets three parameters: `spec` (JSON, once: palette, the controls to draw, embedded or not), `meta`
(JSON per change: numbers' offsets and short strings, no HTML) and `values` (a float64 array: Bokeh sends it as
one binary buffer). The browser sends a control's change back as `sent`, a JSON text {"name", "value", "n"},
which the explorable checks on the server before it touches its state.

The browser half is draw.js (shared: numbers written as numbers.number() writes them, tables, charts with hover
values, legends, text alternatives and PNG download, native controls, the drawing loop) plus one file per
explorable (block_trace.js), sent inline in the render script: no module loader, no extra request, works in an
embed. A ReactiveHTML rather than a JSComponent: the same cost per change, drawn sooner on first load, and no
es-module-shims (docs/design/browser-view-spike.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import panel as pn
import param

from blocktrace.explorables.components.palette import chart_colours, text_on
from blocktrace.explorables.components.style import dark, stylesheet

__all__ = ["DrawnView", "drawing_script", "json_text", "spec_json"]

log = logging.getLogger(__name__)

HERE = Path(__file__).parent


@cache
def _read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def json_text(obj) -> str:
    """obj as JSON text with no <, > or &: Panel passes a ReactiveHTML's text parameters through its HTML sanitizer
    on the way to the browser, which would rewrite those (a typed "<img src=x>" became invalid JSON, "< 0.05" read
    "&lt; 0.05"). As \\u escapes they are the same JSON, and JSON.parse gives the characters back."""
    text = json.dumps(obj, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def drawing_script(view_file: str) -> str:
    """draw.js and one explorable's file, as one classic script (defines window.btDraw and its view)."""
    return _read("draw.js") + "\n" + _read(view_file)


def spec_json(controls: list[dict], embed: bool = False) -> str:
    """The part sent once: this session's palette (light or dark), the controls the browser draws, the layout."""
    c = chart_colours(dark())
    palette = {"series": list(c.series), "reference": c.reference, "positive": c.positive, "negative": c.negative,
               "sequential": list(c.sequential), "text_on": [text_on(s) for s in c.sequential],
               "cell_line": c.cell_line}
    return json_text({"controls": controls, "palette": palette, "embed": embed})


class DrawnView(pn.reactive.ReactiveHTML):
    """The controls and results of one explorable, drawn by its view in draw.js's loop.

    A subclass names its view, `_scripts = DrawnView.scripts_for("block_trace.js", "blockTrace")`, and its own
    stylesheet in this folder, if any: `_css = "block_floor.css"`.
    """

    _css: str | None = None

    spec = param.String(default="{}", doc="JSON sent once: palette, the controls to draw, embedded or not.")
    meta = param.String(default="", doc="JSON per change: offsets into values and short strings, no HTML.")
    values = param.Array(default=np.zeros(0), doc="Every number drawn, float64 (a binary buffer on the wire).")
    sent = param.String(default="", doc="The browser's last control change, JSON {name, value, n}.")

    _template = '<div id="dvroot" class="dv-host"></div>'
    # Panel's "property changes that should not trigger busy indicator": its busy bookkeeping was a third of
    # a change's server CPU (reactive.py documents both attributes for subclasses).
    _busy__ignore = ["sent"]
    # "Property changes which should not be debounced": answered on the next tick, not after Panel's 50 ms
    # debounce (the browser keeps at most one change in flight, so nothing piles up).
    _priority_changes = ["sent"]

    @staticmethod
    def scripts_for(view_file: str, view: str) -> dict[str, str]:
        mount = ("state.view = window.btDraw.mount(dvroot, {get: function (n) { return data[n]; }, "
                 "send: function (o) { data.sent = JSON.stringify(o); }}, " + json.dumps(view) + ");")
        return {"render": drawing_script(view_file) + mount, "meta": "state.view.update()",
                "values": "state.view.update()", "remove": "state.view.remove()"}

    def __init__(self, on_control: Callable[[dict], None] | None = None, **params):
        own = [_read(self._css)] if self._css else []
        params.setdefault("stylesheets", [stylesheet(), _read("drawn_view.css"), *own])
        params.setdefault("sizing_mode", "stretch_width")
        params.setdefault("margin", (5, 10))  # as Panel's panes beside it
        super().__init__(**params)
        self._on_control = on_control
        self.param.watch(self._received, ["sent"])

    def _received(self, event) -> None:
        """Hand a well-formed change to the explorable; anything else is dropped with one log line."""
        if self._on_control is None or not event.new:
            return
        try:
            change = json.loads(event.new)
        except ValueError:
            change = None
        if not isinstance(change, dict) or not isinstance(change.get("name"), str) or "value" not in change:
            log.info("dropped a malformed control change")
            return
        self._on_control(change)
