"""The block-floor explorable's page: a bet, the controls, both word orders side by side, the mission."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

import numpy as np
import panel as pn

from blocktrace.explorables.block_floor import plots
from blocktrace.explorables.block_floor.diagram import diagram_view, stage_of
from blocktrace.explorables.block_floor.divergence import agree, floor_rows, slot, stage_labels
from blocktrace.explorables.block_floor.state import CORRECT_BET, MAX_WORDS, QUERY_KEYS, FloorState
from blocktrace.explorables.components.checkpoint import CheckpointView
from blocktrace.explorables.components.downloads import Downloads, worksheet_html
from blocktrace.explorables.components.embed import EmbedButton, server_base, state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.heatmap import heatmap_data, heatmap_figure, set_factors
from blocktrace.explorables.components.html import alt_text, table
from blocktrace.explorables.components.locked_controls import LockedControls, OnceUnlocked
from blocktrace.explorables.components.numbers import number, vector
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, STICKY_SIDE, TIGHT_LINES, readable
from blocktrace.explorables.components.palette import text_on
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled, stylesheet
from blocktrace.explorables.components.updates import LiveHTML, batched, set_object
from blocktrace.explorables.components.url_state import sync_to_url

__all__ = ["FloorExplorable", "phrase_html"]

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
LOCKED_NOTE = "The traces appear here once you commit your prediction."
LOCKED_LIMIT = 1.0  # the planes' extent while locked (their real extent follows the traces' values)
MISSION = ("Mission: track the middle word and claim the first stage where its two traces diverge. "
           "Step to a stage, then press “This is the first divergence” — or claim that they never diverge.")
# The stage tables fit their card at any width, so the Orders column is never cut off or scrolled away:
# stage names wrap, and in a narrow card the text and the padding shrink. Slot names sit beside each chip.
FLOOR_CSS = """
:host { container-type: inline-size; }
.bt-fit > table { width: 100%; }
.bt-fit > table tbody th { overflow-wrap: anywhere; }
.bt-fit > table td { white-space: nowrap; }
@container (max-width: 28rem) {
  .bt-fit > table { font-size: 0.8rem; }
  .bt-fit > table th, .bt-fit > table td { padding: 0.15rem 0.25rem; }
}
.bt-slot { margin-left: 0.2em; font-size: 0.8em; color: var(--bt-muted); }
"""


def order_heading_html(tag: str, title: str, colour: str, pair_note: bool = True) -> str:
    """An order card's heading: its pair letter on the order's colour (its arrow's), then its name and (with
    `pair_note`) what it is compared with, so two cards stacked on a phone still read as a pair."""
    other = {"A": "B, the reversed order", "B": "A, the original order"}[tag]
    note = (f'<p class="bt-muted bt-order-pair">Read beside {escape(other)}: the same word, stage by stage.</p>'
            if pair_note else "")
    return (f'<h2 class="bt-h2 bt-order-head"><span class="bt-order-tag" style="background:{colour};'
            f'color:{text_on(colour)}">{tag}</span> {escape(title)}</h2>{note}')


def floor_styled(**params) -> dict:
    """Keyword arguments that give a pane our stylesheet and the floor's own rules."""
    return {"stylesheets": [stylesheet(), FLOOR_CSS], **params}


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
    word = trace.tokens[position]
    floors = "The full floor" if trace.config.n_layers == 1 else f"The {trace.config.n_layers} floors"
    caption = f"{floors} for “{word}” in slot {slot(position)} ({title.lower()})"
    return f'<div class="bt-table-wrap bt-fit">{table(caption, header, body, "floor-table")}</div>'


def phrase_html(trace, position: int) -> str:
    """The phrase as chips, each with its slot (p₀, p₁, …), and what the tracked word's slot adds."""
    chips = []
    for i, word in enumerate(trace.tokens):
        cls = "bt-chip tracked" if i == position else "bt-chip"
        chips.append(f'<span class="{cls}">{escape(word)}<span class="bt-slot">{slot(i)}</span></span>')
    pos = trace["pos_embed"][position] if "pos_embed" in trace else None
    added = (f"slot {slot(position)}, position vector added {vector(pos)}" if pos is not None
             else f"slot {slot(position)}, positions off: nothing added")
    return f'<p class="bt-phrase">{" ".join(chips)}</p><p class="bt-muted">{escape(added)}</p>'


