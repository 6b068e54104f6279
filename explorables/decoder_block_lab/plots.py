"""Plot builders for the decoder-block lab: pure functions from the state to figures and their data.

Each figure is built once per session; a change replaces only `source.data` (and, where the
size changes, a range or a ticker), never the figure.
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import BoxAnnotation, ColumnDataSource, FactorRange, FixedTicker, Range1d, Span
from bokeh.plotting import figure
from bokeh.transform import dodge

from blocktrace.explorables.components.figures import add_hover, base_figure, legend_outside, session_colours
from blocktrace.explorables.components.heatmap import heatmap_data, heatmap_figure
from blocktrace.explorables.components.palette import ChartColours
from blocktrace.explorables.decoder_block_lab.state import MAX_BLOCKS, VARIANTS, LabState
from blocktrace.explorables.decoder_block_lab.tables import VARIANT_NAMES
from blocktrace.explorables.engine import ops

__all__ = ["activation_data", "activation_figure", "delta_data", "delta_figure", "depth_data", "depth_figures",
           "emphasise_current", "head_data", "head_figures", "head_pattern", "norms_data", "norms_figure",
           "position_labels", "preactivations", "set_delta_axes", "set_depth_range", "set_norm_factors"]

MAX_HEADS = 8


def position_labels(state: LabState) -> list[str]:
    """'0 the', '1 block', …: positions counted from 0, as the Corrupt position control counts them."""
    return [f"{i} {w}" for i, w in enumerate(state.words)]


# --- 2. attention, one heatmap per head ----------------------------------------------------------

def head_pattern(state: LabState, head: int) -> np.ndarray:
    """Batch item 0's weights for one head. # [pos, key_pos]"""
    return state.trace["blocks.0.attn.pattern"][0, head]


def head_data(state: LabState, head: int) -> dict:
    labels = position_labels(state)
    if head >= state.heads:
        return heatmap_data(np.zeros((0, 0)), [], [])
    return heatmap_data(head_pattern(state, head), labels, labels)


def head_figures(state: LabState) -> list[tuple]:
    """MAX_HEADS heatmaps, built once; those beyond the current head count are hidden by the view."""
    labels = position_labels(state)
    out = []
    for h in range(MAX_HEADS):
        fig, src = heatmap_figure(f"Attention weights, head {h}", head_data(state, h), labels, labels, height=260)
        out.append((fig, src))
    return out


# --- 3. norms side by side ---------------------------------------------------------------------

NORM_SERIES = ("input", "RMSNorm", "LayerNorm")


def norms_data(state: LabState) -> dict:
    rows = state.normalised()
    n = rows["input"].size
    data: dict = {"component": [f"x{i}" for i in range(n)]}
    for k, name in enumerate(NORM_SERIES):
        data[f"s{k}"] = [float(v) for v in rows[name]]  # NaN stays NaN: no bar is drawn, the table says NaN
    return data


def norms_figure(state: LabState) -> tuple[figure, ColumnDataSource]:
    data = norms_data(state)
    src = ColumnDataSource(data)
    fig = base_figure("The vector and its two norms", height=300,
                      x_range=FactorRange(*data["component"]))
    colours = session_colours()
    width = 0.27
    for k, name in enumerate(NORM_SERIES):
        fig.vbar(x=dodge("component", (k - 1) * width, range=fig.x_range), top=f"s{k}", width=width * 0.92,
                 source=src, color=colours.series[k], legend_label=name)
    fig.add_layout(Span(location=0, dimension="width", line_color=colours.reference, line_width=1))
    add_hover(fig, [("component", "@component"), ("input", "@s0{+0.000}"), ("RMSNorm", "@s1{+0.000}"),
                    ("LayerNorm", "@s2{+0.000}")])
    legend_outside(fig)
    return fig, src


def set_norm_factors(fig: figure, data: dict) -> None:
    if list(fig.x_range.factors) != data["component"]:
        fig.x_range.factors = data["component"]


# --- 4. activations -----------------------------------------------------------------------------

CURVES = ("GELU(x)", "SiLU(x) = x·σ(x)", "σ(x): the fraction of x that SiLU passes")


def preactivations(state: LabState) -> np.ndarray:
    """The hidden pre-activations of batch item 0 (SwiGLU's gate, or GELU's input), flattened."""
    return state.trace["blocks.0.mlp.gate"][0].ravel()


