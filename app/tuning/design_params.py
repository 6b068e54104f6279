"""Panel's parameter updates without working out the component's design when it is not used.

On every parameter change of a component (a slider's value, a pane's visibility), Panel 1.9's
`Reactive._update_properties` first asks the design for the component's stylesheets and theme
modifiers, then uses them only if the change is to `stylesheets`. Asking costs a walk over the
design's modifiers and path look-ups: about a twentieth of the server's time per slider change.

Here the design is asked only when `stylesheets` changes; otherwise the result is the same.

Upstream: app/tuning/UPSTREAM.md, "design_params" (what would retire this patch).
"""

from __future__ import annotations

from panel.reactive import Reactive

_original = Reactive._update_properties


def _update_properties(self, *events, doc):
    changes = {event.name: event.new for event in events}
    if "stylesheets" in changes:
        return _original(self, *events, doc=doc)
    return self._process_param_change(changes)


def apply() -> None:
    """Install once (idempotent)."""
    if Reactive._update_properties is not _update_properties:
        Reactive._update_properties = _update_properties