class OrderColumn:
    """The views of one word order, built once and updated in place."""

    def __init__(self, state: FloorState, title: str, trace, position: int, limit: float, table_first: bool = False,
                 order: int = 0):
        self.title = title
        self.tag = "AB"[order]  # the pair's letter: on the card, its plots' titles and the other card's note
        current, previous = plots.arrow_data(state, trace, position)
        self.arrow_fig, self.arrow_cur, self.arrow_prev = plots.arrow_figure(
            f"{self.tag} · the tracked word", current, previous, limit, order)
        factors = plots.slot_factors(trace.tokens)
        floor = plots.pattern_floor(state)
        pattern = plots.attention_pattern(trace, floor)
        self.heat_fig, self.heat_src = heatmap_figure(self._heat_title(floor),
                                                      heatmap_data(pattern, factors, factors), factors, factors)
        self.phrase = LiveHTML("", **floor_styled(sizing_mode="stretch_width"))
        self.table = LiveHTML("", **floor_styled(sizing_mode="stretch_width"))
        self.arrow_alt = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.heat_alt = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.heat_sums = LiveHTML("", **styled(sizing_mode="stretch_width"))
        colour = plots.order_colour(order)
        # Embedded, the two cards stay side by side in a course column (the note is for cards stacked on a
        # phone) and the phrase's lines are packed, so the first screen reaches the tables' rows.
        heading = LiveHTML(order_heading_html(self.tag, title, colour, pair_note=not table_first),
                           **floor_styled(sizing_mode="stretch_width"))
        if table_first:
            self.phrase.stylesheets = [*self.phrase.stylesheets, TIGHT_LINES]
            self.phrase.margin = (0, 10)
        heat = [pn.pane.Bokeh(self.heat_fig, sizing_mode="stretch_width"), self.heat_sums, self.heat_alt]
        card = {"styles": {"flex": "1 1 22rem", "min-width": "0", "border-top": f"4px solid {colour}"},
                "css_classes": ["bt-card", "bt-order"]}
        if table_first:  # embedded: the two tables side by side in the first screen, the plots in a later row
            self.layout = pn.Column(heading, self.phrase, self.table, **card)
            self.plots = pn.Column(pn.pane.Bokeh(self.arrow_fig), self.arrow_alt, *heat, **card)
        else:
            self.layout = pn.Column(heading, self.phrase, pn.pane.Bokeh(self.arrow_fig), self.arrow_alt,
                                    self.table, *heat, **card)
            self.plots = None

    def _heat_title(self, floor: int) -> str:
        return f"{self.tag} · attention weights, floor {floor}"

    def blank(self) -> None:
        """No value of either trace: empty plots, a note where the table goes (the bet is not committed)."""
        for src in (self.arrow_cur, self.arrow_prev, self.heat_src):
            if any(len(column) for column in src.data.values()):
                src.data = {name: [] for name in src.data}
        for rng in (self.arrow_fig.x_range, self.arrow_fig.y_range):
            if rng.end != LOCKED_LIMIT:
                rng.start, rng.end = -LOCKED_LIMIT, LOCKED_LIMIT
        set_object(self.table, f'<p class="bt-muted bt-locked" role="status">{escape(LOCKED_NOTE)}</p>')
        for pane in (self.phrase, self.arrow_alt, self.heat_alt, self.heat_sums):
            set_object(pane, "")

    def update(self, state: FloorState, trace, position: int, other, limit: float) -> None:
        current, previous = plots.arrow_data(state, trace, position)
        self.arrow_cur.data, self.arrow_prev.data = current, previous
        for rng in (self.arrow_fig.x_range, self.arrow_fig.y_range):
            if rng.end != limit:
                rng.start, rng.end = -limit, limit
        set_object(self.arrow_alt, alt_text("Tracked word", plots.arrow_sentences(state, self.title, trace, position)))
        set_object(self.phrase, phrase_html(trace, position))
        set_object(self.table, floor_table_html(state, self.title, trace, position, other))
        factors = plots.slot_factors(trace.tokens)
        floor = plots.pattern_floor(state)
        pattern = plots.attention_pattern(trace, floor)
        if self.heat_fig.title.text != self._heat_title(floor):
            self.heat_fig.title.text = self._heat_title(floor)
        set_factors(self.heat_fig, factors, factors)
        self.heat_src.data = heatmap_data(pattern, factors, factors)
        sums = ", ".join(number(s) for s in pattern.sum(axis=1))
        mask = ("causal mask on: each word reads only itself and the words before it, so every weight on a "
                "later word is 0" if trace.config.causal
                else "causal mask off: every word reads every word, later ones too")
        set_object(self.heat_sums, f'<p class="bt-muted">Floor {floor}, row sums: {sums} (each row sums to 1); '
                                   f"{mask}.</p>")
        set_object(self.heat_alt, alt_text("Attention weights", plots.attention_sentences(pattern, trace.tokens)))