def activation_limit(points: np.ndarray) -> float:
    finite = points[np.isfinite(points)]
    biggest = float(np.max(np.abs(finite))) if finite.size else 0.0
    return float(min(max(4.0, math.ceil(biggest * 1.1)), 30.0))


def activation_data(state: LabState) -> tuple[dict, dict]:
    """The three curves over the range the points need, and the points on the active curve."""
    g = preactivations(state)
    limit = activation_limit(g)
    x = np.linspace(-limit, limit, 241)
    curves = {"x": x, "gelu": ops.gelu(x), "silu": ops.silu(x), "sigmoid": ops.sigmoid(x)}
    f = ops.silu if state.mlp == "swiglu" else ops.gelu
    shown = g[np.abs(g) <= limit] if g.size else g
    points = {"x": shown, "y": f(shown)}
    return curves, points


def activation_figure(state: LabState) -> tuple[figure, ColumnDataSource, ColumnDataSource, object]:
    curves, points = activation_data(state)
    csrc, psrc = ColumnDataSource(curves), ColumnDataSource(points)
    colours = session_colours()
    fig = base_figure("Activations and this trace's points", height=360)
    series = colours.series
    fig.line("x", "gelu", source=csrc, color=series[0], line_width=3, legend_label=CURVES[0])
    fig.line("x", "silu", source=csrc, color=series[5], line_width=3, line_dash="dashed", legend_label=CURVES[1])
    fig.line("x", "sigmoid", source=csrc, color=series[2], line_width=2, line_dash="dotted", legend_label=CURVES[2])
    dots = fig.scatter("x", "y", source=psrc, size=7, color=colours.ink, alpha=0.7, marker="circle",
                       legend_label="this trace's pre-activations")
    for dim in ("width", "height"):
        fig.add_layout(Span(location=0, dimension=dim, line_color=colours.reference, line_width=1))
    add_hover(fig, [("pre-activation", "@x{+0.000}"), ("after activation", "@y{+0.000}")], renderers=[dots])
    legend_outside(fig, "below", ncols=1)  # the curves fill the plot; one name under another fits a phone
    fig.xaxis.axis_label = "pre-activation x"
    fig.yaxis.axis_label = "output"
    return fig, csrc, psrc, dots


# --- 5. causal safety --------------------------------------------------------------------------------

def _delta_colour(value: float, top: float, colours: ChartColours) -> str:
    """The plot's own colour for exactly 0; otherwise a blue whose strength grows with log10 of the change."""
    if not math.isfinite(value):
        return "#b3261e"
    if value == 0.0:
        return colours.zero_cell
    palette = colours.sequential
    low = math.log10(max(top, 1e-300)) - 8  # eight decades below the largest change
    level = (math.log10(value) - low) / 8 if value > 0 else 0.0
    index = 1 + int(round(min(max(level, 0.0), 1.0) * (len(palette) - 2)))
    return palette[index]


def delta_axis_label(colours: ChartColours) -> str:
    """What the colours say, in the theme's words (white is exactly 0 only on the light theme)."""
    if colours.zero_cell == "#ffffff":
        return "feature (white = 0, darker = larger, log scale)"
    return "feature (blank = 0, brighter = larger, log)"


def delta_data(state: LabState, colours: ChartColours | None = None) -> dict:
    colours = colours or session_colours()
    delta = state.delta  # [T, d]
    finite = delta[np.isfinite(delta)]
    top = float(np.max(finite)) if finite.size else 0.0
    data: dict = {"pos": [], "feature": [], "value": [], "colour": [], "word": []}
    for i in range(delta.shape[0]):
        for j in range(delta.shape[1]):
            v = float(delta[i, j])
            data["pos"].append(i)
            data["feature"].append(j)
            data["value"].append(v)
            data["colour"].append(_delta_colour(v, top, colours))
            data["word"].append(state.words[i])
    return data


