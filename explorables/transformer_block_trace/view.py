"""The block-trace explorable's page: the prediction gate and the floor diagram, then one component that draws
the controls and every result in the browser from one payload per change (payload.py).

The server keeps the state, the engine, the gate and every limit: a change from the browser is checked here
(a known control, the gate unlocked, the parameter's own bounds and choices) before it reaches the state, and
is answered with the payload as it then is, so a refused change puts the browser's input back.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlencode

import panel as pn

from blocktrace.explorables.components.downloads import Downloads, worksheet_html
from blocktrace.explorables.components.drawn_view import DrawnView, spec_json
from blocktrace.explorables.components.drawn_view.answering import AnswersTheDrawing
from blocktrace.explorables.components.embed import EmbedButton, server_base, state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.figures import DrawnAfterLoad
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.locked_controls import LockedControls
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.transformer_block_trace.diagram import diagram_view
from blocktrace.explorables.transformer_block_trace.payload import payload
from blocktrace.explorables.transformer_block_trace.state import (
    CONSTANT_INPUT,
    EXPERIMENTS,
    QUERY_KEYS,
    ROW_KEYS,
    TraceState,
)
from blocktrace.explorables.transformer_block_trace.tables import stage_table_html

__all__ = ["TraceDrawing", "TraceExplorable", "controls_spec", "stage_table_html"]

log = logging.getLogger(__name__)

TITLE = "Pre-norm Transformer block trace"
ROUTE = "/explorables/transformer-block-trace"
QUESTION = ("If both attention and the MLP produce all-zero updates, what should a correct residual block "
            "return? And what happens if each sublayer replaces its input instead of adding to it?")
HINT = "Say whether the original signs and magnitudes should still be there at the output."
INTRO = (
    "One token representation (a vector of width 4 by default) traced through one pre-norm block: "
    "RMSNorm, the attention update, the first residual addition, RMSNorm again, the SwiGLU MLP and the "
    "second residual addition. The attention result for this token is already computed: in a full sequence "
    "attention mixes every row, here it hands back this token's share, projected to model width."
)
NORM_OPTIONS = {"RMSNorm": "rmsnorm", "Mean-centred (LayerNorm)": "layernorm"}
# The state's parameters the controls set: held by the server while the gate is locked.
CONTROL_PARAMS = ("input_text", "attention_scale", "mlp_scale", "replace", "norm", "inspect")
ACTIONS = {"constant": "Constant 2, 2, 2, 2", "zero": "Zero updates", "reset": "Reset"}
FILES_NOTE = "The trace's files and the worksheet can be downloaded once you commit your prediction."


def controls_spec(state: TraceState) -> list[dict]:
    """The controls the browser draws, in their focus order: each button beside what it sets."""
    p = state.param

    def scale(name: str, label: str) -> dict:
        bounds = getattr(p, name).bounds
        return {"name": name, "kind": "range", "label": label, "min": bounds[0], "max": bounds[1],
                "step": getattr(p, name).step}

    return [
        {"name": "input_text", "kind": "text", "label": "Input vector",
         "hint": "2 to 16 numbers, e.g. 2, 2, 2, 2 or [1 −0.5 3 0]"},
        {"name": "constant", "kind": "button", "label": ACTIONS["constant"]},
        scale("attention_scale", "Attention update scale"),
        scale("mlp_scale", "MLP update scale"),
        {"name": "norm", "kind": "select", "label": "Normalisation",
         "options": [[k, v] for k, v in NORM_OPTIONS.items()]},
        {"name": "replace", "kind": "checkbox", "label": "Replace instead of add residuals (broken)"},
        {"name": "zero", "kind": "button", "label": ACTIONS["zero"]},
        {"name": "reset", "kind": "button", "label": ACTIONS["reset"]},
        {"name": "inspect", "kind": "select", "label": "Stage to inspect",
         "options": [[state.trace.stage(k).label, k] for k in ROW_KEYS]},
    ]


class TraceDrawing(DrawnView):
    """The block trace's controls and results, drawn by block_trace.js."""

    _scripts = DrawnView.scripts_for("block_trace.js", "blockTrace")


