"""The block-floor explorable's page: the bet and the floor diagram, then one component that draws the controls,
the stepper and claims, both word orders' tables and charts in the browser from one payload per change
(payload.py, drawn by components/drawn_view/block_floor.js), then the checkpoints.

The server keeps the state, the engine, the bet and every limit: a change from the browser is checked here (a
known control, the bet committed, the parameter's own bounds and types) before it reaches the state, and is
answered with the payload as it then is, so a refused change puts the browser's input back.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlencode

import numpy as np
import panel as pn

from blocktrace.explorables.block_floor import plots
from blocktrace.explorables.block_floor.diagram import diagram_view, stage_of
from blocktrace.explorables.block_floor.divergence import agree, floor_rows
from blocktrace.explorables.block_floor.payload import payload, table_caption
from blocktrace.explorables.block_floor.state import MAX_WORDS, QUERY_KEYS, FloorState
from blocktrace.explorables.components.checkpoint import CheckpointView
from blocktrace.explorables.components.downloads import Downloads, worksheet_html
from blocktrace.explorables.components.drawn_view import DrawnView, json_text, spec_json
from blocktrace.explorables.components.drawn_view.answering import AnswersTheDrawing
from blocktrace.explorables.components.embed import EmbedButton, server_base, state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.figures import DrawnAfterLoad
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.html import table
from blocktrace.explorables.components.locked_controls import LockedControls, OnceUnlocked
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS
from blocktrace.explorables.components.palette import text_on
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.url_state import sync_to_url

__all__ = ["FloorDrawing", "FloorExplorable", "controls_spec", "floor_table_html"]

log = logging.getLogger(__name__)

TITLE = "One floor, two word orders"
ROUTE = "/explorables/block-floor"
INTRO = (
    "Step one word through the eight stages of one Transformer floor, for the phrase and for the same phrase "
    "reversed; each further floor adds six more stages. Every vector has two components, so each number can be "
    "read and drawn. Find the first stage where the tracked word's two traces differ."
)
QUESTION = "When the MLP contributes a correction, what happens to the incoming residual stream?"
BET_HINT = "Your prediction settles at stage 8, “+ residual = block output”. Once committed it is final."
# The state's parameters the controls set: held by the server while the bet is not committed.
CONTROL_PARAMS = ("phrase", "positions", "tracked", "reverse", "causal", "stage", "floors")
ACTIONS = {"prev": "◀ Previous stage", "next": "Next stage ▶", "claim": "This is the first divergence",
           "never": "They never diverge"}
MISSION = ("Mission: track the middle word and claim the first stage where its two traces diverge. "
           "Step to a stage, then press “This is the first divergence” — or claim that they never diverge.")
FILES_NOTE = "The traces' files and the worksheet can be downloaded once you commit your prediction."


def controls_spec(state: FloorState, embed: bool = False) -> list[dict]:
    """The controls the browser draws. The Controls card's first (embedded, the three switches last, in one row
    of a grid), then the stepper's and the claims' (`group: "mission"`), in their focus order."""
    p = state.param
    switches = [{"name": "positions", "kind": "checkbox", "label": "Position vectors"},
                {"name": "reverse", "kind": "checkbox", "label": "Reverse order"},
                {"name": "causal", "kind": "checkbox", "label": "Causal mask"}]
    phrase = {"name": "phrase", "kind": "text", "label": "Phrase", "hint": f"1 to {MAX_WORDS} words; press Enter"}
    tracked = {"name": "tracked", "kind": "select", "label": "Tracked word", "options": []}
    floors = {"name": "floors", "kind": "range", "label": "Floors", "min": p.floors.bounds[0],
              "max": p.floors.bounds[1], "step": 1, "digits": 0}
    card = ([phrase, tracked, floors, *switches] if embed else
            [phrase, switches[0], tracked, switches[1], switches[2], floors])
    stage = {"name": "stage", "kind": "range", "label": "Stage", "min": 1, "max": state.last_stage, "step": 1,
             "digits": 0, "group": "mission"}
    buttons = [{"name": name, "kind": "button", "label": label, "group": "mission",
                "row": "step" if name in ("prev", "next") else "claim"} for name, label in ACTIONS.items()]
    return [*card, stage, *buttons]


def _spec(state: FloorState, embed: bool) -> str:
    """The shared spec (palette, controls, embedded) and the two orders' colours with the text that reads on them."""
    spec = json.loads(spec_json(controls_spec(state, embed), embed))
    spec["orders"] = [{"colour": plots.order_colour(n), "text_on": text_on(plots.order_colour(n))} for n in (0, 1)]
    spec["mission"] = MISSION
    return json_text(spec)


def floor_table_html(state: FloorState, title: str, trace, position: int, other) -> str:
    """Stage → vector for the tracked word, current stage highlighted, agreement with the other order."""
    rows = floor_rows(trace, position)
    other_rows = floor_rows(other[0], other[1]) if other else None
    header = ["Stage", "x0", "x1", "‖·‖"] + (["Orders"] if other_rows else [])
    body = []
    for n, row in enumerate(rows):
        is_current = row.stage == state.stage
        numbers = [float(row.vector[0]), float(row.vector[1]), float(np.linalg.norm(row.vector))]
        opts = {"plain": (2,), "current": is_current, "class": "current" if is_current else ""}
        if other_rows:
            numbers.append("same" if agree(row.vector, other_rows[n].vector) else "differs")
        # "Floor 2 · 9. RMSNorm …": the floor first, then the stage number the stepper shows
        label = f"{row.stage}. {row.name}" if row.floor == 1 else f"Floor {row.floor} · {row.stage}. {row.name}"
        body.append((label, numbers, opts))
    caption = table_caption(title, trace, position)
    return f'<div class="bt-table-wrap bt-fit">{table(caption, header, body, "floor-table")}</div>'


