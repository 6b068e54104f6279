"""Accessible names for two Bokeh widgets that render without them, and checkbox labels that can be clicked.

Bokeh 3.9 and 3.10 draw a Checkbox as an <input> beside an unassociated text <div>, and a slider's handle
(role="slider") and a number input's spin buttons without a name. Screen readers then announce
"checkbox" or "slider" and nothing else, and a click on a checkbox's words does nothing (only the 13 px box
toggles), which a <label> would have done. This script, run in the page, names each from the text Bokeh shows
next to it, makes a checkbox's words toggle it as a label's would, and keeps doing so as widgets are re-rendered
inside their shadow roots.
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
  for (const box of root.querySelectorAll('input[type="checkbox"]')) {
    const words = box.nextElementSibling;
    if (!words || box.closest("label") || words.dataset.btToggles) continue;  // a <label> toggles on its own
    words.dataset.btToggles = "1";  // one listener per element, whatever re-renders around it
    words.style.cursor = "pointer";
    words.addEventListener("click", () => {
      const current = words.previousElementSibling;  // the box rendered beside these words now
      if (current && current.type === "checkbox" && !current.disabled) current.click();
    });
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
