"""The decoder-block lab's page: the prediction beside the floor diagram, then one component that draws the eight
panels (their controls, tables, charts and sentences) in the browser from one payload per change (payload.py,
drawn by components/drawn_view/decoder_lab.js), then the save-and-share card.

The server keeps the state, the engine, the prediction and every limit (budget.py, the parameters' bounds): a
change from the browser is checked here (a known control, the prediction committed, its type and bounds, a trained
floor's fixed shape) before it reaches the state, and is answered with the payload as it then is, so a refused
change puts the browser's input back, with a message beside a typed field.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any
from urllib.parse import urlencode

import panel as pn

from blocktrace.explorables.components.build_turns import in_turn
from blocktrace.explorables.components.downloads import Downloads, worksheet_html
from blocktrace.explorables.components.drawn_view import DrawnView, json_text, spec_json
from blocktrace.explorables.components.drawn_view.answering import AnswersTheDrawing
from blocktrace.explorables.components.embed import EmbedButton, server_base, state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.figures import DrawnAfterLoad, session_colours
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.locked_controls import LockedControls
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.decoder_block_lab import plots, tables
from blocktrace.explorables.decoder_block_lab.diagram import diagram_view
from blocktrace.explorables.decoder_block_lab.payload import BREAK_MIRRORS, SHAPED, payload
from blocktrace.explorables.decoder_block_lab.state import (
    CONSTANT_NORM_TEXT,
    D_CHOICES,
    DEFAULT_NORM_TEXT,
    HEAD_CHOICES,
    MAX_NORM_WIDTH,
    QUERY_KEYS,
    ZERO_NORM_TEXT,
    LabState,
)
from blocktrace.explorables.engine.config import MAX_ABS_VALUE

__all__ = ["ROUTE", "DecoderLabDrawing", "DecoderLabExplorable", "controls_spec"]

log = logging.getLogger(__name__)

TITLE = "Decoder block lab"
ROUTE = "/explorables/decoder-block-lab"
INTRO = (
    "A decoder block takes a residual stream of shape [B, T, d] and returns one of exactly the same shape: "
    "attention, then an MLP, each read a normalised copy of the stream and add what they compute back onto it. "
    "This lab runs such a block in NumPy, on the lesson's [1, 4, 8] stream by default, so you can count its "
    "shapes and parameters, swap the choices that tell model families apart, test that no position can see "
    "its future, and watch what stacking 48 blocks does to the signal and to its gradient. Its weights are drawn "
    "at random from the seed 42, with the causal mask on; only panel 7, The worked example, uses the weights of "
    "the lesson's own example and reproduces its numbers."
)
QUESTION = ("Overwrite every feature of position 2 with 999 and run the block again, causal mask on. "
            "What happens to the block's outputs at positions 0 and 1?")
HINT = ("Think about which positions each output row may read, and whether a norm or the MLP ever looks across "
        "positions. The Causal safety panel settles it.")
NORM_OPTIONS = {"RMSNorm": "rmsnorm", "LayerNorm": "layernorm"}
MLP_OPTIONS = {"SwiGLU": "swiglu", "GELU": "gelu"}
PLACEMENT_OPTIONS = {"pre-norm": "pre", "post-norm": "post"}
EXPANSION_OPTIONS = {"2": 2, "4 (the lesson's)": 4, "8": 8}
EPS_OPTIONS = {"1e-6 (the lesson's)": 1e-6, "1e-5": 1e-5, "0.001": 1e-3, "0.1": 0.1, "0 (no eps)": 0.0}
DOWNLOADS_HELD = "The trace's files and the worksheet can be downloaded once you commit your prediction."
# The state's parameters the controls set: held by the server while the prediction is not committed.
CONTROL_PARAMS = ("B", "T", "d", "expansion", "norm", "mlp", "placement", "causal", "heads", "residual", "zero_eps",
                  "wrong_split", "corrupt", "corrupt_value", "blocks", "norm_text", "norm_eps", "worked_name",
                  "inspect")
DRAWN_PARAMS = CONTROL_PARAMS[:-1]  # the controls the browser draws (a stage is inspected in the diagram)
ACTIONS = {"reset": "Reset every control", "constant": f"Constant {CONSTANT_NORM_TEXT}", "zero": "Zero vector",
           "default": "Default vector"}
VECTORS = {"constant": CONSTANT_NORM_TEXT, "zero": ZERO_NORM_TEXT, "default": DEFAULT_NORM_TEXT}
MAX_TYPED = 400  # characters a typed value may have (16 numbers of a dozen digits fit)
# The eight panels: number, title, the lead under the title (drawn once, from the spec).
PANELS = [
    (1, "Shapes", "Pick the sizes. The table follows every tensor through the block and checks each shape against "
     "the one this run produced; the second table counts what the block learns. Heads are set in panel 2."),
    (2, "Design choices", "Swap the choices that tell model families apart. The invariants are recomputed from the "
     "numbers after every change; the stage table and the attention heatmaps (batch item 0, one per head) update "
     "with them."),
    (3, "Norms side by side", "Type a vector and compare what the two norms do to it (unit gain, zero bias). "
     "RMSNorm divides by the root mean square; LayerNorm subtracts the mean first, then divides by the standard "
     "deviation."),
    (4, "Activations", "GELU and SiLU are smooth cousins of ReLU; in SwiGLU, SiLU(gate) multiplies the value, so σ "
     "shows what fraction of the gate gets through. The dots are this trace's hidden pre-activations on the curve "
     "the current MLP uses."),
    (5, "Causal safety", "The lesson's test: overwrite one input position, run the block on the clean and on the "
     "corrupted input, and compare the outputs. A decoder is safe when every earlier position is exactly "
     "unchanged."),
    (6, "Depth", "Stack blocks of the current design, each with weights of its own, and follow the stream's size "
     "and the gradient of a fixed scalar loss down to each block's input. All four arrangements of placement and "
     "residual are drawn; the thick line is the current one. In pre-norm the residual line hands the gradient "
     "straight down; in post-norm it crosses two norms per block; with replace there is no straight line at all."),
    (7, "The worked example", "The lesson's seed-42 block (B = 1, T = 4, d = 8, one head, RMSNorm, a SwiGLU "
     "projection of 32 columns, no mask): the lesson's own weights run through this lab's block, every "
     "intermediate compared with the lesson's PyTorch run. W_O is the identity (the lesson has none) and the "
     "combined SwiGLU weight is split gate-first. These are not the weights of the other panels, which use seed-42 "
     "weights of their own, their own W_O and, unless you switch it off, the causal mask."),
    (8, "Break it", "Each toggle is one of the lesson's failure modes. Its symptom shows in the panels above; the "
     "list below says where to look."),
]


def in_served_page() -> bool:
    """Whether this is a page of a running server (whose browser will connect), not a build in a test or script."""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def _options(options: dict) -> list[list]:
    return [[label, value] for label, value in options.items()]


def controls_spec(state: LabState) -> list[dict]:
    """The controls the browser draws, each with the panel it sits in (0: above the panels), in focus order."""
    p = state.param
    worked = [[f"{r.step} ({r.name})", r.name] for r in state.worked.rows] or [["—", state.worked_name]]

    def rng(name: str, label: str, panel: int) -> dict:
        lo, hi = p[name].bounds
        return {"name": name, "kind": "range", "label": label, "min": lo, "max": hi, "step": 1, "digits": 0,
                "panel": panel}

    def select(name: str, label: str, options: list, panel: int) -> dict:
        return {"name": name, "kind": "select", "label": label, "options": options, "panel": panel}

    def button(name: str, panel: int) -> dict:
        return {"name": name, "kind": "button", "label": ACTIONS[name], "panel": panel}

    def box(name: str, label: str) -> dict:
        return {"name": name, "kind": "checkbox", "label": label, "panel": 8}

    return [
        button("reset", 0),
        rng("B", "B (batch items)", 1), rng("T", "T (positions)", 1),
        select("d", "d (model width)", [[str(d), d] for d in D_CHOICES], 1),
        select("expansion", "MLP expansion", _options(EXPANSION_OPTIONS), 1),
        select("norm", "Normalisation", _options(NORM_OPTIONS), 2),
        select("mlp", "MLP", _options(MLP_OPTIONS), 2),
        select("placement", "Placement", _options(PLACEMENT_OPTIONS), 2),
        select("heads", "Heads", [[str(h), h] for h in HEAD_CHOICES], 2),
        {"name": "causal", "kind": "checkbox", "label": "Causal mask", "panel": 2},
        {"name": "norm_text", "kind": "text", "label": "Vector to normalise", "panel": 3,
         "hint": f"1 to {MAX_NORM_WIDTH} numbers separated by commas, e.g. 2, 2, 2, 2; press Enter"},
        select("norm_eps", "eps", _options(EPS_OPTIONS), 3),
        button("constant", 3), button("zero", 3), button("default", 3),
        {**rng("corrupt", "Corrupt position", 5), "max": state.T - 1},
        {"name": "corrupt_value", "kind": "text", "label": "Corrupt value", "panel": 5,
         "hint": f"a number from −{MAX_ABS_VALUE:g} to {MAX_ABS_VALUE:g}; press Enter"},
        rng("blocks", "Blocks", 6),
        select("worked_name", "Intermediate", worked, 7),
        box("break_residual", "Missing residual (replace instead of add)"),
        box("break_post", "Norm after the addition instead of before (post-norm)"),
        box("zero_eps", "eps = 0, with an all-zero input row at position 0"),
        box("wrong_split", "Wrong gate/value split (chunk along positions, not features)"),
        box("break_mask", "No causal mask"),
    ]


def _spec(state: LabState, embed: bool) -> str:
    """The shared spec, the panels' titles and leads, and the colours the causal map needs."""
    spec = json.loads(spec_json(controls_spec(state), embed))
    c = session_colours()
    spec["panels"] = [{"n": n, "title": title, "lead": lead} for n, title, lead in PANELS]
    spec["palette"].update(zero_cell=c.zero_cell, ink=c.ink, faint=c.faint)
    spec["delta_axis"] = plots.delta_axis_label(c)
    return json_text(spec)


