"""One component that draws an explorable's results in the browser from one payload per change (issue 39 spike).

The server sends three parameters: `spec` (JSON, once: palette, the controls to draw), `meta` (JSON per
change: numbers and short strings) and `values` (a float64 array: Bokeh sends it as a binary buffer). The
browser half is trace_view.js beside this file; the browser sends a control's change back as `sent`, a JSON text
{"name", "value", "n"}, which the view checks on the server before it touches its state.

Three variants of the same drawing code (trace_view.js, a classic script defining window.btTrace), to
measure Panel's two custom-component APIs side by side:

- `BrowserView`, a `pn.custom.JSComponent`: a few-line ES module mounts the drawing, which comes as a page
  script served from this package (`__javascript__`, cached); BokehJS loads the module through
  es-module-shims, which Panel serves from its own bundle (no CDN), and which app/tuning/first_load.py would
  have to stop leaving out;
- `BrowserViewHTML`, a `pn.reactive.ReactiveHTML` as floor_diagram.py is: the whole script goes inline with
  every page, no es-module-shims;
- `BrowserViewCached`, the ReactiveHTML mounting the cached page script: no shim, nothing inline.
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
from panel.custom import JSComponent

from blocktrace.explorables.components.palette import chart_colours, text_on
from blocktrace.explorables.components.style import dark, stylesheet

__all__ = ["BrowserView", "BrowserViewCached", "BrowserViewHTML", "spec_json"]

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SCRIPT = HERE / "trace_view.js"


@cache
def _css() -> str:
    return (HERE / "trace_view.css").read_text(encoding="utf-8")


def spec_json(controls: list[dict], native: bool) -> str:
    """The part sent once: this session's palette (light or dark) and the controls the browser draws."""
    c = chart_colours(dark())
    palette = {"series": list(c.series), "reference": c.reference, "positive": c.positive, "negative": c.negative,
               "sequential": list(c.sequential), "text_on": [text_on(s) for s in c.sequential],
               "cell_line": c.cell_line}
    return json.dumps({"native": native, "controls": controls if native else [], "palette": palette},
                      ensure_ascii=False)


class _Script:
    """The drawing code as a page script: Panel's component route serves trace_view.js from this package
    (it serves only files inside the component's own folder) and every page of a process that imported this
    module lists it, once (the URL names this class, the one that declares it), cached by the browser."""

    __javascript__ = ["trace_view.js"]


# The adapter from each API to window.btTrace.mount(el, io); io.get(name) reads a synced parameter,
# io.send(change) sets `sent`.
ESM = """
export function render({model, el}) {
  const view = window.btTrace.mount(el, {get: (name) => model[name],
                                         send: (change) => { model.sent = JSON.stringify(change); }});
  model.on(["meta", "values"], view.update);
  model.on("remove", view.remove);
}
"""
HTML_MOUNT = ("state.view = window.btTrace.mount(tvroot, {get: function (n) { return data[n]; }, "
              "send: function (o) { data.sent = JSON.stringify(o); }});")


class BrowserView(_Script, JSComponent):
    """The results, drawn by trace_view.js (a page script) from a JSComponent's few-line ES module."""

    spec = param.String(default="{}", doc="JSON sent once: palette and the controls to draw.")
    meta = param.String(default="", doc="JSON per change: numbers and short strings, no HTML.")
    values = param.Array(default=np.zeros(0), doc="Every number drawn, float64 (a binary buffer on the wire).")
    sent = param.String(default="", doc="The browser's last control change, JSON {name, value, n}.")

    _esm = ESM
    # Panel's "property changes that should not trigger busy indicator": its busy bookkeeping (the global
    # state's counter, edited read-only parameter by parameter) was a third of a change's server CPU.
    _busy__ignore = ["sent"]
    # "Property changes which should not be debounced": handled on the next tick, not after Panel's 50 ms
    # debounce (the browser keeps at most one change in flight, so nothing piles up).
    _priority_changes = ["sent"]

    def __init__(self, on_control: Callable[[dict], None] | None = None, **params):
        params.setdefault("stylesheets", [stylesheet(), _css()])
        params.setdefault("sizing_mode", "stretch_width")
        super().__init__(**params)
        self._on_control = on_control
        self.param.watch(self._received, ["sent"])

    def _received(self, event) -> None:
        _dispatch(self._on_control, event.new)


@cache
def _script() -> str:
    """trace_view.js as text (it defines window.btTrace), for the inline variant's render script."""
    return SCRIPT.read_text(encoding="utf-8")


class BrowserViewHTML(pn.reactive.ReactiveHTML):
    """The same drawing as a ReactiveHTML whose render script carries the whole drawing code, in every page."""

    spec = param.String(default="{}", doc="JSON sent once: palette and the controls to draw.")
    meta = param.String(default="", doc="JSON per change: numbers and short strings, no HTML.")
    values = param.Array(default=np.zeros(0), doc="Every number drawn, float64 (a binary buffer on the wire).")
    sent = param.String(default="", doc="The browser's last control change, JSON {name, value, n}.")

    _template = '<div id="tvroot" class="tv-host"></div>'
    _busy__ignore = ["sent"]  # as BrowserView's
    _priority_changes = ["sent"]
    _scripts = {
        "render": _script() + HTML_MOUNT,
        "meta": "state.view.update()",
        "values": "state.view.update()",
        "remove": "state.view.remove()",
    }

    def __init__(self, on_control: Callable[[dict], None] | None = None, **params):
        params.setdefault("stylesheets", [stylesheet(), _css()])
        params.setdefault("sizing_mode", "stretch_width")
        super().__init__(**params)
        self._on_control = on_control
        self.param.watch(self._received, ["sent"])

    def _received(self, event) -> None:
        _dispatch(self._on_control, event.new)


class BrowserViewCached(_Script, BrowserViewHTML):
    """The ReactiveHTML with the drawing code as the cached page script: its render script only mounts it."""

    _scripts = {**BrowserViewHTML._scripts, "render": HTML_MOUNT}


def _dispatch(on_control: Callable[[dict], None] | None, text: str) -> None:
    """Hand a well-formed change to the view; anything else is dropped with one log line (no traceback)."""
    if on_control is None or not text:
        return
    try:
        change = json.loads(text)
    except ValueError:
        change = None
    if not isinstance(change, dict) or not isinstance(change.get("name"), str) or "value" not in change:
        log.info("dropped a malformed control change")
        return
    on_control(change)
