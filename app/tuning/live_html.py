"""An explorable's LiveHTML pane: a new `object` sets only the Bokeh model's text.

Panel's HTML pane answers a new `object` by recomputing every property of its Bokeh model
(stylesheets rebuilt, design modifiers looked up) and setting them all again: about 1.5 ms
of server time per pane. Only the text changes in a LiveHTML pane, so only the text is set; everything
else (visibility, classes, styles) still follows Panel's ordinary path. Overrides Panel's private
`PaneBase._update` on our own subclass only.

Upstream: app/tuning/UPSTREAM.md, "live_html" (what would retire this patch).
"""

from __future__ import annotations

from blocktrace.explorables.components.updates import LiveHTML


def _update(self, ref: str, model) -> None:
    model.text = self._transform_object(self.object)["object"]


def apply() -> None:
    """Install once (idempotent)."""
    LiveHTML._update = _update
