"""A keyboard focus ring that shows on every widget and plot, in the light theme and the dark one.

Bokeh 3.9's own focus styles are too faint to find (WCAG 1.4.11 asks for 3:1 against what is beside
the indicator): buttons get a 1px dotted #BBBBBD outline (1.7:1 on a default button, 2.7:1 on a
primary one), text inputs, selects and textareas only a border change to #65A2CB with a soft halo
(1.4:1), the plot canvas and its toolbar buttons a 1px dotted #65A2CB outline (2.8:1). The ring here
is 3px in Panel's text colour for the theme: #212529 on white (15:1), #ffffff on the dark theme.
Each piece of CSS must sit inside the shadow root that holds the element it styles.
"""

from __future__ import annotations

from typing import Any

__all__ = ["focus_design", "focus_ring"]

RING = "3px solid var(--panel-on-background-color, #212529)"

# In every Panel component's shadow root (see FocusDesign): Bokeh buttons (Button, FileDownload) and
# inputs (TextInput, TextAreaInput, Select, FloatInput). Outside the element, so it also shows on a
# primary (blue) button.
WIDGET_FOCUS_CSS = f".bk-btn:focus-visible, .bk-input:focus-visible {{ outline: {RING}; outline-offset: 2px; }}"

# In a figure's shadow root: the canvas's own :host sets Bokeh's outline variables (1px dotted
# #65A2CB); a rule from the tree that holds the canvas element wins over its :host rule.
FIGURE_FOCUS_CSS = (".bk-Canvas { --outline-width: 3px; --outline-style: solid; "
                    "--highlight-color: var(--panel-on-background-color, #212529); }")

# In a figure's toolbar's shadow root: the tool buttons (save, reset, hover…), inset so the toolbar
# does not clip the ring.
TOOLBAR_FOCUS_CSS = (".bk-ClickButton:focus-visible, .bk-OnOffButton:focus-visible, "
                     f".bk-tool-overflow:focus-visible {{ outline: {RING}; outline-offset: -3px; }}")


def focus_ring(fig: Any) -> Any:
    """Give a Bokeh figure's canvas and toolbar buttons the focus ring; returns the figure."""
    fig.stylesheets = [*fig.stylesheets, FIGURE_FOCUS_CSS]
    fig.toolbar.stylesheets = [*fig.toolbar.stylesheets, TOOLBAR_FOCUS_CSS]
    return fig


def focus_design() -> type:
    """Panel's default design (Native) with WIDGET_FOCUS_CSS in every component's shadow root.

    Set `pn.config.design = focus_design()` before any widget is built (the design is read when a
    component is created).
    """
    from panel.theme import Inherit, Native
    from panel.viewable import Viewable

    class FocusDesign(Native):
        modifiers = {Viewable: {"stylesheets": [Inherit, WIDGET_FOCUS_CSS]}}

    return FocusDesign
