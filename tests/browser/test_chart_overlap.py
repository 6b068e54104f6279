"""The explorables' charts as a student sees them: no text on marks, nothing cut off, labels readable.

One page load per explorable and theme; the viewport is resized from 1440 px to 390 px on the same page,
and the figures are read through BokehJS (tests/browser/chart_marks.py) once each has been laid out and
painted at the new width.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.chart_marks import MARKS_JS, SETTLED_JS, faint, overlaps

pytestmark = pytest.mark.browser

WIDTHS = (1440, 390)
# route -> how many figures its default state shows (the decoder lab: one head, norms, activations,
# causal test, two depth charts; the block floor: both orders' plane and heatmap; the race: loss, accuracy, depth
# and both models' attention maps)
PAGES = {
    "/explorables/transformer-block-trace": 3,
    "/explorables/block-floor": 4,
    "/explorables/decoder-block-lab": 6,
    "/explorables/train-the-block": 5,
}


def race_a_little(page: Page) -> None:
    """The race's figures are empty until it runs: play it until both curves and the depth plot have data."""
    page.get_by_role("button", name="Play").click()
    expect(page.get_by_text(re.compile(r"^A: .*held-out accuracy"))).to_be_visible(timeout=60_000)
    page.get_by_role("button", name="Pause").click()  # the same button, saying what a press does now
    expect(page.get_by_role("status").filter(has_text="Paused.")).to_be_visible()


PREPARE = {"/explorables/train-the-block": race_a_little}  # routes whose figures need a step before they show data


def settled(page: Page, count: int) -> None:
    """Wait (Playwright polls) until every shown figure is laid out at the viewport's width and painted."""
    page.wait_for_function(SETTLED_JS, arg=count)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("route", list(PAGES))
def test_chart_text_stays_off_the_marks(open_page, route: str, theme: str) -> None:
    """At 1440 and 390 px, legends and value labels keep 2 px clear of every bar, line, dot, reference line,
    arrow or cell they do not label and inside the frame, titles and axis labels are not cut off, and no
    toolbar shows an 'active' tick; in the dark theme value labels reach 4.5:1 against what is behind them
    (their cell, else the plot) and dots 3:1 against the plot."""
    opened = open_page(f"{route}?theme={theme}", teacher_link=True)
    page = opened.page
    expect(page.locator(".bt-figure-pending")).to_have_count(0)
    if route in PREPARE:
        PREPARE[route](page)
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        settled(page, PAGES[route])
        figures = page.evaluate(MARKS_JS)
        assert len(figures) == PAGES[route]
        for fig in figures:
            found = overlaps(fig) + (faint(fig) if theme == "dark" else [])
            problems += [f"{width} px: {p}" for p in dict.fromkeys(str(p) for p in found)]  # each once
    assert problems == [], "\n".join(problems)
    opened.assert_clean()
