"""What a page sends after load (components/figures.py DrawnAfterLoad): the first page carries places only."""

from __future__ import annotations

import panel as pn
from bokeh.plotting import figure

from blocktrace.explorables.components import build_turns
from blocktrace.explorables.components.figures import DrawnAfterLoad


def loaded_later(monkeypatch) -> tuple[list, list]:
    """Capture the page's onload callbacks and the build steps they queue, instead of running them."""
    onload, steps = [], []
    monkeypatch.setattr(pn.state, "onload", lambda callback, threaded=False: onload.append(callback))
    monkeypatch.setattr(build_turns, "in_turn", steps.append)
    return onload, steps


def test_places_are_empty_until_load_then_content_comes_first_and_each_figure_with_its_text(monkeypatch):
    """Before load every place is empty; the first step fills every `later` place, then one step per figure
    brings it between its `before` and `after` panes."""
    onload, steps = loaded_later(monkeypatch)
    drawn = DrawnAfterLoad()
    heading, alt, table, card = (pn.pane.HTML(text) for text in ("heading", "alt", "table", "card"))
    plot = drawn.place(figure, 200, before=[heading], after=[alt])
    below = drawn.later(lambda: [table])
    share = drawn.later(lambda: [card], styles={"flex": "1 1 100%"})
    assert len(onload) == 1 and steps == []
    assert all(len(place) == 0 and DrawnAfterLoad.PENDING in place.css_classes for place in (plot, below, share))
    assert share.styles == {"flex": "1 1 100%"}

    onload[0]()
    assert len(steps) == 2
    steps[0]()
    assert below.objects == [table] and share.objects == [card] and len(plot) == 0
    assert below.css_classes == [] and share.css_classes == []
    steps[1]()
    assert plot.objects[0] is heading and plot.objects[2] is alt
    assert isinstance(plot.objects[1], pn.pane.Bokeh) and plot.css_classes == []
