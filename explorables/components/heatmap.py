"""Attention-weight heatmaps: a sequential palette, the weight printed in each cell that can hold it, hover values.

Each theme has its palette (palette.ChartColours.sequential: dark to light blue on white, quiet to light
blue on the dark theme) and each cell's number is near-black or white, whichever reads better on it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.models import ColumnDataSource, CustomJS, FactorRange, LinearColorMapper
from bokeh.plotting import figure

from blocktrace.explorables.components.figures import add_hover, house_style, session_colours
from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.components.palette import ChartColours, text_on

__all__ = ["MIN_CELL_PX", "heatmap_data", "heatmap_figure", "heatmap_sentences", "set_factors", "token_factors"]

MIN_CELL_PX = 40  # a cell narrower than this cannot hold "0.123" at 12 px: its number is left to hover and the words

# The browser knows how wide the figure is drawn: it shows the cells' numbers only while they fit, with no message
# to the server (eight positions on a phone, or sixteen anywhere, would print numbers over each other).
NUMBERS_IF_THEY_FIT = f"""
const cells = fig.x_range.factors.length;
const width = fig.inner_width;
if (cells > 0 && Number.isFinite(width) && width > 0) {{ numbers.visible = width / cells >= {MIN_CELL_PX}; }}
"""


def token_factors(tokens: Sequence[str]) -> list[str]:
    """Unique axis labels even when a word repeats: "1 eat", "2 an", …"""
    return [f"{i + 1} {t}" for i, t in enumerate(tokens)]


def cell_colour(value: float, palette: Sequence[str]) -> str:
    """The palette's colour for a weight in [0, 1], binned as Bokeh's LinearColorMapper bins it."""
    if not np.isfinite(value):
        return palette[-1]
    n = len(palette)
    return palette[min(max(int(np.floor(value * n)), 0), n - 1)]


def heatmap_data(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str],
                 colours: ChartColours | None = None) -> dict:
    """One cell per (query row, key column); masked (−∞ or 0-weight future) cells keep their value 0."""
    palette = (colours or session_colours()).sequential
    data: dict[str, list] = {"row": [], "col": [], "value": [], "text": [], "text_colour": []}
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            v = float(matrix[i, j])
            data["row"].append(r)
            data["col"].append(c)
            data["value"].append(v)
            data["text"].append(number(v))
            data["text_colour"].append(text_on(cell_colour(v, palette)))
    return data


def heatmap_figure(title: str, data: dict, rows: Sequence[str], cols: Sequence[str],
                   height: int = 240, colours: ChartColours | None = None) -> tuple[figure, ColumnDataSource]:
    colours = colours or session_colours()
    src = ColumnDataSource(data)
    fig = figure(title=title, height=height, sizing_mode="stretch_width", tools="save,reset",
                 x_range=FactorRange(*cols), y_range=FactorRange(*reversed(list(rows))),
                 toolbar_location="right", x_axis_location="above")
    house_style(fig)
    mapper = LinearColorMapper(palette=list(colours.sequential), low=0.0, high=1.0)
    fig.rect("col", "row", width=1, height=1, source=src, fill_color={"field": "value", "transform": mapper},
             line_color=colours.cell_line)
    numbers = fig.text("col", "row", text="text", source=src, text_align="center", text_baseline="middle",
                       text_font_size="12px", text_color="text_colour", name="cell-numbers")
    fit = CustomJS(args={"fig": fig, "numbers": numbers}, code=NUMBERS_IF_THEY_FIT)
    fig.js_on_change("inner_width", fit)
    fig.x_range.js_on_change("factors", fit)
    add_hover(fig, [("query", "@row"), ("key", "@col"), ("weight", "@value{0.000}")])
    fig.xaxis.axis_label = "key (read from) →"
    fig.yaxis.axis_label = "query (reading) ↓"
    fig.grid.visible = False
    fig.axis.major_tick_line_color = None
    return fig, src


def set_factors(fig: figure, rows: Sequence[str], cols: Sequence[str]) -> None:
    """Change the axes in place when the phrase changes (no new figure)."""
    if list(fig.x_range.factors) != list(cols):
        fig.x_range.factors = list(cols)
    if list(fig.y_range.factors) != list(reversed(list(rows))):
        fig.y_range.factors = list(reversed(list(rows)))


def heatmap_sentences(matrix: np.ndarray, tokens: Sequence[str]) -> list[str]:
    """The weights in words, row by row, with each row's sum."""
    out = []
    for i, t in enumerate(tokens):
        parts = ", ".join(f"{tokens[j]} {number(matrix[i, j])}" for j in range(len(tokens)))
        out.append(f"Query {i + 1} ({t}) reads: {parts}; the row sums to {number(matrix[i].sum())}.")
    return out
