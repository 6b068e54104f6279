"""Layout rules every explorable page shares: readable control text, and controls that stay beside results.

Both are stylesheets for a Panel layout's own shadow root (`:host` is the layout itself), so they need no
global CSS and work embedded too. Custom properties inherit into nested shadow roots, so one rule on a
page's outer column reaches every Bokeh widget inside it.
"""

from __future__ import annotations

import panel as pn

__all__ = ["READABLE_CONTROLS", "STICKY_SIDE", "TIGHT_LINES", "beside", "readable"]

# Bokeh draws widget text at --bokeh-font-size (12px by default) in Helvetica beside our 16px prose: labels,
# inputs, buttons and radio answers get the prose's size and font (static/css/blocktrace.css) instead.
READABLE_CONTROLS = (':host { --bokeh-font-size: 1rem; --bokeh-base-font: system-ui, -apple-system, "Segoe UI", '
                     '"DejaVu Sans", Roboto, sans-serif; }')

# Wide enough for the controls column beside the results (22rem + 36rem + the gap, with the page's margins):
# there the controls stay in view while the results scroll past them; a column taller than the window
# scrolls on its own. Narrower, the columns stack and nothing sticks.
BESIDE_MIN_WIDTH = "64rem"
STICKY_SIDE = (f"@media (min-width: {BESIDE_MIN_WIDTH}) {{ :host {{ position: sticky; top: 0.5rem; "
               "align-self: flex-start; max-height: calc(100vh - 1rem); overflow-y: auto; "
               "overscroll-behavior: contain; } }")

# A text field, select or number input takes the browser's control font (13.3px), not the page's: inside the
# widget's own shadow root it inherits the size READABLE_CONTROLS gives the widget instead.
READABLE_INPUT = ".bk-input { font: inherit; }"


# Embedded, a one-line summary above the results keeps a line's margins, not a paragraph's: a course column's
# first screen has room for the controls, the diagram and the first table only without the spare space.
TIGHT_LINES = "p { margin: 0.25rem 0; }"


def readable(widgets) -> None:
    """Give these widgets' text fields and selects the page's text size (see READABLE_INPUT)."""
    for widget in widgets:
        if READABLE_INPUT not in widget.stylesheets:
            widget.stylesheets = [*widget.stylesheets, READABLE_INPUT]


def beside(main: pn.viewable.Viewable, aside: list) -> pn.Row:
    """`aside` to the right of `main` when there is room (kept in view while `main` scrolls past), below it
    when there is not. A wrapping Row, not a FlexBox: Bokeh lays out the figures a Row holds as it resizes."""
    # Side by side only where `main` keeps 48rem (the decoder lab's widest table): narrower, it would scroll.
    return pn.Row(pn.Column(main, margin=0, styles={"flex": "1 1 48rem", "min-width": "0"}),
                  pn.Column(*aside, margin=0, styles={"flex": "0 1 22rem", "min-width": "0"},
                            stylesheets=[STICKY_SIDE]),
                  styles={"flex-wrap": "wrap", "gap": "0 1.25rem", "align-items": "flex-start"},
                  sizing_mode="stretch_width")
