"""The floor diagram: one Transformer floor drawn as its residual stream, live, in each of the three explorables.

The geometry and every word come from the server (explorables/components/floor_layout.py, pure functions of
what the floor is); the browser only paints them. The component is a Panel ReactiveHTML (public API, the
same in Panel 1.9 and 1.10): its parameters are synced to the page, and a small script
(static/js/floor_diagram.js, sent inline with the component) builds the SVG once per structure and then
changes only text, classes and attributes in place when the values or the selection change. A click, or
Enter or Space on a focused stage, sets `selected`; the explorable's view turns that into its own state
parameter (the one its table highlight, plots and URL follow), and the diagram follows the state back.

A ReactiveHTML rather than a pn.custom.JSComponent, as the drawn views are: the same cost a change, and its
script comes inline with the page, with no module loader (docs/design/browser-view-spike.md).

While the prediction gate is locked the server sends no values at all, only the structure and the names
of the stages; a selection sent from the browser then is set back.

BLOCKTRACE_DIAGRAM=off in the server's environment builds the views without it (benchmarks/latency.py
--compare-diagram measures both).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cache

import panel as pn
import param

from blocktrace.explorables.components.floor_layout import payload
from blocktrace.explorables.components.floor_model import Shown
from blocktrace.explorables.components.style import STATIC_DIR, dark, stylesheet
from blocktrace.explorables.components.updates import set_params

__all__ = ["DIAGRAM_ENV", "DiagramPlace", "FloorDiagram"]

DIAGRAM_ENV = "BLOCKTRACE_DIAGRAM"  # "off": the explorables are built without the diagram


@cache
def painter() -> str:
    """The browser half: static/js/floor_diagram.js, without its comment lines and indentation (they are for
    its readers; every page carries the script)."""
    text = (STATIC_DIR / "js" / "floor_diagram.js").read_text(encoding="utf-8")
    return "\n".join(line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("//"))


DIAGRAM_CSS = """
:host { display: block; --fd-stream: #7b8da1; --fd-selected: #e3effb; --fd-frame: #f3f5f8;
  --fd-branch: #6a737d; }
.fd-root { border: 1px solid var(--bt-line); border-radius: 8px; padding: 0.45rem 0.7rem 0.5rem;
  background: var(--bt-bg); color: var(--bt-ink); }
.fd-caption { margin: 0 0 0.35rem; font-size: 0.85rem; color: var(--bt-muted); line-height: 1.35; }
.fd-canvas { overflow-x: auto; overflow-y: hidden; }
.fd-svg { display: block; width: 100%; height: auto; overflow: visible; font-family: inherit; }
.fd-stream { stroke: var(--fd-stream); stroke-width: 5; fill: none; stroke-linecap: round; }
.fd-cut { stroke-dasharray: 6 6; stroke-linecap: butt; opacity: 0.6; }
.fd-cut-label { fill: var(--bt-bad); font-size: 10px; font-weight: 700; dominant-baseline: middle; }
.fd-branch { stroke: var(--fd-branch); stroke-width: 1.6; fill: none; }
.fd-branch.off { stroke-dasharray: 3 3; opacity: 0.6; }
.fd-head { fill: var(--fd-branch); }
.fd-tick { stroke: var(--fd-stream); stroke-width: 1.5; fill: none; }
.fd-frame { fill: var(--fd-frame); stroke: var(--bt-line); stroke-width: 1; }
.fd-frame-title { font-size: 11.5px; font-weight: 700; fill: var(--bt-muted); letter-spacing: 0.02em; }
.fd-mask-text { font-size: 10px; fill: var(--bt-ink); }
.fd-mask-text.off { fill: var(--bt-muted); }
.fd-mask-cell { fill: var(--bt-accent); }
.fd-mask-cell.off { fill: none; stroke: var(--bt-muted); stroke-width: 0.7; }
.fd-stamp { fill: var(--bt-bg); stroke: var(--bt-accent); stroke-width: 1.2; stroke-dasharray: 4 3; }
.fd-stamp.off { stroke: var(--bt-line); }
.fd-stamp-text { font-size: 11px; fill: var(--bt-ink); }
.fd-plus, .fd-marker.fd-plus { fill: var(--bt-bg); stroke: var(--fd-stream); stroke-width: 2.5; }
.fd-plus-sign { stroke: var(--bt-ink); stroke-width: 1.8; fill: none; }
.fd-joint, .fd-marker.fd-dot { fill: var(--fd-stream); stroke: var(--bt-bg); stroke-width: 1.5; }
.fd-marker.fd-square { fill: var(--bt-bg); stroke: var(--fd-stream); stroke-width: 2.5; }
.fd-end { font-size: 10px; fill: var(--bt-muted); }
.fd-node { cursor: pointer; outline: none; }
.locked .fd-node { cursor: default; }
.fd-box { fill: var(--bt-bg); stroke: var(--bt-line); stroke-width: 1.2; }
.k-part .fd-box { fill: var(--bt-bg); }
.fd-label { font-size: 12px; font-weight: 600; fill: var(--bt-ink); }
.fd-key, .fd-chip { font-family: ui-monospace, "DejaVu Sans Mono", monospace; fill: var(--bt-muted); }
.fd-key { font-size: 10.5px; }
.fd-chip { font-size: 10px; fill: var(--bt-ink); }
.fd-value { font-size: 11.5px; font-variant-numeric: tabular-nums; fill: var(--bt-ink); }
.locked .fd-value { fill: var(--bt-muted); }
.fd-value.bad { fill: var(--bt-bad); font-weight: 700; }
.fd-ring { fill: none; stroke: none; stroke-width: 3; }
.fd-node:hover .fd-box { stroke: var(--bt-accent); }
.locked .fd-node:hover .fd-box { stroke: var(--bt-line); }
.fd-node.selected .fd-box { stroke: var(--bt-accent); stroke-width: 2.5; fill: var(--fd-selected); }
.fd-node.alert .fd-box { stroke: var(--bt-bad); stroke-width: 2.2; }
.fd-node:focus-visible { outline: 3px solid var(--bt-focus); outline-offset: 3px; }
.fd-tag rect { fill: var(--bt-bad); }
.fd-tag text { fill: #ffffff; font-size: 10px; font-weight: 700; }
.fd-detail { margin: 0.3rem 0 0; min-height: 1.3em; font-size: 0.85rem; line-height: 1.35; color: var(--bt-ink); }
"""
DIAGRAM_DARK_CSS = """
:host { --fd-stream: #6d8198; --fd-selected: #132a44; --fd-frame: #161b22; --fd-branch: #9da7b1; }
.fd-tag text { fill: #0d1117; }
"""


class FloorDiagram(pn.reactive.ReactiveHTML):
    """The floor as its residual stream; each stage a focusable node showing its value, the selected one marked."""

    layouts = param.String(default="", doc="Both orientations' geometry and words, as JSON (floor_layout.layouts).")
    texts = param.String(default="{}", doc=(
        'The cards\' words, as JSON: {"values": stage key -> the small text on its card (none while the gate is '
        'locked), "names": stage key -> its accessible name (label, key and values in words)}. One string, not two '
        "dicts: Bokeh walks and checks a dict's every entry on each change, a string it sends as it is."))
    alerts = param.Dict(default={}, doc="Stage key -> a tag on its card, e.g. the first divergence.")
    selected = param.String(default="", doc="The selected stage's key: set by the view, or by a click or key.")
    locked = param.Boolean(default=False, doc="True while the prediction gate is locked: nothing can be selected.")
    caption = param.String(default="", doc="A line above the diagram: the floor and its variant.")

    _template = ('<div id="fdroot" class="fd-root"><p id="fdcaption" class="fd-caption"></p>'
                 '<div id="fdcanvas" class="fd-canvas"></div>'
                 '<p id="fddetail" class="fd-detail" aria-hidden="true"></p></div>')

    _scripts = {
        "render": painter(),
        "layouts": "state.layouts = null; state.draw()",
        "texts": "state.texts = null; state.fill()",
        "locked": "state.fill(); state.mark()",
        "alerts": "state.mark()",
        "selected": "state.mark()",
        "caption": "state.caption()",
        "after_layout": "if (state.fit) state.fit()",
        "remove": "if (state.observer) state.observer.disconnect()",
    }

    def __init__(self, on_select: Callable[[str], None] | None = None, **params):
        params.setdefault("stylesheets", [stylesheet(), DIAGRAM_CSS + (DIAGRAM_DARK_CSS if dark() else "")])
        params.setdefault("sizing_mode", "stretch_width")
        params.setdefault("margin", (5, 10))  # as Panel's HTML panes beside it
        super().__init__(**params)
        self._on_select = on_select
        self._keys: set[str] = set()
        self._shown_selected = self.selected
        self.param.watch(self._picked, ["selected"])

    def show(self, view: Shown) -> None:
        """Show this view, changing only the parameters that differ (so an unchanged diagram costs nothing)."""
        new = payload(view)
        self._keys = set(view.spec.keys)
        self._shown_selected = view.selected
        changes = {name: value for name, value in new.items()
                   if getattr(self, name) is not value and getattr(self, name) != value}
        if changes:
            set_params(self, **changes)

    @property
    def values(self) -> dict[str, str]:
        """Stage key -> the small text on its card, as `texts` holds it (for Python readers)."""
        return json.loads(self.texts).get("values", {})

    @property
    def names(self) -> dict[str, str]:
        """Stage key -> its accessible name, as `texts` holds it (for Python readers)."""
        return json.loads(self.texts).get("names", {})

    def _picked(self, event) -> None:
        key = event.new
        if key == self._shown_selected:
            return
        if self.locked or key not in self._keys or self._on_select is None:
            self.selected = self._shown_selected  # refused: a locked gate, or a key this floor lacks
            return
        self._on_select(key)
        if self.selected != self._shown_selected:  # the view did not follow (e.g. its state refused it)
            self.selected = self._shown_selected


def enabled() -> bool:
    return os.environ.get(DIAGRAM_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


class DiagramPlace:
    """Where a view keeps its diagram: the component, or nothing when the diagram is switched off."""

    def __init__(self, on_select: Callable[[str], None]):
        self.component = FloorDiagram(on_select=on_select) if enabled() else None

    @property
    def panes(self) -> list[pn.viewable.Viewable]:
        return [] if self.component is None else [self.component]

    def show(self, view: Callable[[], Shown]) -> None:
        """Show view() (called only when there is a diagram to show it in)."""
        if self.component is not None:
            self.component.show(view())
