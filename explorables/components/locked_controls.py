"""While the prediction gate is locked, the server keeps the controls' values as they were.

A disabled widget is a hint to the browser only: a websocket message can still change its value or click
a disabled button. So the explorable's state refuses such changes itself: a control parameter changed
while the gate is locked is set back to the value it had when the gate locked. The widgets follow the
state, so the browser sees its change undone. Changes made before the hold starts (the link's state, the
explorable's own start-up) stand.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

import panel as pn
import param

from blocktrace.explorables.components.prediction import GATE_EVENTS, Prediction
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML, batched

__all__ = ["LockedControls", "OnceUnlocked"]

LAST = 1_000_000  # a watcher precedence: higher runs later


class LockedControls:
    """Holds `names` of `state` at their values while `prediction` is not unlocked."""

    def __init__(self, state: param.Parameterized, names: Sequence[str], prediction: Prediction):
        self.state, self.names, self.prediction = state, list(names), prediction
        self.held: dict[str, Any] = {}
        self.refused = 0  # changes set back, for tests and logs
        self._hold()
        prediction.param.watch(self._hold, GATE_EVENTS)
        # Last of all the state's watchers (Panel's widget links among them), so that each has seen the
        # change before it is set back, and none acts on a stale value afterwards.
        state.param.watch(self._refuse, self.names, precedence=LAST)

    def _hold(self, *_events) -> None:
        if not self.prediction.unlocked:
            self.held = {name: getattr(self.state, name) for name in self.names}

    def _refuse(self, *events) -> None:
        if self.prediction.unlocked:
            return
        back = {e.name: self.held[e.name] for e in events if getattr(self.state, e.name) != self.held[e.name]}
        if back:
            self.refused += 1
        for name, value in back.items():  # one at a time: a batched update would also flush other watchers'
            setattr(self.state, name, value)  # events still queued, with the values they had before the set-back


class OnceUnlocked(pn.viewable.Viewer):
    """A place that holds a note while the gate is locked, and its content once unlocked.

    Until then the content's models are not in the session's document at all: the browser cannot see
    them, and no message can reach them (a hidden or disabled model could still be clicked).
    """

    def __init__(self, prediction: Prediction, content: pn.viewable.Viewable, note: str):
        super().__init__()
        self.prediction, self.content = prediction, content
        self.note = LiveHTML(f'<p class="bt-muted bt-locked">{escape(note)}</p>', **styled(sizing_mode="stretch_width"))
        self.place = pn.Column(sizing_mode="stretch_width")
        self._show()
        prediction.param.watch(self._show, GATE_EVENTS)

    @batched
    def _show(self, *_events) -> None:
        wanted = [self.content] if self.prediction.unlocked else [self.note]
        if self.place.objects != wanted:
            self.place.objects = wanted

    def __panel__(self):
        return self.place