class FloorDrawing(DrawnView):
    """The block floor's controls and results, drawn by block_floor.js."""

    _scripts = DrawnView.scripts_for("block_floor.js", "blockFloor")
    _css = "block_floor.css"


class FloorExplorable(AnswersTheDrawing, ExplorableView):
    """One session's block-floor explorable: its own state, bet, diagram, drawing component and checkpoints."""

    CONTROLS = CONTROL_PARAMS
    ACTIONS = ACTIONS

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        state = FloorState()
        super().__init__(state, state.bet, QUERY_KEYS, query, embed, predict)
        s = state
        self.gate = PredictionGate(s.bet, QUESTION, BET_HINT, heading="Your prediction")
        self.drawing = FloorDrawing(on_control=self._control, spec=_spec(s, embed))
        self.diagram = DiagramPlace(lambda key: setattr(s, "stage", stage_of(s, key)))  # a stage picked: stepped to
        self.checkpoint_views = [CheckpointView(c, on_check=self._checked) for c in s.checkpoints]
        # Their feedback explains the bet's answer: not on the page (nor answerable) before the bet.
        self.checkpoints_place = OnceUnlocked(s.bet, pn.FlexBox(*self.checkpoint_views, flex_wrap="wrap", gap="0.75rem",
                                                                 sizing_mode="stretch_width"),
                                              "Two checkpoints follow once your prediction is committed.")
        self.downloads = Downloads("block-floor", lambda: s.original, self._worksheet, s.bet, FILES_NOTE)
        self.locked_controls = LockedControls(s, CONTROL_PARAMS, s.bet)
        state.param.watch(self._send, ["original", "reversed_", "words", "phrase_error", "claim_result",
                                       *CONTROL_PARAMS])
        state.bet.param.watch(self._send, GATE_EVENTS)
        sync_to_url(state, QUERY_KEYS)
        self._send()

    def _worksheet(self) -> str:
        s = self.state
        link = server_base() + ROUTE + "?" + urlencode(state_query(s, QUERY_KEYS))
        tables = [floor_table_html(s, title, trace, pos, None) for title, trace, pos in s.traces()]
        return worksheet_html(TITLE, link, s.bet, tables,
                              "Where did the two orders first differ, and why there? What did each + keep?")

    def _claim(self, stage: int | None) -> None:
        if not self.state.bet.unlocked or not self.state.reverse:  # a press of a disabled button
            return
        short, _ = self.state.claim(stage)
        self.emit("claim", {"explorable": "block-floor", "stage": stage, "verdict": short.lower().replace(" ", "_"),
                            "tracked": self.state.words[self.state.tracked], "positions": self.state.positions,
                            "causal": self.state.causal})

    def resume(self, kind: str, payload: dict) -> None:
        """Put back a claim or a checkpoint answer of an earlier visit (the lesson page calls this on a reload).

        A claim is judged again, only if the controls are as they were when it was made."""
        s = self.state
        if kind == "checkpoint":
            for view in self.checkpoint_views:
                if view.checkpoint.qid == payload.get("checkpoint") and isinstance(payload.get("answer"), int):
                    view.restore(payload["answer"])
        elif kind == "claim" and s.bet.unlocked and s.reverse:
            stage = payload.get("stage")
            same = (payload.get("tracked") == s.words[s.tracked] and payload.get("positions") == s.positions
                    and payload.get("causal") == s.causal)
            if same and (stage is None or (isinstance(stage, int) and 1 <= stage <= s.last_stage)):
                s.claim(stage)

    def _checked(self, checkpoint) -> None:
        self.emit("checkpoint", {"explorable": "block-floor", "checkpoint": checkpoint.qid, "answer": checkpoint.answer,
                                 "correct": checkpoint.correct})

    # --- the browser's changes, checked here (AnswersTheDrawing), and one payload per change ---------------------

    def _unlocked(self) -> bool:
        return self.state.bet.unlocked

    def _payload(self, controls: dict[str, Any], ack: int):
        return payload(self.state, controls, ack=ack)

    def _check(self, name: str, value: Any) -> None:
        if name == "tracked" and not (isinstance(value, int) and 0 <= value < len(self.state.words)):
            raise ValueError(f"no word {value!r} to track")

    def _act(self, name: str) -> None:
        s = self.state
        if name in ("prev", "next"):
            s.step(-1 if name == "prev" else 1)
        else:
            self._claim(s.stage if name == "claim" else None)

    def _diagram_view(self):
        return lambda: diagram_view(self.state)

    # --- layout -----------------------------------------------------------------------------

    def __panel__(self):
        share = pn.Column(
            LiveHTML('<h2 class="bt-h2">Save and share</h2>', **styled()), self.downloads,
            *([] if self.embed else [EmbedButton(self.state, QUERY_KEYS, ROUTE, TITLE, self.state.bet)]),
            css_classes=["bt-card"], sizing_mode="stretch_width",
        )
        head = [] if self.embed else [LiveHTML(
            f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>', **styled(sizing_mode="stretch_width"))]
        top = self.gate_row(self.state.bet.skipped)  # then the controls beside the results (one component)
        # The save-and-share card is below the first screen: it follows once the page is up (fewer models first).
        share_place = DrawnAfterLoad().later(lambda: [share], sizing_mode="stretch_width")
        # READABLE_CONTROLS: the Panel widgets left (the bet, checkpoints, downloads) at the prose's size.
        return pn.Column(*head, *self.notice_panes(), *top, self.drawing, self.checkpoints_place, share_place,
                         sizing_mode="stretch_width", stylesheets=[READABLE_CONTROLS])
