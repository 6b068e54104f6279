"""Attention-weight heatmaps: a sequential palette, the weight printed in each cell, hover values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from bokeh.models import ColumnDataSource, FactorRange, HoverTool, LinearColorMapper
from bokeh.plotting import figure

from blocktrace.explorables.components.focus import focus_ring
from blocktrace.explorables.components.palette import SEQUENTIAL


def token_factors(tokens: Sequence[str]) -> list[str]:
    """Unique axis labels even when a word repeats: "1 eat", "2 an", …"""
    return [f"{i + 1} {t}" for i, t in enumerate(tokens)]


def heatmap_data(matrix: np.ndarray, rows: Sequence[str], cols: Sequence[str]) -> dict:
    """One cell per (query row, key column); masked (−∞ or 0-weight future) cells keep their value 0."""
    data: dict[str, list] = {"row": [], "col": [], "value": [], "text": [], "text_colour": []}
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            v = float(matrix[i, j])
            data["row"].append(r)
            data["col"].append(c)
            data["value"].append(v)
            data["text"].append(f"{v:.3f}")
            data["text_colour"].append("#ffffff" if v > 0.55 else "#111111")
    return data


def heatmap_figure(title: str, data: dict, rows: Sequence[str], cols: Sequence[str],
                   height: int = 240) -> tuple[figure, ColumnDataSource]:
    src = ColumnDataSource(data)
    fig = figure(title=title, height=height, sizing_mode="stretch_width", tools="save,reset",
                 x_range=FactorRange(*cols), y_range=FactorRange(*reversed(list(rows))),
                 toolbar_location="right", x_axis_location="above")
    focus_ring(fig)
    fig.toolbar.logo = None
    mapper = LinearColorMapper(palette=SEQUENTIAL, low=0.0, high=1.0)
    fig.rect("col", "row", width=1, height=1, source=src, fill_color={"field": "value", "transform": mapper},
             line_color="#ffffff")
    fig.text("col", "row", text="text", source=src, text_align="center", text_baseline="middle",
             text_font_size="12px", text_color="text_colour")
    fig.add_tools(HoverTool(tooltips=[("query", "@row"), ("key", "@col"), ("weight", "@value{0.000}")]))
    fig.xaxis.axis_label = "key (read from) →"
    fig.yaxis.axis_label = "query (reading) ↓"
    fig.grid.visible = False
    fig.axis.major_tick_line_color = None
    fig.title.text_font_size = "13px"
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
        parts = ", ".join(f"{tokens[j]} {matrix[i, j]:.3f}" for j in range(len(tokens)))
        out.append(f"Query {i + 1} ({t}) reads: {parts}; the row sums to {matrix[i].sum():.3f}.")
    return out