class TraceExplorable(AnswersTheDrawing, ExplorableView):
    """One session's explorable: its own state, gate, diagram and drawing component."""

    CONTROLS = CONTROL_PARAMS
    ACTIONS = ACTIONS

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        state = TraceState()
        super().__init__(state, state.prediction, QUERY_KEYS, query, embed, predict)
        self.gate = PredictionGate(state.prediction, QUESTION, HINT)
        self.drawing = TraceDrawing(on_control=self._control, spec=spec_json(controls_spec(state), embed))
        self.diagram = DiagramPlace(lambda key: setattr(state, "inspect", key))  # a stage picked in it is inspected
        self.downloads = Downloads("transformer-block-trace", lambda: state.trace, self._worksheet, state.prediction,
                                   FILES_NOTE)
        self.locked_controls = LockedControls(state, CONTROL_PARAMS, state.prediction)
        # Every control that changes the results changes the trace; "inspect" only the drawing. A browser change
        # is answered in _control whatever it did (its input may have to go back).
        state.param.watch(self._send, ["trace", "tried", "input_error", "inspect", *CONTROL_PARAMS])
        state.prediction.param.watch(self._send, GATE_EVENTS)
        sync_to_url(state, QUERY_KEYS)
        self._send()
        state.param.watch(self._report_experiment, ["tried"])

    def _report_experiment(self, event) -> None:
        """Each experiment seen is stored, so the verdict can come back after a reload."""
        for seen in event.new[len(event.old):]:
            self.emit("experiment", {"id": seen})

    def resume(self, kind: str, payload: dict) -> None:
        """Put back an experiment seen in an earlier visit (the lesson page calls this on a reload)."""
        seen = payload.get("id")
        if kind == "experiment" and seen in EXPERIMENTS and seen not in self.state.tried \
                and self.state.prediction.unlocked:
            self.state.tried = [*self.state.tried, seen]

    def _worksheet(self) -> str:
        link = server_base() + ROUTE + "?" + urlencode(state_query(self.state, QUERY_KEYS))
        return worksheet_html(TITLE, link, self.state.prediction, [stage_table_html(self.state)],
                              "What happened to the input at each residual step, and why? Name one failure mode.")

    # --- the browser's changes, checked here (AnswersTheDrawing), and one payload per change ---------------------

    def _unlocked(self) -> bool:
        return self.state.prediction.unlocked

    def _payload(self, controls: dict[str, Any], ack: int):
        return payload(self.state, controls, ack=ack)

    def _act(self, name: str) -> None:
        s = self.state
        if name == "constant":
            s.input_text = CONSTANT_INPUT
        elif name == "zero":
            s.zero_updates()
        else:
            s.reset()

    def _diagram_view(self):
        return lambda: diagram_view(self.state)

    # --- layout -----------------------------------------------------------------------------

    def __panel__(self):
        share = pn.Column(
            LiveHTML('<h2 class="bt-h2">Save and share</h2>', **styled()), self.downloads,
            *([] if self.embed else [EmbedButton(self.state, QUERY_KEYS, ROUTE, TITLE, self.state.prediction)]),
            css_classes=["bt-card"], sizing_mode="stretch_width",
        )
        head = [] if self.embed else [LiveHTML(
            f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>', **styled(sizing_mode="stretch_width"))]
        top = self.gate_row(self.state.prediction.skipped)  # then the controls beside the results (one component)
        # The save-and-share card is below the first screen: it follows once the page is up (fewer models first).
        share_place = DrawnAfterLoad().later(lambda: [share], sizing_mode="stretch_width")
        return pn.Column(*head, *self.notice_panes(), *top, self.drawing, share_place, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])  # Panel's widgets (gate, share card) at the prose's size