def read_number(text: str) -> float:
    """A typed number, or ValueError saying what is wrong with it (in the student's words)."""
    if not isinstance(text, str | int | float) or isinstance(text, bool):
        raise ValueError("type a number")
    text = str(text).strip().replace("\u2212", "-")
    if not text or len(text) > MAX_TYPED:
        raise ValueError("type a number")
    try:
        value = float(text)
    except ValueError:
        raise ValueError("type a number, e.g. 999 or -2.5") from None
    if not math.isfinite(value) or abs(value) > MAX_ABS_VALUE:
        raise ValueError(f"type a number from −{MAX_ABS_VALUE:g} to {MAX_ABS_VALUE:g}")
    return value


def read_text(text: str) -> str:
    """A typed vector as text (the state parses it and says what is wrong with its numbers)."""
    if not isinstance(text, str):
        raise ValueError("type numbers separated by commas")
    if len(text) > MAX_TYPED:
        raise ValueError(f"type at most {MAX_TYPED} characters")
    return text


# The typed fields: how a value is read, what it is called, where the last good one is.
TYPED = {"corrupt_value": (read_number, "value", "still used"), "norm_text": (read_text, "vector", "still shown")}


class DecoderLabDrawing(DrawnView):
    """The decoder lab's controls and results, drawn by decoder_lab.js."""

    _scripts = DrawnView.scripts_for("decoder_lab.js", "decoderLab")
    _css = "decoder_lab.css"


