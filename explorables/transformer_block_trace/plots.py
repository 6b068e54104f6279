"""Plot builders for the block trace: figures drawn from a rendering (renderings.py), updated in place.

Figures are built once per session; every change replaces only `source.data`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bokeh.models import ColumnDataSource, FactorRange, Range1d, Span
from bokeh.plotting import figure
from bokeh.transform import dodge

from blocktrace.explorables.components.figures import add_hover, base_figure, legend_outside, session_colours
from blocktrace.explorables.components.palette import ChartColours
from blocktrace.explorables.transformer_block_trace.quantities import STAGE_FACTORS, SWIGLU_SERIES
from blocktrace.explorables.transformer_block_trace.renderings import Rendered

__all__ = ["HEIGHTS", "TraceFigures", "trace_figures", "update_figures"]

HEIGHTS = {"norm": 290, "comp": 260, "swiglu": 320}  # px; the page keeps this room for each until it is drawn
LABEL_GAP = 4  # px between a bar's end and its value label
LABEL_ROOM = 0.22  # of the bars' span, added beyond the longest bar on each side that has one, for its label


# --- norm per stage ------------------------------------------------------------------------

def norm_figure(r: Rendered, colours: ChartColours) -> tuple[figure, ColumnDataSource, ColumnDataSource, Span]:
    src, base = ColumnDataSource(r.source_data("norm")), ColumnDataSource(r.source_data("norm_base"))
    fig = base_figure("Norm ‖·‖ at each stage", height=HEIGHTS["norm"], x_range=FactorRange(*STAGE_FACTORS))
    fig.line("stage", "norm", source=base, line_dash="dashed", color=colours.series[1], line_width=2,
             legend_label="default block, same input")
    fig.scatter("stage", "norm", source=base, marker="square", size=7, color=colours.series[1])
    fig.line("stage", "norm", source=src, color=colours.series[0], line_width=3, legend_label="this run")
    fig.scatter("stage", "norm", source=src, size=9, color=colours.series[0])
    ref = Span(location=r.input_norm, dimension="width", line_color=colours.reference, line_dash="dotted",
               line_width=2)
    fig.add_layout(ref)
    add_hover(fig, [("stage", "@stage"), ("‖·‖", "@norm{0.000}")], mode="mouse")
    legend_outside(fig)
    fig.yaxis.axis_label = "‖·‖ (dotted: input's norm)"
    fig.xaxis.major_label_orientation = 0.6
    fig.y_range.start = 0
    return fig, src, base, ref


# --- one stage, component by component -------------------------------------------------------

def component_data(r: Rendered, colours: ChartColours) -> dict[str, list]:
    """The rendering's bars in this theme's colours, each label just beyond its bar's end: above a bar
    that rises, below one that falls (the rendering's `baseline`), LABEL_GAP px clear of it."""
    data = r.source_data("comp")
    data["colour"] = [colours.sign(v) for v in data["value"]]
    data["label_offset"] = [-LABEL_GAP if b == "bottom" else LABEL_GAP for b in data["baseline"]]
    return data


def value_range(values: list[float]) -> tuple[float, float]:
    """The y extent: zero, every bar, and room beyond the longest bar on each side for its label."""
    if not values:
        return 0.0, 1.0
    low, high = min(0.0, min(values)), max(0.0, max(values))
    span = (high - low) or 1.0
    return (low - LABEL_ROOM * span if low < 0 else 0.0), (high + LABEL_ROOM * span if high > 0 else 0.0)


def component_figure(r: Rendered, colours: ChartColours) -> tuple[figure, ColumnDataSource]:
    data = component_data(r, colours)
    src = ColumnDataSource(data)
    fig = base_figure("Components of the selected stage", height=HEIGHTS["comp"],
                      x_range=FactorRange(*data["component"]), y_range=Range1d(*value_range(data["value"])))
    fig.vbar(x="component", top="value", width=0.7, color="colour", source=src)
    fig.text(x="component", y="label_y", text="label", source=src, text_align="center",
             text_baseline={"field": "baseline"}, y_offset="label_offset", text_font_size="12px",
             text_color=colours.ink)
    fig.add_layout(Span(location=0, dimension="width", line_color=colours.reference, line_width=1))
    add_hover(fig, [("component", "@component"), ("value", "@label")])
    fig.yaxis.axis_label = "value (orange > 0, blue < 0)"
    return fig, src


# --- the SwiGLU detail -----------------------------------------------------------------------

def swiglu_figure(r: Rendered, colours: ChartColours) -> tuple[figure, ColumnDataSource]:
    data = r.source_data("swiglu")
    src = ColumnDataSource(data)
    fig = base_figure("SwiGLU, hidden unit by hidden unit", height=HEIGHTS["swiglu"],
                      x_range=FactorRange(*data["unit"]))
    width = 0.2
    for n, name in enumerate(SWIGLU_SERIES):
        fig.vbar(x=dodge("unit", (n - 1.5) * width, range=fig.x_range), top=f"s{n}", width=width * 0.95,
                 source=src, color=colours.series[n], legend_label=name)
    fig.add_layout(Span(location=0, dimension="width", line_color=colours.reference, line_width=1))
    add_hover(fig, [("unit", "@unit"), ("gate", "@s0{+0.000}"), ("SiLU(gate)", "@s1{+0.000}"),
                    ("value", "@s2{+0.000}"), ("product", "@s3{+0.000}")])
    legend_outside(fig, ncols=2)  # four names do not fit one row of a phone's plot
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
    colours: ChartColours


def trace_figures(r: Rendered) -> TraceFigures:
    """The three figures, drawn from a rendering (of the state, or the locked one: no data)."""
    colours = session_colours()
    norm = norm_figure(r, colours)
    comp = component_figure(r, colours)
    swiglu = swiglu_figure(r, colours)
    return TraceFigures(*norm, *comp, *swiglu, colours)


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
        comp = component_data(r, figs.colours)
        if list(figs.comp_fig.x_range.factors) != comp["component"]:
            figs.comp_fig.x_range.factors = comp["component"]
        low, high = value_range(comp["value"])
        if (figs.comp_fig.y_range.start, figs.comp_fig.y_range.end) != (low, high):
            figs.comp_fig.y_range.update(start=low, end=high)
        figs.comp_src.data = comp
    if changed("swiglu"):
        sw = r.source_data("swiglu")
        if list(figs.swiglu_fig.x_range.factors) != sw["unit"]:
            figs.swiglu_fig.x_range.factors = sw["unit"]
        figs.swiglu_src.data = sw
