"""The block trace with its results drawn in the browser (issue 39 spike): the state and engine on the server,
one payload per change, one component that draws.

    TraceBrowserView(native=True)            # controls drawn by the component (native inputs)
    TraceBrowserView(native=False)           # Panel widgets for the controls, the component for the results
    TraceBrowserView(kind="html")            # the ReactiveHTML variant, its script inline
    TraceBrowserView(kind="cached")          # the ReactiveHTML variant, its script a cached page script

The server still decides everything: a change from the browser is checked here (known control, the gate
unlocked, the parameter's own bounds) before it reaches the state; a refused one is answered with the
payload as it was, so the browser's inputs go back. The prediction gate is Panel's, as today.
Serve it alone: `panel serve explorables/transformer_block_trace/browser_view.py` (see `__main__` below).
"""

from __future__ import annotations

import logging
from typing import Any

import panel as pn
from panel.io.document import unlocked

from blocktrace.explorables.components.browser_view import BrowserView, BrowserViewCached, BrowserViewHTML, spec_json
from blocktrace.explorables.components.locked_controls import LockedControls
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.updates import set_params
from blocktrace.explorables.components.url_state import apply_query, sync_to_url
from blocktrace.explorables.transformer_block_trace.payload import payload
from blocktrace.explorables.transformer_block_trace.state import CONSTANT_INPUT, QUERY_KEYS, ROW_KEYS, TraceState
from blocktrace.explorables.transformer_block_trace.view import CONTROL_PARAMS, HINT, NORM_OPTIONS, QUESTION

__all__ = ["TraceBrowserView"]

log = logging.getLogger(__name__)

ACTIONS = {"constant": "Constant 2, 2, 2, 2", "zero": "Zero updates", "reset": "Reset"}


def controls_spec(state: TraceState) -> list[dict]:
    """The controls the component draws, from the state's parameters (labels as the current view's widgets)."""
    p = state.param
    return [
        {"name": "input_text", "kind": "text", "label": "Input vector",
         "hint": "2 to 16 numbers, e.g. 2, 2, 2, 2 or [1 −0.5 3 0]"},
        {"name": "attention_scale", "kind": "range", "label": "Attention update scale",
         "min": p.attention_scale.bounds[0], "max": p.attention_scale.bounds[1], "step": p.attention_scale.step},
        {"name": "mlp_scale", "kind": "range", "label": "MLP update scale",
         "min": p.mlp_scale.bounds[0], "max": p.mlp_scale.bounds[1], "step": p.mlp_scale.step},
        {"name": "replace", "kind": "checkbox", "label": "Replace instead of add residuals (broken)"},
        {"name": "norm", "kind": "select", "label": "Normalisation",
         "options": [[k, v] for k, v in NORM_OPTIONS.items()]},
        {"name": "inspect", "kind": "select", "label": "Stage to inspect",
         "options": [[state.trace.stage(k).label, k] for k in ROW_KEYS]},
        *({"name": name, "kind": "button", "label": label} for name, label in ACTIONS.items()),
    ]


