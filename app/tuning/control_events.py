"""A control's change from the browser, sooner and applied with the least of Panel's bookkeeping.

Panel holds each change 50 ms (`_debounce`) to merge a burst (a slider drag); 10 ms still merges a
drag's events while taking most of the wait out of every click and key press.

Panel's `Syncable._process_events` does three things around setting the widget's parameters:
it records a process-wide "busy" event (several read-only toggles of every parameter of
`pn.state`, for a loading indicator we do not use), it makes every parameter of the widget
writable and back again (about 80 attribute writes on a slider), and it sets the parameters with
`param.update`, which first copies all of the widget's values. Together that was about a
sixth of the server's time per slider change.

`apply_directly(widget)` replaces that step for one widget: it translates the browser's
properties exactly as Panel does (`_process_property_change`), keeps Panel's guard against
echoing a value back to the browser that sent it (`_in_process__events`, `_syncing`), and sets
the parameters. Anything out of the ordinary (a read-only or constant parameter such as a
slider's `value_throttled`, a nested property, Panel's throttled mode) goes through Panel's own
method unchanged. A change whose callbacks raise is logged as Panel logs it ("Callback failed for
object named ..." with the exception, on Panel's `panel.reactive` logger) and raised again.

Upstream: app/tuning/UPSTREAM.md, "control_events" (what would retire this patch).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pprint import pformat
from typing import Any

import panel as pn
from param.parameterized import _syncing

from blocktrace.explorables.components.explorable import CONTROL_HOOKS
from blocktrace.explorables.components.updates import batched

panel_log = logging.getLogger("panel.reactive")  # where Panel's own `_process_events` logs a failed callback


def apply_directly(widget: pn.widgets.Widget, wrap: Callable[[Callable], Callable] = lambda f: f) -> None:
    """Install the direct path on this widget instance; `wrap` decorates the result (e.g. `batched`)."""
    panels_own = widget._process_events

    def process(events: dict[str, Any]) -> None:
        if pn.config.throttled or not events:
            return panels_own(events)
        params = widget._process_property_change(events)
        if not _plain(widget, params):
            return panels_own(events)
        doc = pn.state.curdoc
        if doc is not None:
            widget._in_process__events[doc] = events
        try:
            with _syncing(widget, list(params)):
                if len(params) == 1:
                    [(name, value)] = params.items()
                    setattr(widget, name, value)
                else:
                    widget.param.update(**params)
        except Exception:
            change = "changing property" if len(params) == 1 else "changing properties"
            panel_log.exception(f"Callback failed for object named {widget.name!r} {change} {pformat(params)} \n")
            raise
        finally:
            if doc is not None:
                widget._in_process__events.pop(doc, None)

    widget._process_events = wrap(process)


def _plain(widget: pn.widgets.Widget, params: dict[str, Any]) -> bool:
    """Every parameter is the widget's own and may be set as it is."""
    for name in params:
        if "." in name or name not in widget.param:
            return False
        parameter = widget.param[name]
        if parameter.constant or parameter.readonly:
            return False
    return True


CONTROL_DEBOUNCE_MS = 10


def tune(widget: pn.widgets.Widget) -> None:
    """What the tuning layer does to each explorable control (ExplorableView.respond_quickly)."""
    widget._debounce = CONTROL_DEBOUNCE_MS
    apply_directly(widget, wrap=batched)


def apply() -> None:
    """Register `tune` for every explorable's controls (idempotent)."""
    if tune not in CONTROL_HOOKS:
        CONTROL_HOOKS.append(tune)
