"""The house style of a Bokeh figure: full width, a small title, save and reset only, no logo."""

from __future__ import annotations

from bokeh.plotting import figure

from .focus import focus_ring


def base_figure(title: str, height: int = 260, **kw) -> figure:
    fig = figure(title=title, height=height, sizing_mode="stretch_width", toolbar_location="right",
                 tools="save,reset", **kw)
    fig.title.text_font_size = "13px"
    fig.toolbar.logo = None
    fig.outline_line_color = None
    return focus_ring(fig)
