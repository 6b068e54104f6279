"""The house style of a Bokeh figure: full width, a small title, save and reset only, no logo.

Text stays off the marks: legends sit outside the plot area (`legend_outside`), value labels just clear
of their bars, and the hover tool works without a toolbar button (its "active" tick beside every
toolbar read as a stray blue mark). Colours follow the session's theme (`session_colours`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import panel as pn
from bokeh.models import HoverTool
from bokeh.plotting import figure
from panel.viewable import Viewable

from blocktrace.explorables.components.focus import focus_ring
from blocktrace.explorables.components.palette import ChartColours, chart_colours
from blocktrace.explorables.components.updates import batched

__all__ = ["DrawnAfterLoad", "add_hover", "base_figure", "house_style", "legend_outside", "session_colours"]

TITLE_SIZE = "13px"
LEGEND_SIZE = "12px"
# The page's controls read at 1rem (page_layout.READABLE_CONTROLS, inherited); a figure keeps Bokeh's own
# 12px base, which the dark theme's em-sized axis text is relative to.
FIGURE_TEXT = ":host { --bokeh-font-size: 12px; }"


def session_colours() -> ChartColours:
    """The chart colours of this session's theme (?theme=dark)."""
    from blocktrace.explorables.components.style import dark

    return chart_colours(dark())


def house_style(fig: figure) -> figure:
    """Title size, no logo, no outline, the focus ring: for every figure, whoever built it."""
    fig.title.text_font_size = TITLE_SIZE
    fig.toolbar.logo = None
    fig.outline_line_color = None
    fig.stylesheets = [*fig.stylesheets, FIGURE_TEXT]
    return focus_ring(fig)


def base_figure(title: str, height: int = 260, **kw) -> figure:
    fig = figure(title=title, height=height, sizing_mode="stretch_width", toolbar_location="right",
                 tools="save,reset", **kw)
    return house_style(fig)


def add_hover(fig: figure, tooltips: list[tuple[str, str]], **kw) -> HoverTool:
    """Tooltips on hover, always on, with no toolbar button."""
    tool = HoverTool(tooltips=tooltips, visible=False, **kw)
    fig.add_tools(tool)
    return tool


def legend_outside(fig: figure, place: str = "above", ncols: int | None = None) -> None:
    """Move the figure's legend out of the plot area, as rows of `ncols` items, so it covers no mark.

    `ncols` is chosen per figure so that a row fits a phone's plot (about 270 px wide).
    """
    legend = fig.legend[0]
    fig.center = [r for r in fig.center if r is not legend]
    legend.orientation = "horizontal"
    if ncols is not None:
        legend.ncols = ncols
    legend.location = "top_left"
    legend.label_text_font_size = LEGEND_SIZE
    legend.background_fill_alpha = 0
    legend.border_line_alpha = 0
    legend.margin = 0
    legend.padding = 4
    legend.spacing = 10  # between items (and rows): a row of names must not read as one
    legend.click_policy = "none"
    fig.add_layout(legend, place)


class DrawnAfterLoad:
    """Places for a page's figures, each kept at its height; the figures are built and sent once the page is up.

    A figure is some forty Bokeh models: building them, sending them, and laying out and painting the
    canvas in the browser all come before anything on the page can be used. Here the first page carries
    places saying "Drawing the plot…" instead (class PENDING until filled), and the figures follow once
    the browser reports the page drawn (Panel's onload), each figure a message of its own. In a served
    session each figure is one build step of the server's queue (explorables/components/build_turns.py), so other
    students' changes are answered between them. Outside a served page (no session, e.g. in tests) each
    figure is placed at once. Panel's loading spinner is not used: it is an image from this server, which a
    page embedding us by script tag may not load (cross-origin).

    What belongs to a figure (its text alternative, a heading above it) comes in the figure's message
    (`before`, `after`), and what the page shows below its results (`later`) in one step before the
    figures: the first page carries only what is used first. Each HTML pane, widget or layout is models
    to build on the server and views to build in the browser before the page can be used.
    """

    PENDING = "bt-figure-pending"
    WAITING_CSS = (f":host(.{PENDING})::before {{ content: 'Drawing the plot…'; margin: auto; font-size: 0.9rem; "
                   "color: var(--panel-on-background-color, #212529); opacity: 0.75; }")

    def __init__(self) -> None:
        self._waiting: list[tuple[pn.Column, Callable[[], list]]] = []  # figures, each a step of its own
        self._later: list[tuple[pn.Column, Callable[[], list]]] = []  # content, all in one step before them

    def place(self, make: Callable[[], figure], height: int, before: Sequence[Viewable] = (),
              after: Sequence[Viewable] = ()) -> pn.Column:
        """A place `height` px tall that `make()`'s figure fills once the page is up, between `before` and
        `after` (panes that belong to the figure, sent with it)."""
        slot = pn.Column(sizing_mode="stretch_width", min_height=height, css_classes=[self.PENDING],
                         stylesheets=[self.WAITING_CSS])

        def content() -> list:
            return [*before, pn.pane.Bokeh(make(), sizing_mode="stretch_width"), *after]

        self._wait(self._waiting, slot, content)
        return slot

    def later(self, make: Callable[[], list], **params) -> pn.Column:
        """A place (a Column with `params`) that `make()`'s panes fill once the page is up, before any figure;
        no waiting text: this is for what the page shows below its first screen."""
        slot = pn.Column(**{"sizing_mode": "stretch_width", "margin": 0, **params}, css_classes=[self.PENDING])
        self._wait(self._later, slot, make)
        return slot

    def _wait(self, queue: list, slot: pn.Column, make: Callable[[], list]) -> None:
        queue.append((slot, make))
        if len(self._waiting) + len(self._later) == 1:  # one onload callback fills every place asked for
            pn.state.onload(self._draw)

    def _draw(self) -> None:
        from blocktrace.explorables.components.build_turns import in_turn

        later, self._later = self._later, []
        waiting, self._waiting = self._waiting, []
        if later:
            in_turn(functools.partial(self._fill, later))
        for place in waiting:
            in_turn(functools.partial(self._fill, [place]))

    @staticmethod
    @batched
    def _fill(places: list[tuple[pn.Column, Callable[[], list]]]) -> None:
        for slot, make in places:
            slot.objects = make()
            slot.css_classes = []