class FloorExplorable(ExplorableView):
    """One session's block-floor explorable."""

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        state = FloorState()
        super().__init__(state, state.bet, QUERY_KEYS, query, embed, predict)
        self._build()
        state.param.watch(self._refresh, ["original", "reversed_", "stage", "tracked", "reverse"])
        state.param.watch(lambda *_: self.diagram.show(lambda: diagram_view(state)), ["claim_result"])
        state.param.watch(self._show_claim, ["claim_result"])
        state.param.watch(self._show_phrase_error, ["phrase_error"])
        state.param.watch(self._sync_tracked_options, ["words", "tracked"])
        state.bet.param.watch(self._lock, GATE_EVENTS)
        sync_to_url(state, QUERY_KEYS)
        self.locked_controls = LockedControls(state, CONTROL_PARAMS, state.bet)
        self._sync_tracked_options()
        self._refresh()
        self._lock()

    def _build(self) -> None:
        s = self.state
        self.gate = PredictionGate(s.bet, QUESTION, BET_HINT, heading="Your prediction")
        self.phrase = pn.widgets.TextInput.from_param(s.param.phrase, label="Phrase", sizing_mode="stretch_width",
                                                      description=f"1 to {MAX_WORDS} words; press Enter")
        self.phrase_error = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.positions = pn.widgets.Checkbox.from_param(s.param.positions, label="Position vectors")
        self.tracked = pn.widgets.Select(label="Tracked word", options={}, sizing_mode="stretch_width")
        self.tracked.param.watch(lambda e: setattr(s, "tracked", e.new) if e.new is not None else None, "value")
        self.reverse = pn.widgets.Checkbox.from_param(s.param.reverse, label="Reverse order")
        self.causal = pn.widgets.Checkbox.from_param(s.param.causal, label="Causal mask")
        self.stage = pn.widgets.IntSlider.from_param(s.param.stage, label="Stage", sizing_mode="stretch_width")
        self.prev = pn.widgets.Button(label="◀ Previous stage")
        self.next = pn.widgets.Button(label="Next stage ▶")
        self.prev.on_click(lambda _: s.step(-1))
        self.next.on_click(lambda _: s.step(1))
        self.floors = pn.widgets.IntSlider.from_param(s.param.floors, label="Floors", sizing_mode="stretch_width")
        self.claim = pn.widgets.Button(label="This is the first divergence", color="primary")
        self.never = pn.widgets.Button(label="They never diverge")
        self.claim.on_click(lambda _: self._claim(s.stage))
        self.never.on_click(lambda _: self._claim(None))
        self.claim_pane = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.banner = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.settle = LiveHTML("", **styled(sizing_mode="stretch_width", margin=(0, 10)))  # empty until stage 8
        self.diagram = DiagramPlace(lambda key: setattr(s, "stage", stage_of(s, key)))  # a stage picked: stepped to
        limit = plots.plane_limit(s)
        self.columns = [OrderColumn(s, title, trace, pos, limit, table_first=self.embed, order=n)
                        for n, (title, trace, pos) in enumerate(
                            (("Original order", s.original, s.tracked), ("Reversed order", s.reversed_, s.mirror)))]
        self.checkpoint_views = [CheckpointView(c, on_check=self._checked) for c in s.checkpoints]
        # Their feedback explains the bet's answer: not on the page (nor answerable) before the bet.
        self.checkpoints_place = OnceUnlocked(s.bet, pn.FlexBox(*self.checkpoint_views, flex_wrap="wrap", gap="0.75rem",
                                                                 sizing_mode="stretch_width"),
                                              "Two checkpoints follow once your prediction is committed.")
        self.downloads = Downloads("block-floor", lambda: s.original, self._worksheet, s.bet,
                                   "The traces' files and the worksheet can be downloaded once you commit your "
                                   "prediction.")
        self.controls = [self.phrase, self.positions, self.tracked, self.reverse, self.causal, self.stage,
                         self.prev, self.next, self.floors, self.claim, self.never]
        self.respond_quickly(self.controls)
        readable(self.controls)

    def _worksheet(self) -> str:
        s = self.state
        link = server_base() + ROUTE + "?" + urlencode(state_query(s, QUERY_KEYS))
        tables = [floor_table_html(s, title, trace, pos, None) for title, trace, pos in s.traces()]
        return worksheet_html(TITLE, link, s.bet, tables,
                              "Where did the two orders first differ, and why there? What did each + keep?")

    def _claim(self, stage: int | None) -> None:
        if not self.state.bet.unlocked or not self.state.reverse:  # a click on a disabled button
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

    # --- updating ---------------------------------------------------------------------------

    @batched
    def _sync_tracked_options(self, *_events) -> None:
        s = self.state
        options = {f"{word} (slot {slot(i)})": i for i, word in enumerate(s.words)}
        if self.tracked.options != options:
            self.tracked.options = options
        if self.tracked.value != s.tracked:
            self.tracked.value = s.tracked

    @batched
    def _refresh(self, *_events) -> None:
        s = self.state
        orders = [("Original order", s.original, s.tracked), ("Reversed order", s.reversed_, s.mirror)]
        if not s.bet.unlocked:
            for column in self.columns:
                column.blank()
        else:
            limit = plots.plane_limit(s)
            for n, (column, (_, trace, pos)) in enumerate(zip(self.columns, orders, strict=True)):
                other = (orders[1 - n][1], orders[1 - n][2]) if s.reverse else None
                column.update(s, trace, pos, other, limit)
        for part in (self.columns[1].layout, self.columns[1].plots):
            if part is not None:
                part.visible = s.reverse
        self.claim.disabled = self.never.disabled = not s.reverse or not s.bet.unlocked
        set_object(self.banner, self._banner_html())
        self.diagram.show(lambda: diagram_view(s))
        set_object(self.settle, self._settle_html())

    def _banner_html(self) -> str:
        s = self.state
        labels = stage_labels(s.original)
        head = f"Stage {s.stage} / {s.last_stage} · {labels[s.stage - 1]}"
        if not s.bet.unlocked:
            status = "Commit your prediction, then compare the two orders stage by stage."
        elif not s.reverse:
            status = "Turn on Reverse order to compare the two orders."
        elif not s.differs_at(s.stage):
            status = "Same vectors in both orders at this stage."
        else:
            status = "The two orders differ at this stage."
        return (f'<p class="bt-stage-banner"><strong>{escape(head)}</strong></p>'
                f'<p class="bt-live" role="status" aria-live="polite">{escape(status)}</p>')

    def _settle_html(self) -> str:
        s = self.state
        if s.stage != 8 or not s.bet.unlocked:
            return ""
        pos = s.tracked
        incoming = s.original["blocks.0.resid_mid"][pos]
        correction = s.original["blocks.0.mlp_out"][pos]
        out = s.original["blocks.0.resid_post"][pos]
        text = (f"Stage 8 settles the prediction: block output = incoming stream + MLP correction: "
                f"{vector(incoming)} + {vector(correction)} = {vector(out)}. "
                "Nothing the stream carried was discarded.")
        bet = ""
        if s.bet.committed:
            right = s.bet.choice == CORRECT_BET
            said = escape(s.bet.choices[s.bet.choice])
            outcome = "was right" if right else "was not: the stream is kept and the correction added"
            bet = f' <span class="{"bt-ok" if right else "bt-bad"}">Your prediction, “{said}”, {outcome}.</span>'
        return f'<p class="bt-card">{escape(text)}{bet}</p>'

    @batched
    def _show_claim(self, *_events) -> None:
        result = self.state.claim_result
        if result is None:
            set_object(self.claim_pane, "")
            return
        stage, short, why = result
        claimed = "they never diverge" if stage is None else f"stage {stage}"
        cls = "bt-ok" if short == "Right on" else "bt-bad"
        self.claim_pane.object = (f'<p role="status" aria-live="polite"><span class="{cls}">{escape(short)}</span> '
                                  f"(you claimed {escape(claimed)}). {escape(why)}</p>")

    @batched
    def _show_phrase_error(self, *_events) -> None:
        error = self.state.phrase_error
        self.phrase_error.object = (f'<p class="bt-field-error" role="alert">Could not use this phrase: '
                                    f"{escape(error)}. The last good phrase is still shown.</p>" if error else "")

    @batched
    def _lock(self, *_events) -> None:
        locked = not self.state.bet.unlocked
        for widget in self.controls:
            widget.disabled = locked
        self._refresh()

    def __panel__(self):
        # Embedded, the three switches share a cell: four cells make one short row of controls.
        cells = ([(self.phrase, self.phrase_error), self.tracked, self.floors, (self.positions, self.reverse,
                                                                              self.causal)] if self.embed else
                 [(self.phrase, self.phrase_error), self.positions, self.tracked, self.reverse, self.causal,
                  self.floors])
        controls = self.control_card(LiveHTML('<h2 class="bt-h2">Controls</h2>', **styled()), *cells)
        # The stepper and the claim it makes, with the stage it is at: one card, right before the orders.
        mission = pn.Column(
            LiveHTML(f'<h2 class="bt-h2">Step and claim</h2><p>{escape(MISSION)}</p>', **styled()),
            self.banner, self.stage, pn.FlexBox(self.prev, self.next, sizing_mode="stretch_width"),
            pn.FlexBox(self.claim, self.never, sizing_mode="stretch_width"), self.claim_pane,
            css_classes=["bt-card"], sizing_mode="stretch_width",
        )
        gate = [self.gate] if self.show_gate else []
        share = pn.Column(
            LiveHTML('<h2 class="bt-h2">Save and share</h2>', **styled()), self.downloads,
            *([] if self.embed else [EmbedButton(self.state, QUERY_KEYS, ROUTE, TITLE, self.state.bet)]),
            css_classes=["bt-card"], sizing_mode="stretch_width",
        )
        def pair(cards) -> pn.FlexBox:
            return pn.FlexBox(*cards, flex_wrap="wrap", gap="0.75rem", sizing_mode="stretch_width")

        orders = pair(c.layout for c in self.columns)
        if self.embed:  # a course column's first screen: the controls, the diagram and the two tables
            left = pn.Column(*gate, controls, styles=self.side_styles())
            right = pn.Column(*self.diagram.panes, self.settle, orders, mission, pair(c.plots for c in self.columns),
                              self.checkpoints_place, styles=self.main_styles("40rem"))
        else:
            left = pn.Column(*gate, controls, mission, styles=self.side_styles(),
                             stylesheets=[STICKY_SIDE])  # in view while the results scroll
            right = pn.Column(*self.diagram.panes, self.settle, orders, self.checkpoints_place,
                              styles=self.main_styles("40rem"))
        head = [] if self.embed else [LiveHTML(
            f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>', **styled(sizing_mode="stretch_width"))]
        notice_pane = self.notice_panes()
        # After the results, outside the row whose controls stay in view: inside it, the sticky controls slid over it.
        body = pn.FlexBox(left, right, flex_wrap="wrap", gap="0.5rem" if self.embed else "1rem",
                          sizing_mode="stretch_width")
        return pn.Column(*head, *notice_pane, body, share, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])
