"""Plot builders for the block trace: figures drawn from a rendering (renderings.py), updated in place.

Figures are built once per session; every change replaces only `source.data`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bokeh.models import ColumnDataSource, FactorRange, HoverTool, Span
from bokeh.plotting import figure
from bokeh.transform import dodge

from blocktrace.explorables.components.figures import base_figure
from blocktrace.explorables.components.palette import SERIES
from blocktrace.explorables.transformer_block_trace.quantities import STAGE_FACTORS, SWIGLU_SERIES
from blocktrace.explorables.transformer_block_trace.renderings import Rendered

HEIGHTS = {"norm": 260, "comp": 260, "swiglu": 280}  # px; the page keeps this room for each until it is drawn


# --- norm per stage ------------------------------------------------------------------------

def norm_figure(r: Rendered) -> tuple[figure, ColumnDataSource, ColumnDataSource, Span]:
    src, base = ColumnDataSource(r.source_data("norm")), ColumnDataSource(r.source_data("norm_base"))
    fig = base_figure("Norm ‖·‖ at each stage", height=HEIGHTS["norm"], x_range=FactorRange(*STAGE_FACTORS))
    fig.line("stage", "norm", source=base, line_dash="dashed", color=SERIES[1], line_width=2,
             legend_label="default block, same input")
    fig.scatter("stage", "norm", source=base, marker="square", size=7, color=SERIES[1])
    fig.line("stage", "norm", source=src, color=SERIES[0], line_width=3, legend_label="this run")
    fig.scatter("stage", "norm", source=src, size=9, color=SERIES[0])
    ref = Span(location=r.input_norm, dimension="width", line_color="#444444", line_dash="dotted", line_width=2)
    fig.add_layout(ref)
    fig.add_tools(HoverTool(tooltips=[("stage", "@stage"), ("‖·‖", "@norm{0.000}")], mode="mouse"))
    fig.legend.location = "bottom_right"
    fig.legend.label_text_font_size = "11px"
    fig.legend.background_fill_alpha = 0.7
    fig.yaxis.axis_label = "‖·‖ (dotted: input's norm)"
    fig.xaxis.major_label_orientation = 0.6
    fig.y_range.start = 0
    return fig, src, base, ref


# --- one stage, component by component -------------------------------------------------------

def component_figure(r: Rendered) -> tuple[figure, ColumnDataSource]:
    data = r.source_data("comp")
    src = ColumnDataSource(data)
    fig = base_figure("Components of the selected stage", height=HEIGHTS["comp"],
                      x_range=FactorRange(*data["component"]))
    fig.vbar(x="component", top="value", width=0.7, color="colour", source=src)
    fig.text(x="component", y="label_y", text="label", source=src, text_align="center",
             text_baseline="baseline", text_font_size="11px", text_color="#777777")
    fig.add_layout(Span(location=0, dimension="width", line_color="#444444", line_width=1))
    fig.add_tools(HoverTool(tooltips=[("component", "@component"), ("value", "@label")]))
    fig.yaxis.axis_label = "value (orange > 0, blue < 0)"
    return fig, src


# --- the SwiGLU detail -----------------------------------------------------------------------

def swiglu_figure(r: Rendered) -> tuple[figure, ColumnDataSource]:
    data = r.source_data("swiglu")
    src = ColumnDataSource(data)
    fig = base_figure("SwiGLU, hidden unit by hidden unit", height=HEIGHTS["swiglu"],
                      x_range=FactorRange(*data["unit"]))
    width = 0.2
    for n, name in enumerate(SWIGLU_SERIES):
        fig.vbar(x=dodge("unit", (n - 1.5) * width, range=fig.x_range), top=f"s{n}", width=width * 0.95,
                 source=src, color=SERIES[n], legend_label=name)
    fig.add_layout(Span(location=0, dimension="width", line_color="#444444", line_width=1))
    fig.add_tools(HoverTool(tooltips=[("unit", "@unit"), ("gate", "@s0{+0.000}"), ("SiLU(gate)", "@s1{+0.000}"),
                                      ("value", "@s2{+0.000}"), ("product", "@s3{+0.000}")]))
    fig.legend.orientation = "horizontal"
    fig.legend.location = "top_left"
    fig.legend.label_text_font_size = "11px"
    return fig, src


# --- the three together ----------------------------------------------------------------------

@dataclass(frozen=True)
class TraceFigures:
    """One session's three figures and the models a change updates in place."""

    norm_fig: figure
    norm_src: ColumnDataSource
    norm_base: ColumnDataSource
    norm_ref: Span
    comp_fig: figure
    comp_src: ColumnDataSource
    swiglu_fig: figure
    swiglu_src: ColumnDataSource


def trace_figures(r: Rendered) -> TraceFigures:
    """The three figures, drawn from a rendering (of the state, or the locked one: no data)."""
    norm = norm_figure(r)
    comp = component_figure(r)
    swiglu = swiglu_figure(r)
    return TraceFigures(*norm, *comp, *swiglu)


def update_figures(figs: TraceFigures, r: Rendered, before: Rendered | None = None) -> None:
    """Give the figures a rendering of the current state: new data in the same sources and ranges.

    A source whose data is the same as in `before` (the rendering the figures show now) is left
    alone: the default block's line, for one, changes only with the vector.
    """
    def changed(name: str) -> bool:
        return before is None or getattr(before, name) != getattr(r, name)

    if changed("norm"):
        figs.norm_src.data = r.source_data("norm")
    if changed("norm_base"):
        figs.norm_base.data = r.source_data("norm_base")
    figs.norm_ref.location = r.input_norm  # None (not drawn) while the gate is locked
    if changed("comp"):
        comp = r.source_data("comp")
        if list(figs.comp_fig.x_range.factors) != comp["component"]:
            figs.comp_fig.x_range.factors = comp["component"]
        figs.comp_src.data = comp
    if changed("swiglu"):
        sw = r.source_data("swiglu")
        if list(figs.swiglu_fig.x_range.factors) != sw["unit"]:
            figs.swiglu_fig.x_range.factors = sw["unit"]
        figs.swiglu_src.data = sw
