"""The race's Play button: it says Play while the race is paused and Pause while it plays, and keeps the keyboard.

A Bokeh Toggle cannot do this: BokehJS draws a button anew when its label changes, and the new one does not have
the keyboard's focus, so Enter, pressed again to pause, went nowhere (issue 38: the label therefore never
changed). This is one native <button> in a Panel ReactiveHTML (public API, as components/floor_diagram.py):
its words are changed in place, so the focus stays, and its words are its accessible name. The server decides:
`value` is what the page plays (a press only asks; the view sets it back when it refuses), `label` follows it.
"""

from __future__ import annotations

import panel as pn
import param

__all__ = ["PLAY", "PAUSE", "PlayButton"]

PLAY = "Play"
PAUSE = "Pause"

# Bokeh's and Panel's look of a solid primary button (bokeh buttons.css, panel button.css), which the buttons
# beside it have; bk-btn also gives it the page's focus ring (components/focus.py).
BUTTON_CSS = """
:host { margin: 5px 10px; }
.bk-btn { height: 100%; display: inline-block; text-align: center; vertical-align: middle; white-space: nowrap;
  cursor: pointer; padding: var(--padding-vertical, 6px) var(--padding-horizontal, 12px); font-family: inherit;
  font-size: var(--font-size); line-height: var(--line-height); border: 1.2px solid transparent;
  border-radius: var(--border-radius, 4px); user-select: none; -webkit-user-select: none;
  background-color: var(--design-primary-color, var(--panel-primary-color, #0072b5));
  color: var(--design-primary-text-color, var(--panel-on-primary-color, #ffffff)); }
.bk-btn:active { transform: scale(0.98); }
.bk-btn[disabled] { cursor: not-allowed; pointer-events: none; opacity: 0.65; box-shadow: none; }
"""


class PlayButton(pn.reactive.ReactiveHTML):
    """Play / Pause: `value` True while playing; a press asks for the other; `label` says what a press does."""

    value = param.Boolean(default=False, doc="True while the race plays. A press in the page sets its opposite.")
    label = param.String(default=PLAY, doc="What a press does now: Play while paused, Pause while playing.")
    disabled = param.Boolean(default=False, doc="True while the prediction gate is locked: a press does nothing.")

    _template = '<button id="button" type="button" class="bk-btn" onclick="${script(\'press\')}"></button>'

    _scripts = {
        "render": "button.textContent = data.label; button.disabled = data.disabled",
        "label": "button.textContent = data.label",
        "disabled": "button.disabled = data.disabled",
        # The words change at once; the server's answer (its label, or the value set back) follows
        "press": ("if (button.disabled) return; data.value = !data.value; "
                  f"button.textContent = data.value ? '{PAUSE}' : '{PLAY}'"),
    }

    def __init__(self, **params):
        params.setdefault("stylesheets", [BUTTON_CSS])
        super().__init__(**params)
        self.param.watch(self._relabel, ["value"])

    def _relabel(self, _event=None) -> None:
        self.label = PAUSE if self.value else PLAY
