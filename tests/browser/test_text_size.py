"""Text a student reads is at a readable size on every explorable and lesson page.

Read from the page as Chromium lays it out, through every shadow root: charts keep Bokeh's own text (their
legends and ticks, tested in test_chart_overlap.py) and the floor diagram draws its cards in SVG, so both
are left out here.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PAGES = ("/explorables/transformer-block-trace", "/explorables/block-floor", "/explorables/decoder-block-lab",
         "/explorables/train-the-block", "/lessons/transformer-block", "/lessons/block-floor", "/lessons/decoder-block",
         "/lessons/train-the-block")
SMALLEST_PX = 12.8  # 0.8rem: the least any text may be (a table's note, a diagram's caption)
CONTROL_PX = 16.0  # labels, buttons, fields and their typed text: the prose's size

# [font size, tag, text] of every visible text, and [font size, tag, what] of every control, outside charts
# and SVG drawings.
SIZES_JS = r"""() => {
  const texts = [], controls = [];
  const visible = (el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const walk = (root) => {
    for (const el of root.querySelectorAll("*")) {
      if (el.closest("svg") || String(el.className).includes("bk-Figure")) continue;
      if (el.shadowRoot) walk(el.shadowRoot);
      if (!visible(el) || getComputedStyle(el).visibility === "hidden") continue;
      const size = parseFloat(getComputedStyle(el).fontSize);
      if (["INPUT", "SELECT", "TEXTAREA"].includes(el.tagName) && el.type !== "checkbox" && el.type !== "radio")
        controls.push([size, el.tagName, el.getAttribute("placeholder") || el.value || el.type]);
      for (const node of el.childNodes) {
        const text = node.nodeType === 3 ? node.textContent.trim() : "";
        if (!text || el.classList.contains("bt-sr-only")) continue;
        texts.push([size, el.tagName, text.slice(0, 50)]);
        if (["LABEL", "BUTTON", "OPTION"].includes(el.tagName)) controls.push([size, el.tagName, text.slice(0, 50)]);
      }
    }
  };
  walk(document);
  return {texts, controls};
}"""


@pytest.mark.parametrize("path", PAGES)
def test_text_and_controls_read_at_the_prose_size(open_page, path: str) -> None:
    """No text under 0.8rem, and every control's label, button text and field at the prose's 1rem
    (Bokeh's widgets alone draw theirs at 12 px)."""
    opened = open_page(path, teacher_link=True)
    page = opened.page
    expect(page.locator(".bt-card >> visible=true").first).to_be_visible()
    expect(page.get_by_role("button").first).to_be_visible()
    sizes = page.evaluate(SIZES_JS)
    assert len(sizes["controls"]) >= 3 and len(sizes["texts"]) >= 20, sizes
    small = [t for t in sizes["texts"] if t[0] < SMALLEST_PX - 0.05]
    assert small == [], small
    small_controls = [c for c in sizes["controls"] if c[0] < CONTROL_PX - 0.05]
    assert small_controls == [], small_controls
    opened.assert_clean()
