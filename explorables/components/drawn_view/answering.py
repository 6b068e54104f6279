"""The server's half of a browser-drawn explorable: each change the browser sends is checked here before it
touches the state, and answered with one payload, set in one batch with the diagram's cards.

A view mixes in `AnswersTheDrawing` beside ExplorableView and gives: `CONTROLS` (the state's parameters the
browser may set), `ACTIONS` (the buttons it may press), `self.drawing` (its DrawnView, built with
`on_control=self._control`), `self.diagram` (a DiagramPlace) and the four methods below the line. The state's
watchers call `_send`; while a browser change is being applied they leave the answer to its end (one payload,
built once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from panel.io.document import unlocked

from blocktrace.explorables.components.updates import set_params

__all__ = ["AnswersTheDrawing"]

log = logging.getLogger(__name__)


class AnswersTheDrawing:
    """Checks the browser's changes and answers each with one payload (see the module's docstring)."""

    CONTROLS: tuple[str, ...] = ()
    ACTIONS: Mapping[str, str] = {}
    _ack = 0  # the number of the browser's last change answered: a refused one gets its answer too
    _answering = False

    def _control(self, change: dict[str, Any]) -> None:
        name, value = change["name"], change["value"]
        if isinstance(change.get("n"), int):
            self._ack = change["n"]
        if not self._unlocked():
            self._send()  # the browser's input goes back to the held value
            return
        self._answering = True  # the state's watchers leave the answer to the end: one payload, built once
        try:
            if name == "action" and value in self.ACTIONS:
                self._act(value)
            elif name in self.CONTROLS:
                self._check(name, value)
                setattr(self.state, name, value)  # param checks type, bounds and choices
            else:
                raise ValueError(f"unknown control {name!r}")
        except (ValueError, TypeError) as err:
            log.info("refused a control change: %s", err)
        finally:
            self._answering = False
        self._send()

    def _send(self, *events) -> None:
        if events and self._answering:
            return
        s = self.state
        meta, values = self._payload({name: getattr(s, name) for name in self.CONTROLS}, self._ack)
        changes: dict[str, Any] = {}
        if meta != self.drawing.meta:
            changes["meta"] = meta
        current = self.drawing.values
        if values is not current and not np.array_equal(values, current):  # a verdict alone: no numbers again
            changes["values"] = values
        with unlocked():  # the payload and the diagram's cards: one message
            if changes:
                set_params(self.drawing, **changes)
            self.diagram.show(self._diagram_view())

    # --- what each explorable gives ------------------------------------------------------------------------

    def _unlocked(self) -> bool:
        """Whether the gate lets the controls change the state."""
        raise NotImplementedError

    def _payload(self, controls: dict[str, Any], ack: int) -> tuple[str, np.ndarray]:
        """(meta as JSON text, values) for this session now."""
        raise NotImplementedError

    def _act(self, name: str) -> None:
        """Press the button `name` (one of ACTIONS)."""
        raise NotImplementedError

    def _check(self, name: str, value: Any) -> None:
        """Raise ValueError for a value param alone would accept but the state cannot use."""

    def _diagram_view(self) -> Callable[[], Any]:
        """What the diagram shows now, as DiagramPlace.show takes it."""
        raise NotImplementedError
