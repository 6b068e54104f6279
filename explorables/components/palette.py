"""Colour-blind-safe colours. Sign is never shown by colour alone: bars point up or down and labels carry ±.

Each theme has its own set (`chart_colours(dark)`): on the dark theme's plot (#2b3035, Panel's dark Bokeh
theme) the light theme's darkest colours would vanish, and its near-white heatmap cells would glare.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ChartColours", "chart_colours", "luminance", "sign_colour", "text_on"]

NEGATIVE = "#2166ac"  # blue (PuOr/RdBu family end)
POSITIVE = "#d95f02"  # orange
NEUTRAL = "#777777"
# Okabe–Ito, for a few categorical series.
SERIES = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
# Sequential, light to dark blue, for attention weights (0 … 1).
SEQUENTIAL = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"]
# The dark theme's sequential blues: from just above the plot's background (a weight of 0 is quiet, not a
# white cell) to a light blue for 1, so more weight is brighter, as more weight is darker on white.
SEQUENTIAL_DARK = ["#323c47", "#293f57", "#244a6b", "#215682", "#23659b", "#2f77b5", "#4a8fcc", "#74ace0", "#a6cdf2"]
LIGHT_INK, DARK_INK = "#1b1f24", "#e6edf3"  # the pages' text colours (static/css)


@dataclass(frozen=True)
class ChartColours:
    """What a figure draws with, for one theme."""

    ink: str  # text drawn on the plot (value labels, an arrow's label) and dots over curves
    reference: str  # zero lines and reference lines
    faint: str  # an earlier state drawn behind the current one
    series: tuple[str, ...]  # categorical series, in SERIES order
    positive: str
    negative: str
    sequential: tuple[str, ...]  # 0 … 1, for heatmaps
    cell_line: str  # between heatmap cells: the plot's background
    zero_cell: str  # a change of exactly 0

    def sign(self, value: float) -> str:
        return self.positive if value > 0 else self.negative if value < 0 else self.reference


LIGHT = ChartColours(
    ink=LIGHT_INK, reference="#444444", faint="#bbbbbb", series=tuple(SERIES), positive=POSITIVE,
    negative=NEGATIVE, sequential=tuple(SEQUENTIAL), cell_line="#ffffff", zero_cell="#ffffff")
# On #2b3035 every series colour, bar and dot here is at least 3:1 (WCAG 1.4.11), the ink 11:1.
DARK = ChartColours(
    ink=DARK_INK, reference="#9da7b1", faint="#6e7781",
    series=("#56B4E9", "#E69F00", "#1bb98e", "#d98cba", "#8fd0f5", "#f07c3a", "#F0E442", DARK_INK),
    positive="#f07c3a", negative="#5aa6e6", sequential=tuple(SEQUENTIAL_DARK), cell_line="#2b3035",
    zero_cell="#2b3035")


def chart_colours(dark: bool) -> ChartColours:
    return DARK if dark else LIGHT


def luminance(colour: str) -> float:
    """WCAG relative luminance of a #rrggbb colour."""
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_on(fill: str) -> str:
    """Near-black or white, whichever reads better on `fill`."""
    return "#111111" if contrast("#111111", fill) >= contrast("#ffffff", fill) else "#ffffff"


def sign_colour(value: float) -> str:
    return POSITIVE if value > 0 else NEGATIVE if value < 0 else NEUTRAL

