"""The browser writes numbers as the server does: draw.js's number() against numbers.number()."""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import Browser

from blocktrace.explorables.components.drawn_view import drawing_script
from blocktrace.explorables.components.numbers import number

pytestmark = pytest.mark.browser

# Ties on the exact binary value (0.0625, 0.1875), values that round to zero, e-notation, the infinities.
VALUES = [0.0, -0.0, 1.5, -0.5, 0.0625, -0.0625, 0.1875, 0.0005, -0.0004, 1e-17, -1e-17, 2.0 / 3.0, 1234.5675,
          9999.9996, 12345.678, -123456789.0, 1e300, math.inf, -math.inf, math.nan, 0.125, 2.675]


@pytest.mark.parametrize("digits,signed", [(3, False), (3, True), (2, True), (1, False)])
def test_the_browser_writes_each_number_as_the_server_does(browser: Browser, digits: int, signed: bool) -> None:
    """btDraw.number (drawn_view/draw.js) gives numbers.number()'s text for every kind of value."""
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(content=drawing_script("block_trace.js"))
    shown = page.evaluate("([vs, d, s]) => vs.map(v => btDraw.number(v === null ? NaN : v, d, s))",
                          [[None if math.isnan(v) else v for v in VALUES], digits, signed])
    page.close()
    assert shown == [number(v, digits, signed=signed) for v in VALUES]