class TraceBrowserView(pn.viewable.Viewer):
    """One session's block trace: its own state, gate, and one drawing component (plus widgets if not native)."""

    def __init__(self, query: dict[str, str] | None = None, predict: bool = True, native: bool = True,
                 kind: str = "esm"):
        super().__init__()
        state = self.state = TraceState()
        self.notices = apply_query(state, QUERY_KEYS, query or {})
        state.prediction.skipped = not predict
        self.native = native
        self._ack = 0
        self.gate = PredictionGate(state.prediction, QUESTION, HINT)
        component = {"esm": BrowserView, "html": BrowserViewHTML, "cached": BrowserViewCached}[kind]
        self.canvas = component(on_control=self._control, spec=spec_json(controls_spec(state), native))
        self.widgets = [] if native else self._widgets()
        self.locked_controls = LockedControls(state, CONTROL_PARAMS, state.prediction)
        # Every control that changes the results changes the trace; "inspect" only the drawing. A browser change
        # is answered in _control whatever it did (its input may have to go back).
        state.param.watch(self._send, ["trace", "tried", "input_error", "inspect"])
        state.prediction.param.watch(self._send, GATE_EVENTS)
        sync_to_url(state, QUERY_KEYS)
        self._send()

    def _widgets(self) -> list:
        s = self.state
        w = [
            pn.widgets.TextInput.from_param(s.param.input_text, label="Input vector", sizing_mode="stretch_width"),
            pn.widgets.FloatSlider.from_param(s.param.attention_scale, label="Attention update scale", step=0.05,
                                              sizing_mode="stretch_width"),
            pn.widgets.FloatSlider.from_param(s.param.mlp_scale, label="MLP update scale", step=0.05,
                                              sizing_mode="stretch_width"),
            pn.widgets.Checkbox.from_param(s.param.replace, label="Replace instead of add residuals (broken)"),
            pn.widgets.Select.from_param(s.param.norm, label="Normalisation", options=NORM_OPTIONS,
                                         sizing_mode="stretch_width"),
            pn.widgets.Select.from_param(s.param.inspect, label="Stage to inspect",
                                         options={s.trace.stage(k).label: k for k in ROW_KEYS},
                                         sizing_mode="stretch_width"),
        ]
        for name, label in ACTIONS.items():
            button = pn.widgets.Button(label=label)
            button.on_click(lambda _, name=name: self._act(name))
            w.append(button)
        return w

    # --- the browser's changes, checked here ------------------------------------------------------------

    def _control(self, change: dict[str, Any]) -> None:
        name, value = change["name"], change["value"]
        self._ack = change.get("n") if isinstance(change.get("n"), int) else self._ack
        if not self.state.prediction.unlocked:
            self._send()  # the browser's input goes back to the held value
            return
        try:
            if name == "action" and value in ACTIONS:
                self._act(value)
            elif name in CONTROL_PARAMS:
                setattr(self.state, name, value)  # param checks type, bounds and choices
            else:
                raise ValueError(f"unknown control {name!r}")
        except (ValueError, TypeError) as err:
            log.info("refused a control change: %s", err)
        self._send()

    def _act(self, name: str) -> None:
        s = self.state
        if name == "constant":
            s.input_text = CONSTANT_INPUT
        elif name == "zero":
            s.zero_updates()
        else:
            s.reset()

    # --- one payload per change ---------------------------------------------------------------------

    def _send(self, *_events) -> None:
        s = self.state
        locked = not s.prediction.unlocked
        for widget in self.widgets:
            widget.disabled = locked
        # "ack": the browser's last change answered, so a refused one also gets its answer (its input goes back)
        meta, values = payload(s, {name: getattr(s, name) for name in CONTROL_PARAMS}, ack=self._ack)
        changes: dict[str, Any] = {}
        if meta != self.canvas.meta:
            changes["meta"] = meta
        if values is not self.canvas.values:
            changes["values"] = values
        if changes:
            with unlocked():
                set_params(self.canvas, **changes)

    def __panel__(self):
        controls = ([pn.Column(*self.widgets, css_classes=["bt-card"], sizing_mode="stretch_width")]
                    if self.widgets else [])
        return pn.Column(self.gate, *controls, self.canvas, sizing_mode="stretch_width")


def _main() -> None:
    """`panel serve` this file: ?native=0 for Panel widgets, ?kind=html or cached for the ReactiveHTML variants,
    ?predict=off without the gate, ?theme=dark."""
    args = {k: v[-1].decode() for k, v in (pn.state.session_args or {}).items() if v}
    if args.get("theme") == "dark":
        pn.config.theme = "dark"  # per session inside a server: the palette and stylesheet follow it
    TraceBrowserView(query=args, predict=args.get("predict", "on") != "off", native=args.get("native", "1") != "0",
                     kind=args.get("kind", "esm")).servable(title="Block trace, drawn in the browser")


if __name__.startswith("bokeh_app"):
    _main()
