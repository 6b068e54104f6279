"""Accessible names for two Bokeh widgets that render without them.

Bokeh 3.9 draws a Checkbox as an <input> beside an unassociated text <div>, and a slider's handle
(role="slider") and a number input's spin buttons without a name. Screen readers then announce
"checkbox" or "slider" and nothing else. This script, run in the page, names each from the text
Bokeh shows next to it, and keeps doing so as widgets are re-rendered inside their shadow roots.
"""

from __future__ import annotations

from bokeh.models import CustomJS

__all__ = ["name_widgets_script"]

NAME_WIDGETS_JS = r"""
const seen = new WeakSet();
function name(root) {
  for (const box of root.querySelectorAll('input[type="checkbox"]:not([aria-label])')) {
    const text = box.nextElementSibling ? box.nextElementSibling.textContent.trim() : "";
    if (text) box.setAttribute("aria-label", text);
  }
  const title = root.querySelector(".bk-slider-title");
  if (title && title.firstChild) {
    const text = title.firstChild.textContent.replace(/:\s*$/, "").trim();
    for (const handle of root.querySelectorAll(".noUi-handle:not([aria-label])")) {
      handle.setAttribute("aria-label", text);
    }
  }
}
function nameSpinners(root) {
  for (const [cls, text] of [[".bk-spin-btn-up", "Increase"], [".bk-spin-btn-down", "Decrease"]]) {
    for (const button of root.querySelectorAll(cls + ":not([aria-label])")) button.setAttribute("aria-label", text);
  }
}
function visit(root) {
  if (!seen.has(root)) {
    seen.add(root);
    new MutationObserver(() => visit(root)).observe(root, {childList: true, subtree: true});
  }
  name(root);
  nameSpinners(root);
  for (const el of root.querySelectorAll("*")) if (el.shadowRoot) visit(el.shadowRoot);
}
visit(document);
"""


def name_widgets_script() -> CustomJS:
    return CustomJS(code=NAME_WIDGETS_JS)