class DecoderLabExplorable(AnswersTheDrawing, ExplorableView):
    """One session's lab: its own state, prediction, diagram, drawing component and downloads."""

    CONTROLS = DRAWN_PARAMS
    ACTIONS = ACTIONS

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        served = in_served_page()
        state = LabState(deferred=served)
        super().__init__(state, state.prediction, QUERY_KEYS, query, embed, predict, batch_query=True)
        state.admit_sizes()  # a link's sizes beyond the budget give way to the defaults before anything is held
        s = state
        self.built = False
        self.errors: dict[str, str] = {}  # a refused typed value's message, beside its field
        self.gate = PredictionGate(s.prediction, QUESTION, HINT)
        self.drawing = DecoderLabDrawing(on_control=self._control, spec=_spec(s, embed))
        self.diagram = DiagramPlace(lambda key: setattr(s, "inspect", key.removeprefix("blocks.0.")))
        # The files hold the attention weights and the worksheet the invariants: given once the prediction is in.
        self.downloads = Downloads("decoder-block-lab", lambda: s.trace, self._worksheet, s.prediction, DOWNLOADS_HELD)
        sync_to_url(s, QUERY_KEYS)
        self.locked_controls = LockedControls(s, CONTROL_PARAMS, s.prediction)
        s.param.watch(self._send, ["trace", "split", "corrupted", "depth", "norm_vector", "norm_error",
                                   "budget_error", "run_error", *CONTROL_PARAMS])
        s.prediction.param.watch(self._send, GATE_EVENTS)
        self._send()  # the controls (and the panels' place), in the page's first document
        if served:
            # The lab's work (its traces and 48-block stacks) waits until the page's browser is connected and has
            # drawn the page (Panel's onload): a page request alone, however large the sizes in its link, costs
            # the server little. Until then the drawing shows its controls and "Building the lab…".
            pn.state.onload(lambda: in_turn(self._build))
        else:
            self._build()

    def _build(self) -> None:
        """Compute the state (once) and send the first payload with its results."""
        if self.built:
            return
        self.built = True
        self.state.start()
        self._send()

    def _worksheet(self) -> str:
        s = self.state
        link = server_base() + ROUTE + "?" + urlencode(state_query(s, QUERY_KEYS))
        return worksheet_html(TITLE, link, s.prediction,
                              [tables.html_of(tables.stage_table(s)), tables.invariants_html(s.invariants())],
                              "Which invariant broke when you changed a choice, and why? Name one failure mode.")

    # --- the browser's changes, checked here (AnswersTheDrawing), and one payload per change ---------------------

    def _control(self, change: dict[str, Any]) -> None:
        """A Break-it switch sets the design choice it mirrors; a typed value is read here, and one that cannot be
        used is refused with a message beside its field (the vector's own parsing is the state's)."""
        name, value = change["name"], change["value"]
        if name in BREAK_MIRRORS:
            parameter, on, off = BREAK_MIRRORS[name]
            change = {**change, "name": parameter, "value": (on if value else off) if isinstance(value, bool)
                      else value}
        elif name in TYPED and self._unlocked():
            self.errors.pop(name, None)
            read, what, kept = TYPED[name]
            try:
                change = {**change, "value": read(value)}
            except ValueError as err:
                self.errors[name] = f"Could not use this {what}: {err}. The last good {what} is {kept}."
                change = {**change, "name": "", "value": None}  # refused below, answered with the held value
        super()._control(change)

    def _unlocked(self) -> bool:
        return self.state.prediction.unlocked

    def _send(self, *events) -> None:
        if events and self._answering:
            return
        if not self.built:  # the controls alone, until the lab is built
            meta, _ = self._payload({name: getattr(self.state, name) for name in self.CONTROLS}, self._ack)
            if meta != self.drawing.meta:
                self.drawing.meta = meta
            return
        super()._send(*events)

    def _payload(self, controls: dict[str, Any], ack: int):
        return payload(self.state, controls, ack=ack, errors=self.errors, building=not self.built)

    def _check(self, name: str, value: Any) -> None:
        if name in SHAPED and self.state.trained is not None and value != getattr(self.state, name):
            raise ValueError("a trained floor's weights fix its shape")
        if name == "corrupt" and not (isinstance(value, int) and 0 <= value < self.state.T):
            raise ValueError(f"no position {value!r}")

    def _act(self, name: str) -> None:
        s = self.state
        if name == "reset":
            s.reset()
        else:
            s.norm_text = VECTORS[name]

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
        top = self.gate_row(self.state.prediction.skipped)  # then the eight panels (one component)
        # The save-and-share card is below the first screen: it follows once the page is up (fewer models first).
        share_place = DrawnAfterLoad().later(lambda: [share], sizing_mode="stretch_width")
        return pn.Column(*head, *self.notice_panes(), *top, self.drawing, share_place, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])  # Panel's widgets (gate, share card) at the prose's size