def delta_figure(state: LabState) -> tuple[figure, ColumnDataSource, BoxAnnotation]:
    colours = session_colours()
    src = ColumnDataSource(delta_data(state, colours))
    T, d = state.delta.shape
    fig = base_figure("|Δ output| per position × feature",
                      height=90 + 34 * T, x_range=Range1d(-0.5, d - 0.5), y_range=Range1d(T - 0.5, -0.5))
    fig.rect("feature", "pos", width=1, height=1, source=src, fill_color="colour", line_color=colours.faint,
             line_alpha=0.5)
    earlier = BoxAnnotation(top=-0.5, bottom=state.corrupt - 0.5, fill_alpha=0.0, line_color="#1a7f37",
                            line_alpha=1.0, line_width=3, line_dash="dashed")
    fig.add_layout(earlier)
    add_hover(fig, [("position", "@pos @word"), ("feature", "@feature"), ("|Δ output|", "@value{0.000e}")])
    fig.xaxis.axis_label = delta_axis_label(colours)
    fig.yaxis.axis_label = "position (box: stays 0)"
    set_delta_axes(fig, state)
    fig.grid.visible = False
    return fig, src, earlier


def set_delta_axes(fig: figure, state: LabState) -> None:
    T, d = state.delta.shape
    if (fig.x_range.end, fig.y_range.start) != (d - 0.5, T - 0.5):
        fig.x_range.start, fig.x_range.end = -0.5, d - 0.5
        fig.y_range.start, fig.y_range.end = T - 0.5, -0.5
    ticks = list(range(T))
    fig.yaxis.ticker = FixedTicker(ticks=ticks)
    fig.yaxis.major_label_overrides = {i: f"{i} {w}" for i, w in enumerate(state.words)}
    step = max(1, d // 16)
    fig.xaxis.ticker = FixedTicker(ticks=list(range(0, d, step)))


# --- 6. depth ------------------------------------------------------------------------------------------

DEPTH_SERIES = dict(zip(VARIANTS, (0, 5, 2, 3), strict=True))  # ChartColours.series index of each variant
DEPTH_DASH = dict(zip(VARIANTS, ("solid", "dashed", "dotted", "dotdash"), strict=True))


def _positive(values: np.ndarray) -> list[float]:
    """Log axes cannot show 0 or NaN: such points become gaps."""
    return [float(v) if math.isfinite(float(v)) and v > 0 else float("nan") for v in values]


def depth_data(state: LabState) -> dict[tuple[str, str], dict]:
    out = {}
    for variant, profile in state.depth.items():
        x = [int(i) + 1 for i in profile["depth"]]  # input of block 1, 2, …; the last is the output
        out[variant] = {"block": x, "rms": _positive(profile["resid_rms"]),
                        "grad": _positive(profile["grad_norm"])}
    return out


def depth_figures(state: LabState) -> tuple[figure, figure, dict, dict]:
    """Residual RMS and gradient norm against depth, four variants on each, log y-axes."""
    colours = session_colours()
    data = depth_data(state)
    sources = {v: ColumnDataSource(data[v]) for v in VARIANTS}
    renderers: dict = {}
    figs = []
    for column, title, label in (
        ("rms", "Residual stream RMS entering each block", "RMS of the stream (log scale)"),
        ("grad", "‖∂L/∂stream‖ at each block's input", "gradient norm (log scale)"),
    ):
        fig = base_figure(title, height=400, y_axis_type="log", x_range=Range1d(0.5, MAX_BLOCKS + 1.5))
        for v in VARIANTS:
            r = fig.line("block", column, source=sources[v], color=colours.series[DEPTH_SERIES[v]], line_width=2,
                         line_dash=DEPTH_DASH[v], legend_label=VARIANT_NAMES[v])
            renderers.setdefault(v, []).append(r)
        add_hover(fig, [("block", "@block"), ("value", f"@{column}{{0.000e}}")])
        legend_outside(fig, "below", ncols=1)  # four lines fill the plot area; one name under another fits a phone
        fig.xaxis.axis_label = "block's input (the last point: the output)"
        fig.yaxis.axis_label = label
        figs.append(fig)
    set_depth_range(figs, state)
    return figs[0], figs[1], sources, renderers


def set_depth_range(figs, state: LabState) -> None:
    end = state.blocks + 1.5
    for fig in figs:
        if fig.x_range.end != end:
            fig.x_range.start, fig.x_range.end = 0.5, end


def emphasise_current(renderers: dict, state: LabState) -> None:
    """The variant the design choices select is drawn thick; the others thin."""
    current = (state.placement, state.residual)
    for variant, rs in renderers.items():
        for r in rs:
            width = 5 if variant == current else 2
            if r.glyph.line_width != width:
                r.glyph.line_width = width
