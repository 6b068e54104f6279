"""The block-trace explorable's page: prediction gate, controls, and views updated in place."""

from __future__ import annotations

from functools import cached_property
from html import escape
from urllib.parse import urlencode

import panel as pn

from blocktrace.explorables.components.downloads import Downloads, worksheet_html
from blocktrace.explorables.components.embed import EmbedButton, server_base, state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.figures import DrawnAfterLoad
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.locked_controls import LockedControls
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, STICKY_SIDE, TIGHT_LINES, readable
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML, batched, set_object
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.transformer_block_trace import plots
from blocktrace.explorables.transformer_block_trace.diagram import diagram_view
from blocktrace.explorables.transformer_block_trace.renderings import shown
from blocktrace.explorables.transformer_block_trace.state import (
    CONSTANT_INPUT,
    CORRECT_PREDICTION,
    EXPERIMENTS,
    QUERY_KEYS,
    ROW_KEYS,
    TraceState,
)
from blocktrace.explorables.transformer_block_trace.tables import stage_table_html

__all__ = ["TraceExplorable", "stage_table_html"]

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
FILES_NOTE = "The trace's files and the worksheet can be downloaded once you commit your prediction."


class TraceExplorable(ExplorableView):
    """One session's explorable: its own state, widgets and Bokeh models."""

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        state = TraceState()
        super().__init__(state, state.prediction, QUERY_KEYS, query, embed, predict)
        self._build_widgets()
        self._build_views()
        state.param.watch(self._refresh, ["trace", "inspect", "tried"])
        state.param.watch(self._show_input_error, ["input_error"])
        state.prediction.param.watch(self._lock, GATE_EVENTS)
        sync_to_url(state, QUERY_KEYS)
        self.locked_controls = LockedControls(state, CONTROL_PARAMS, state.prediction)
        self._lock()
        self._show_input_error()
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

    # --- building ---------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        s = self.state
        self.scale = pn.widgets.FloatSlider.from_param(s.param.attention_scale, label="Attention update scale",
                                                       step=0.05, sizing_mode="stretch_width")
        self.mlp_scale = pn.widgets.FloatSlider.from_param(s.param.mlp_scale, label="MLP update scale",
                                                           step=0.05, sizing_mode="stretch_width")
        self.replace = pn.widgets.Checkbox.from_param(s.param.replace,
                                                      label="Replace instead of add residuals (broken)")
        self.vector = pn.widgets.TextInput.from_param(s.param.input_text, label="Input vector",
                                                      sizing_mode="stretch_width",
                                                      description="2 to 16 numbers, e.g. 2, 2, 2, 2 or [1 −0.5 3 0]")
        self.vector_error = LiveHTML("", **styled(sizing_mode="stretch_width"))
        self.norm = pn.widgets.Select.from_param(s.param.norm, label="Normalisation", options=NORM_OPTIONS,
                                                 sizing_mode="stretch_width")
        self.inspect = pn.widgets.Select.from_param(
            s.param.inspect, label="Stage to inspect",
            options={s.trace.stage(k).label: k for k in ROW_KEYS}, sizing_mode="stretch_width", max_width=360)
        self.constant = pn.widgets.Button(label="Constant 2, 2, 2, 2")
        self.zero = pn.widgets.Button(label="Zero updates")
        self.reset = pn.widgets.Button(label="Reset")  # "light" read as plain text on white and glared on dark
        self.constant.on_click(lambda _: setattr(s, "input_text", CONSTANT_INPUT))
        self.zero.on_click(lambda _: s.zero_updates())
        self.reset.on_click(lambda _: s.reset())
        self.controls = [self.vector, self.scale, self.mlp_scale, self.replace, self.norm, self.inspect,
                         self.constant, self.zero, self.reset]
        self.respond_quickly(self.controls)
        readable(self.controls)

    def _build_views(self) -> None:
        s = self.state
        self.gate = PredictionGate(s.prediction, QUESTION, HINT)
        r = shown(s)  # nothing of the trace while the gate is locked
        wide = styled(sizing_mode="stretch_width")
        self.stage_table = LiveHTML(r.stage_table, **wide)
        self.norm_alt = LiveHTML(r.norm_alt, **wide)
        self.comp_alt = LiveHTML(r.comp_alt, **wide)
        self.swiglu_alt = LiveHTML(r.swiglu_alt, **wide)
        self.swiglu_table = LiveHTML(r.swiglu_table, **wide)
        self.baseline_table = LiveHTML(r.baseline_table, **wide)
        self.live = LiveHTML(self._live_html(r.announcement), **wide)
        if self.embed:
            self.live.stylesheets = [*self.live.stylesheets, TIGHT_LINES]
        self.diagram = DiagramPlace(lambda key: setattr(s, "inspect", key))  # a stage picked in it is inspected
        self.diagram.show(lambda: diagram_view(s))
        self.charts = pn.Column(sizing_mode="stretch_width", margin=0)  # shown by _lock once unlocked
        self.downloads = Downloads("transformer-block-trace", lambda: s.trace, self._worksheet, s.prediction,
                                   FILES_NOTE)

    @cached_property
    def figures(self) -> plots.TraceFigures:
        """Built the first time they are needed: a served page sends its figures after loading."""
        self._figures_show = shown(self.state)
        return plots.trace_figures(self._figures_show)

    def _worksheet(self) -> str:
        link = server_base() + ROUTE + "?" + urlencode(state_query(self.state, QUERY_KEYS))
        return worksheet_html(TITLE, link, self.state.prediction, [stage_table_html(self.state)],
                              "What happened to the input at each residual step, and why? Name one failure mode.")

    def _live_html(self, text: str) -> str:
        p = self.state.prediction
        verdict = ""
        if p.committed and not self.state.judged:  # no verdict before the experiments it judges
            verdict = (f'<p class="bt-muted">You predicted: {escape(p.choices[p.choice])} Now test it: press '
                       "“Zero updates”, then tick “Replace instead of add residuals”, and compare the output "
                       "with the input.</p>")
        elif p.committed:
            right = p.choice == CORRECT_PREDICTION
            judged = ("your prediction matches what you saw" if right
                      else "what you saw differs: read the output row of each run again")
            verdict = (f'<p class="bt-muted">You predicted: {escape(p.choices[p.choice])} '
                       f'<span class="{"bt-ok" if right else "bt-bad"}">({judged})</span></p>')
        return f'<p class="bt-live" role="status" aria-live="polite">{escape(text)}</p>{verdict}'

    # --- updating ---------------------------------------------------------------------------

    @batched
    def _refresh(self, *_events) -> None:
        r = shown(self.state)
        if "figures" in self.__dict__:  # not built yet: they will be built from the state as it is then
            plots.update_figures(self.figures, r, self._figures_show)
            self._figures_show = r
        self.diagram.show(lambda: diagram_view(self.state))
        set_object(self.stage_table, r.stage_table)
        set_object(self.baseline_table, r.baseline_table)
        set_object(self.swiglu_table, r.swiglu_table)
        set_object(self.norm_alt, r.norm_alt)
        set_object(self.comp_alt, r.comp_alt)
        set_object(self.swiglu_alt, r.swiglu_alt)
        set_object(self.live, self._live_html(r.announcement))

    @batched
    def _show_input_error(self, *_events) -> None:
        error = self.state.input_error
        self.vector_error.object = (
            f'<p class="bt-field-error" role="alert">Could not use this vector: {escape(error)}. '
            "The last good vector is still traced.</p>" if error else ""
        )

    @batched
    def _lock(self, *_events) -> None:
        locked = not self.state.prediction.unlocked
        for widget in self.controls:
            widget.disabled = locked
        self.charts.visible = not locked
        self._refresh()  # the trace arrives with the unlock, not before

    # --- layout -----------------------------------------------------------------------------

    def __panel__(self):
        # Each button beside what it sets. Embedded, four cells of two rows each make one short row of them
        # (the two buttons that put values back share a cell), so the first table is in the first screen.
        cells = ([(self.vector, self.vector_error, self.constant), (self.scale, self.mlp_scale),
                  (self.norm, self.replace), (self.zero, self.reset)] if self.embed else
                 [(self.vector, self.vector_error, self.constant), (self.scale, self.mlp_scale, self.zero),
                  self.replace, self.norm, self.reset])
        controls = self.control_card(LiveHTML('<h2 class="bt-h2">Controls</h2>', **styled()), *cells)
        gate = [self.gate] if self.show_gate else []
        share = pn.Column(
            LiveHTML('<h2 class="bt-h2">Save and share</h2>', **styled()), self.downloads,
            *([] if self.embed else [EmbedButton(self.state, QUERY_KEYS, ROUTE, TITLE, self.state.prediction)]),
            css_classes=["bt-card"], sizing_mode="stretch_width",
        )
        left = pn.Column(*gate, controls, styles=self.side_styles(),
                         stylesheets=[] if self.embed else [STICKY_SIDE])  # in view while the results scroll
        # The first page is what is used first: the controls, the diagram and the stage table. Each text
        # alternative comes with its figure, and what is below the results after them (DrawnAfterLoad).
        after_load = DrawnAfterLoad()

        def plot(name: str, before=(), after=()) -> pn.Column:
            return after_load.place(lambda: getattr(self.figures, f"{name}_fig"), plots.HEIGHTS[name], before, after)

        swiglu_heading = LiveHTML(
            '<h2 class="bt-h2">Inside SwiGLU</h2><p class="bt-lead">Each hidden unit multiplies SiLU(gate) by '
            "its value. A gate near 0 (or well below it) lets almost nothing through; for a large positive gate "
            "SiLU is close to the gate itself, so the unit can pass more than its whole value.</p>",
            **styled(sizing_mode="stretch_width"))
        # Until the commit the charts would be empty frames: the stage table's note says what will come.
        self.charts.objects = [
            plot("norm", after=[self.norm_alt]),
            self.inspect, plot("comp", after=[self.comp_alt]),  # the stage picker above the chart it drives
            plot("swiglu", before=[swiglu_heading], after=[self.swiglu_alt]),
            after_load.later(lambda: [self.swiglu_table, self.baseline_table]),
        ]
        right = pn.Column(self.live, *self.diagram.panes, self.stage_table, self.charts,
                          styles=self.main_styles("36rem"))
        head = [] if self.embed else [LiveHTML(
            f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>', **styled(sizing_mode="stretch_width"))]
        notice_pane = self.notice_panes()
        # After the results, outside the row whose controls stay in view: inside it, the sticky controls slid over it.
        share_place = after_load.later(lambda: [share], sizing_mode="stretch_width")
        body = pn.FlexBox(left, right, flex_wrap="wrap", gap="0.5rem" if self.embed else "1rem",
                          sizing_mode="stretch_width")
        return pn.Column(*head, *notice_pane, body, share_place, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])
