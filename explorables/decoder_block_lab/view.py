"""The decoder-block lab's page: a prediction, then eight panels whose views update in place."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

import numpy as np
import panel as pn

from blocktrace.explorables.components.build_turns import in_turn
from blocktrace.explorables.components.downloads import Downloads, worksheet_html
from blocktrace.explorables.components.embed import EmbedButton, server_base, state_query
from blocktrace.explorables.components.explorable import ExplorableView
from blocktrace.explorables.components.figures import DrawnAfterLoad
from blocktrace.explorables.components.floor_diagram import DiagramPlace
from blocktrace.explorables.components.heatmap import set_factors
from blocktrace.explorables.components.html import alt_text
from blocktrace.explorables.components.locked_controls import LockedControls
from blocktrace.explorables.components.page_layout import READABLE_CONTROLS, readable
from blocktrace.explorables.components.prediction import GATE_EVENTS, PredictionGate
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML, batched, set_object
from blocktrace.explorables.components.url_state import sync_to_url
from blocktrace.explorables.decoder_block_lab import describe, plots, tables
from blocktrace.explorables.decoder_block_lab.diagram import diagram_view
from blocktrace.explorables.decoder_block_lab.shapes import exercise_answer
from blocktrace.explorables.decoder_block_lab.state import (
    CONSTANT_NORM_TEXT,
    DEFAULT_NORM_TEXT,
    DEPTH_MAX_D,
    QUERY_KEYS,
    ZERO_NORM_TEXT,
    LabState,
)

__all__ = ["ROUTE", "DecoderLabExplorable"]

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
WIDGET_WIDTH = 200
CHECKS_HELD = ('<p class="bt-muted bt-locked dl-checks-held">The invariants and the attention weights appear here '
               "once you commit your prediction: they would give the answer away.</p>")
DOWNLOADS_HELD = "The trace's files and the worksheet can be downloaded once you commit your prediction."
BUILDING_CSS = (f":host(.{DrawnAfterLoad.PENDING})::before {{ content: 'Building the lab…'; margin: 1rem auto; "
                "font-size: 0.9rem; color: var(--panel-on-background-color, #212529); opacity: 0.75; }")
# The state's parameters the controls set: held by the server while the prediction is not committed.
CONTROL_PARAMS = ("B", "T", "d", "expansion", "norm", "mlp", "placement", "causal", "heads", "residual", "zero_eps",
                  "wrong_split", "corrupt", "corrupt_value", "blocks", "norm_text", "norm_eps", "worked_name",
                  "inspect")


def in_served_page() -> bool:
    """Whether this is a page of a running server (whose browser will connect), not a build in a test or script."""
    doc = pn.state.curdoc
    return doc is not None and doc.session_context is not None


def _html(text: str = "") -> pn.pane.HTML:
    return LiveHTML(text, **styled(sizing_mode="stretch_width"))


def _section(number: int, title: str, lead: str, *items) -> pn.Column:
    head = _html(f'<h2 class="bt-h2" id="dl-panel-{number}">{number}. {escape(title)}</h2>'
                 f'<p class="bt-lead">{lead}</p>')
    return pn.Column(head, *items, css_classes=["bt-card", "dl-panel"], sizing_mode="stretch_width",
                     margin=(0, 0, 12, 0), **styled())


def _beside(first: list, second: list, basis: tuple[str, str] = ("24rem", "28rem")) -> pn.Row:
    """Two groups side by side when the panel is wide (controls and numbers, then the chart they drive),
    one above the other when it is not: at 1440 px a single column left half the width empty.

    A wrapping Row, not a FlexBox: figures in a FlexBox added after the page loaded kept the width
    they were first laid out at (0 px), since Bokeh does not lay out what a FlexBox (ReactiveHTML) holds."""
    return pn.Row(*(pn.Column(*items, margin=0, styles={"flex": f"1 1 {b}", "min-width": "0"})
                    for items, b in ((first, basis[0]), (second, basis[1]))),
                  styles={"flex-wrap": "wrap", "gap": "0.5rem 1.5rem"}, sizing_mode="stretch_width")


def _controls(*widgets) -> pn.FlexBox:
    return pn.FlexBox(*widgets, gap="0.25rem 1rem", sizing_mode="stretch_width", align_items="flex-end")


class DecoderLabExplorable(ExplorableView):
    """One session's lab: its own state, widgets and Bokeh models."""

    def __init__(self, query: dict[str, str] | None = None, embed: bool = False, predict: bool = True):
        served = in_served_page()
        state = LabState(deferred=served)
        super().__init__(state, state.prediction, QUERY_KEYS, query, embed, predict, batch_query=True)
        state.admit_sizes()  # a link's sizes beyond the budget give way to the defaults before anything is held
        self.gate = PredictionGate(state.prediction, QUESTION, HINT)
        # Marked as a place still to be filled, as the other explorables' figures are (DrawnAfterLoad).
        self.body = pn.Column(sizing_mode="stretch_width", min_height=600, css_classes=[DrawnAfterLoad.PENDING],
                              stylesheets=[BUILDING_CSS])
        self.built = False
        sync_to_url(state, QUERY_KEYS)
        self.locked_controls = LockedControls(state, CONTROL_PARAMS, state.prediction)
        if served:
            # The lab's work (its traces, 48-block stacks and a dozen figures) waits until the page's browser
            # is connected and has drawn the page (Panel's onload): a page request alone, however large the
            # sizes in its link, costs the server little. Built as one step of the server's build queue
            # (build_turns.py), a next-tick callback, so batched() sends one message.
            pn.state.onload(lambda: in_turn(self._build))
        else:
            self._build()

    @batched
    def _build(self) -> None:
        """Compute the state, build every widget and view, and fill the page's body with them."""
        if self.built:
            return
        self.built = True
        state = self.state
        state.start()
        self._build_widgets()
        self._build_views()
        state.param.watch(self._refresh_trace, ["trace", "split"])
        state.param.watch(self._refresh_stage, ["inspect"])
        state.param.watch(self._refresh_causal, ["corrupted"])
        state.param.watch(self._refresh_depth, ["depth", "placement", "residual"])
        state.param.watch(self._refresh_norms, ["norm_vector", "norm_eps"])
        state.param.watch(self._show_norm_error, ["norm_error"])
        state.param.watch(self._show_budget_error, ["budget_error"])
        state.param.watch(self._show_trained, ["run_error", "placement", "residual", "causal"])
        state.param.watch(self._refresh_worked, ["worked_name"])
        state.param.watch(self._sync_corrupt_slider, ["trace", "corrupt"])
        state.prediction.param.watch(self._lock, GATE_EVENTS)
        self._refresh_all()
        self._lock()
        self.body.param.update(objects=self._sections(), css_classes=[], min_height=None)

    # --- building ---------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        s = self.state
        w = {"width": WIDGET_WIDTH}
        # 1. shapes
        self.w_B = pn.widgets.IntSlider.from_param(s.param.B, label="B (batch items)", **w)
        self.w_T = pn.widgets.IntSlider.from_param(s.param.T, label="T (positions)", **w)
        self.w_d = pn.widgets.Select.from_param(s.param.d, label="d (model width)", **w)
        self.w_expansion = pn.widgets.Select.from_param(s.param.expansion, label="MLP expansion",
                                                        options=EXPANSION_OPTIONS, **w)
        # 2. design choices
        self.w_norm = pn.widgets.Select.from_param(s.param.norm, label="Normalisation", options=NORM_OPTIONS, **w)
        self.w_mlp = pn.widgets.Select.from_param(s.param.mlp, label="MLP", options=MLP_OPTIONS, **w)
        self.w_placement = pn.widgets.Select.from_param(s.param.placement, label="Placement",
                                                        options=PLACEMENT_OPTIONS, **w)
        self.w_causal = pn.widgets.Checkbox.from_param(s.param.causal, label="Causal mask")
        self.w_heads = pn.widgets.Select.from_param(s.param.heads, label="Heads", **w)
        self.w_reset = pn.widgets.Button(label="Reset every control")
        self.w_reset.on_click(lambda _: s.reset())
        # 3. norms side by side
        self.w_vector = pn.widgets.TextInput.from_param(
            s.param.norm_text, label="Vector to normalise", width=260,
            description="1 to 16 numbers separated by commas, e.g. 2, 2, 2, 2")
        self.w_eps = pn.widgets.Select.from_param(s.param.norm_eps, label="eps", options=EPS_OPTIONS, **w)
        self.w_constant = pn.widgets.Button(label=f"Constant {CONSTANT_NORM_TEXT}")
        self.w_zero = pn.widgets.Button(label="Zero vector")
        self.w_vector_reset = pn.widgets.Button(label="Default vector")  # "light" glared on the dark theme
        self.w_constant.on_click(lambda _: setattr(s, "norm_text", CONSTANT_NORM_TEXT))
        self.w_zero.on_click(lambda _: setattr(s, "norm_text", ZERO_NORM_TEXT))
        self.w_vector_reset.on_click(lambda _: setattr(s, "norm_text", DEFAULT_NORM_TEXT))
        # 5. causal safety
        self.w_corrupt = pn.widgets.IntSlider(label="Corrupt position", start=0, end=s.T - 1, value=s.corrupt, **w)
        self.w_corrupt.param.watch(lambda e: setattr(s, "corrupt", e.new), "value")
        self.w_corrupt_value = pn.widgets.FloatInput.from_param(s.param.corrupt_value, label="Corrupt value", **w)
        # 6. depth
        self.w_blocks = pn.widgets.IntSlider.from_param(s.param.blocks, label="Blocks", width=260)
        # 7. worked example
        options = {f"{r.step} ({r.name})": r.name for r in s.worked.rows} or {"—": s.worked_name}
        self.w_worked = pn.widgets.Select.from_param(s.param.worked_name, label="Intermediate", options=options,
                                                     width=260, disabled=not s.worked.rows)
        # 8. break it
        self.w_break_residual = self._mirror("Missing residual (replace instead of add)", "residual", "replace", "add")
        self.w_break_post = self._mirror("Norm after the addition instead of before (post-norm)", "placement",
                                         "post", "pre")
        self.w_break_eps = pn.widgets.Checkbox.from_param(
            s.param.zero_eps, label="eps = 0, with an all-zero input row at position 0")
        self.w_break_split = pn.widgets.Checkbox.from_param(
            s.param.wrong_split, label="Wrong gate/value split (chunk along positions, not features)")
        self.w_break_mask = self._mirror("No causal mask", "causal", False, True)
        # The files hold the attention weights and the worksheet the invariants: given once the prediction is in.
        self.downloads = Downloads("decoder-block-lab", lambda: s.trace, self._worksheet, s.prediction, DOWNLOADS_HELD)
        self.controls = [
            self.w_B, self.w_T, self.w_d, self.w_expansion, self.w_norm, self.w_mlp, self.w_placement,
            self.w_causal, self.w_heads, self.w_reset, self.w_vector, self.w_eps, self.w_constant, self.w_zero,
            self.w_vector_reset, self.w_corrupt, self.w_corrupt_value, self.w_blocks, self.w_worked,
            self.w_break_residual, self.w_break_post, self.w_break_eps, self.w_break_split, self.w_break_mask,
        ]
        readable(self.controls)

    def _mirror(self, label: str, name: str, on_value, off_value) -> pn.widgets.Checkbox:
        """A Break-it checkbox that shows and sets one of the design choices (both stay in step)."""
        s = self.state
        box = pn.widgets.Checkbox(label=label, value=getattr(s, name) == on_value)
        box.param.watch(lambda e: setattr(s, name, on_value if e.new else off_value), "value")
        s.param.watch(lambda e: setattr(box, "value", e.new == on_value), name)
        return box

    def _build_views(self) -> None:
        s = self.state
        self.live = _html()
        self.trained_note = _html()  # a trained floor from the race page, or why the link's is not shown
        self.budget_note = _html()  # beside the size controls (panel 1) and the blocks slider (panel 6)
        self.depth_budget_note = _html()
        # 1
        self.shape_table = _html()
        self.param_table = _html()
        self.exercise = _html()
        # 2
        self.invariants = _html()
        self.stage_table = _html()
        self.diagram = DiagramPlace(lambda key: setattr(s, "inspect", key.removeprefix("blocks.0.")))
        self.heads = plots.head_figures(s)
        self.head_panes, self.head_alts = [], []  # one column per head: its heatmap and its text alternative
        for fig, _ in self.heads:
            self.head_alts.append(_html())
            fig.sizing_mode = "fixed"
            fig.width = 320
            self.head_panes.append(pn.pane.Bokeh(fig))
        # A Column, not a FlexBox: figures inside Panel's FlexBox never finished rendering on classroom pages
        # (Bokeh never reached "document idle"), and a wrapping Row forced its full width onto phones.
        self.head_box = pn.Column(*self.head_panes[: s.heads])
        self.head_alt_box = pn.Column(*self.head_alts[: s.heads], sizing_mode="stretch_width")
        # 3
        self.vector_error = _html()
        self.norms_table = _html()
        self.norms_verdict = _html()
        self.norms_fig, self.norms_src = plots.norms_figure(s)
        self.norms_alt = _html()
        # 4
        self.act_fig, self.act_curves, self.act_points, _ = plots.activation_figure(s)
        self.act_alt = _html()
        # 5
        self.badge = _html()
        self.prediction_result = _html()
        self.delta_fig, self.delta_src, self.delta_box = plots.delta_figure(s)
        self.delta_alt = _html()
        self.causal_table = _html()
        self.causal_hidden = _html('<p class="bt-muted dl-note">The result appears once your prediction is '
                                   "committed, so that it cannot give the answer away.</p>")
        # 6
        self.rms_fig, self.grad_fig, self.depth_srcs, self.depth_renderers = plots.depth_figures(s)
        self.depth_setup = _html()  # what the panel runs, and which settings follow the controls
        self.depth_status = _html()  # the current arrangement's gradient, announced where it is explained
        self.depth_note = _html()
        self.depth_table = _html()
        self.depth_alt = _html()
        # 7
        self.causal_results = pn.Column(
            _beside([self.badge, self.prediction_result, self.causal_table],
                    [pn.pane.Bokeh(self.delta_fig, sizing_mode="stretch_width"), self.delta_alt],
                    ("30rem", "26rem")),
            sizing_mode="stretch_width")
        self.worked_summary = _html()
        self.worked_detail = _html()
        # 8
        self.break_summary = _html()

    # --- updating ---------------------------------------------------------------------------

    def _refresh_all(self) -> None:
        self._refresh_trace()
        self._refresh_causal()
        self._refresh_depth()
        self._refresh_norms()
        self._show_norm_error()
        self._show_budget_error()
        self._refresh_worked()
        self._show_trained()

    @batched
    def _refresh_trace(self, *_events) -> None:
        s = self.state
        self.shape_table.object = tables.shape_table_html(s)
        self.param_table.object = tables.param_table_html(s)
        self.exercise.object = f'<p class="dl-answer">{escape(exercise_answer(s.d, s.expansion))}</p>'
        self._refresh_stage()
        self._refresh_checks()
        curves, points = plots.activation_data(s)
        self.act_curves.data = curves
        self.act_points.data = points
        self.act_alt.object = alt_text("Activation curves", describe.activation_sentences(s))
        self._refresh_break()
        self._refresh_live()

    def _refresh_checks(self) -> None:
        """The invariants and the attention heatmaps: once the prediction is unlocked. Before, the invariants
        would say that no weight falls on a later position, and the heatmaps show it, which answers the
        prediction's question: none of it is sent (the figures keep their axes, with empty sources)."""
        s = self.state
        unlocked = s.prediction.unlocked
        set_object(self.invariants, tables.invariants_html(s.invariants()) if unlocked else CHECKS_HELD)
        labels = plots.position_labels(s)
        if len(self.head_box.objects) != s.heads:  # the figures stay; only which of them are laid out changes
            self.head_box.objects = self.head_panes[: s.heads]
            self.head_alt_box.objects = self.head_alts[: s.heads]
        for h, ((fig, src), alt) in enumerate(zip(self.heads, self.head_alts, strict=True)):
            if h >= s.heads:
                continue
            set_factors(fig, labels, labels)
            if unlocked:
                src.data = plots.head_data(s, h)
                set_object(alt, alt_text(f"Attention weights, head {h}", describe.head_sentences(s, h)))
            else:
                if any(len(column) for column in src.data.values()):
                    src.data = {name: [] for name in src.data}
                set_object(alt, "")

    @batched
    def _refresh_stage(self, *_events) -> None:
        """The inspected stage: the diagram's selection and the stage table's marked row."""
        self.stage_table.object = tables.stage_table_html(self.state)
        self.diagram.show(lambda: diagram_view(self.state))

    @batched
    def _refresh_causal(self, *_events) -> None:
        s = self.state
        if not s.prediction.unlocked:  # the causal test answers the prediction: none of it is sent before
            if any(len(column) for column in self.delta_src.data.values()):
                self.delta_src.data = {name: [] for name in self.delta_src.data}
            for pane in (self.badge, self.causal_table, self.delta_alt, self.prediction_result):
                pane.object = ""
            return
        if s.corrupted is None or s.delta is None:
            return
        plots.set_delta_axes(self.delta_fig, s)
        self.delta_fig.height = 90 + 34 * s.T
        self.delta_src.data = plots.delta_data(s)
        self.delta_box.bottom = s.corrupt - 0.5
        self.badge.object = tables.badge_html(s.verdict())
        self.causal_table.object = tables.causal_table_html(s)
        self.delta_alt.object = alt_text("|Δ output| per position and feature", describe.delta_sentences(s))
        self.prediction_result.object = describe.prediction_html(self.state.prediction)
        self._refresh_live()

    @batched
    def _refresh_depth(self, *_events) -> None:
        s = self.state
        data = plots.depth_data(s)
        for variant, src in self.depth_srcs.items():
            src.data = data[variant]
        plots.set_depth_range([self.rms_fig, self.grad_fig], s)
        plots.emphasise_current(self.depth_renderers, s)
        self.depth_table.object = tables.depth_table_html(s)
        self.depth_alt.object = alt_text("Residual RMS and gradient norm with depth", describe.depth_sentences(s))
        setup_class = "bt-notice" if s.d > DEPTH_MAX_D else "bt-muted dl-note"
        self.depth_setup.object = f'<p class="{setup_class} dl-depth-setup">{escape(describe.depth_setup(s))}</p>'
        self.depth_status.object = (f'<p class="dl-verdict" role="status" aria-live="polite">'
                                    f"{escape(describe.depth_status(s))}</p>")
        note = ""
        if any(np.any(np.isnan(p["grad_norm"])) for p in s.depth.values()):
            note += ('<p class="bt-field-error">Some values are NaN (eps = 0 on the all-zero row), so those lines '
                     "have gaps or are missing.</p>")
        self.depth_note.object = note
        self._refresh_live()

    @batched
    def _refresh_norms(self, *_events) -> None:
        s = self.state
        data = plots.norms_data(s)
        plots.set_norm_factors(self.norms_fig, data)
        self.norms_src.data = data
        self.norms_table.object = tables.norms_table_html(s)
        self.norms_verdict.object = f'<p class="dl-verdict" role="status">{escape(describe.norms_verdict(s))}</p>'
        self.norms_alt.object = alt_text("The vector and its normalisations", describe.norms_sentences(s))

    @batched
    def _show_norm_error(self, *_events) -> None:
        error = self.state.norm_error
        self.vector_error.object = (
            f'<p class="bt-field-error" role="alert">Could not use this vector: {escape(error)}. '
            "The last good vector is still shown.</p>" if error else "")

    @batched
    def _show_budget_error(self, *_events) -> None:
        error = self.state.budget_error
        html = (f'<p class="bt-field-error" role="alert">{escape(error)} The lab keeps the last sizes that fit.</p>'
                if error else "")
        self.budget_note.object = html
        self.depth_budget_note.object = html

    @batched
    def _refresh_worked(self, *_events) -> None:
        self.worked_summary.object = tables.worked_summary_html(self.state)
        self.worked_detail.object = tables.worked_detail_html(self.state)

    def _refresh_break(self) -> None:
        self.break_summary.object = describe.break_html(self.state)

    def _refresh_live(self) -> None:
        if self.state.corrupted is None or not self.state.depth:
            return
        text = escape(describe.announcement(self.state))
        self.live.object = f'<p class="bt-live dl-live" role="status" aria-live="polite">{text}</p>'

    @batched
    def _sync_corrupt_slider(self, *_events) -> None:
        s = self.state
        end = s.trace.output.shape[-2] - 1
        if (self.w_corrupt.end, self.w_corrupt.value) != (end, s.corrupt):
            self.w_corrupt.param.update(end=end, value=s.corrupt)

    def _show_trained(self, *_events) -> None:
        self.trained_note.object = describe.trained_html(self.state)

    @batched
    def _lock(self, *_events) -> None:
        locked = not self.state.prediction.unlocked
        shaped = self.state.trained is not None  # a trained floor's weights fix its shape
        fixed = (self.w_d, self.w_expansion, self.w_norm, self.w_mlp, self.w_heads)
        for widget in self.controls:
            widget.disabled = locked or (shaped and any(widget is w for w in fixed))
        self.causal_results.visible = not locked  # the causal test answers the prediction's question
        self.causal_hidden.visible = locked
        self._refresh_causal()  # filled only once unlocked
        self._refresh_checks()
        self._refresh_break()
        self._refresh_live()
        self.diagram.show(lambda: diagram_view(self.state))  # its values come with the unlock
        if not self.state.worked.rows:
            self.w_worked.disabled = True
        self.prediction_result.object = describe.prediction_html(self.state.prediction)

    # --- downloads ---------------------------------------------------------------------------

    def _worksheet(self) -> str:
        link = server_base() + ROUTE + "?" + urlencode(state_query(self.state, QUERY_KEYS))
        return worksheet_html(TITLE, link, self.state.prediction, [self.stage_table.object, self.invariants.object],
                              "Which invariant broke when you changed a choice, and why? Name one failure mode.")

    # --- layout -----------------------------------------------------------------------------

    def _sections(self) -> list:
        """The body of the page once built: the live line, reset and share, then the eight panels."""
        shapes = _section(
            1, "Shapes",
            "Pick the sizes. The table follows every tensor through the block and checks each shape against the "
            "one this run produced; the second table counts what the block learns. Heads are set in panel 2.",
            _controls(self.w_B, self.w_T, self.w_d, self.w_expansion), self.budget_note, self.shape_table,
            self.param_table, self.exercise,
        )
        design = _section(
            2, "Design choices",
            "Swap the choices that tell model families apart. The invariants are recomputed from the numbers after "
            "every change; the stage table and the attention heatmaps (batch item 0, one per head) update with them.",
            _controls(self.w_norm, self.w_mlp, self.w_placement, self.w_heads, self.w_causal),
            self.invariants, *self.diagram.panes, self.stage_table,
            self.head_box, self.head_alt_box,
            self.downloads,
        )
        norms = _section(
            3, "Norms side by side",
            "Type a vector and compare what the two norms do to it (unit gain, zero bias). RMSNorm divides by the "
            "root mean square; LayerNorm subtracts the mean first, then divides by the standard deviation.",
            _beside([_controls(self.w_vector, self.w_eps), self.vector_error,
                     _controls(self.w_constant, self.w_zero, self.w_vector_reset), self.norms_verdict,
                     self.norms_table],
                    [pn.pane.Bokeh(self.norms_fig, sizing_mode="stretch_width"), self.norms_alt],
                    ("36rem", "24rem")),  # the table's width: side by side only where it need not scroll
        )
        activations = _section(
            4, "Activations",
            "GELU and SiLU are smooth cousins of ReLU; in SwiGLU, SiLU(gate) multiplies the value, so σ shows what "
            "fraction of the gate gets through. The dots are this trace's hidden pre-activations on the curve the "
            "current MLP uses.",
            pn.pane.Bokeh(self.act_fig, sizing_mode="stretch_width"), self.act_alt,
        )
        causal = _section(
            5, "Causal safety",
            "The lesson's test: overwrite one input position, run the block on the clean and on the corrupted "
            "input, and compare the outputs. A decoder is safe when every earlier position is exactly unchanged.",
            _controls(self.w_corrupt, self.w_corrupt_value), self.causal_hidden, self.causal_results,
        )
        depth = _section(
            6, "Depth",
            "Stack blocks of the current design, each with weights of its own, and follow the stream's size and "
            "the gradient of a fixed scalar loss down to each block's input. All four arrangements of placement "
            "and residual are drawn; the thick line is the current one. In pre-norm the residual line hands the "
            "gradient straight down; in post-norm it crosses two norms per block; with replace there is no "
            "straight line at all.",
            self.depth_setup, _controls(self.w_blocks), self.depth_budget_note, self.depth_status, self.depth_note,
            _beside([pn.pane.Bokeh(self.rms_fig, sizing_mode="stretch_width")],
                    [pn.pane.Bokeh(self.grad_fig, sizing_mode="stretch_width")], ("26rem", "26rem")),
            self.depth_alt, self.depth_table,
        )
        worked = _section(
            7, "The worked example",
            "The lesson's seed-42 block (B = 1, T = 4, d = 8, one head, RMSNorm, a SwiGLU projection of 32 columns, "
            "no mask): the lesson's own weights run through this lab's block, every intermediate compared with the "
            "lesson's PyTorch run. W_O is the identity (the lesson has none) and the combined SwiGLU weight is split "
            "gate-first. These are not the weights of the other panels, which use seed-42 weights of their own, "
            "their own W_O and, unless you switch it off, the causal mask.",
            self.worked_summary, _controls(self.w_worked), self.worked_detail,
        )
        breaks = _section(
            8, "Break it",
            "Each toggle is one of the lesson's failure modes. Its symptom shows in the panels above; the list "
            "below says where to look.",
            self.w_break_residual, self.w_break_post, self.w_break_eps, self.w_break_split, self.w_break_mask,
            self.break_summary,
        )
        share = [] if self.embed else [EmbedButton(self.state, QUERY_KEYS, ROUTE, TITLE)]
        top = pn.Column(self.trained_note, self.live, _controls(self.w_reset), *share, sizing_mode="stretch_width")
        return [top, shapes, design, norms, activations, causal, depth, worked, breaks]

    def __panel__(self):
        head = [] if self.embed else [_html(f'<h1 class="bt-title">{TITLE}</h1><p class="bt-lead">{INTRO}</p>')]
        gate = [self.gate] if self.show_gate else []
        return pn.Column(*head, *self.notice_panes(), *gate, self.body, sizing_mode="stretch_width",
                         stylesheets=[READABLE_CONTROLS])
