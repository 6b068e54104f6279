"""Driving a page with the keyboard alone, and checking that every focus stop shows where focus is.

Panel and Bokeh draw each widget inside shadow roots, so `document.activeElement` is only the outermost
host; the element that really has focus is found by following `shadowRoot.activeElement` down.

A stop shows focus when the element, or an ancestor up to its widget's shadow host, looks different
focused than unfocused in a way that stands out (WCAG 2.2, 1.4.11 non-text contrast, ≥ 3:1):

- an outline that is not there unfocused (the browser's own `auto` ring included) whose colour has
  ≥ 3:1 against what is beside it: the background behind the element, or the element's own fill for
  an inset outline (negative outline-offset);
- a box-shadow layer that is not there unfocused, whose colour has ≥ 3:1 against that background;
- a border side whose colour changes by ≥ 3:1 (or which appears, with ≥ 3:1 against the background).

The unfocused look is read by blurring the element and focusing it again (with `focusVisible`, so the
page looks exactly as it did after the key press).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from playwright.sync_api import Locator, Page, expect

MIN_CONTRAST = 3.0  # WCAG 2.2 SC 1.4.11: user-interface components and their states

# The deep active element: document.activeElement, then each shadow root's activeElement in turn.
DEEP_ACTIVE = """() => {
  let el = document.activeElement;
  while (el && el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;
  return el;
}"""

# One call per key press: describe the focused element, judge its focus indicator, and say whether it
# is the target (`mode` "same": that very element; "group": a radio button of the target's group).
STOP_JS = r"""(target, [mode, minContrast]) => {
  const deepActive = __DEEP_ACTIVE__;
  const el = deepActive();
  if (!el || el === document.body || el === document.documentElement) return {interactive: false};

  const parseColor = (text) => {
    const m = /rgba?\(([^)]+)\)/.exec(text || "");
    if (!m) return null;
    const p = m[1].split(/[ ,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, under) => ({
    r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
    b: top.b * top.a + under.b * (1 - top.a), a: 1});
  const lum = (c) => {
    const ch = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * ch(c.r) + 0.7152 * ch(c.g) + 0.0722 * ch(c.b);
  };
  const contrast = (a, b) => {
    const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const rgb = (c) => `rgb(${Math.round(c.r)}, ${Math.round(c.g)}, ${Math.round(c.b)})`;
  const parentOf = (node) => node.parentElement || (node.getRootNode() instanceof ShadowRoot
    ? node.getRootNode().host : null);
  // The opaque colour painted behind `node` (from its parent outwards), or its own fill if `self`.
  const backdrop = (node, self) => {
    const layers = [];
    for (let n = self ? node : parentOf(node); n; n = parentOf(n)) {
      const c = parseColor(getComputedStyle(n).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    return layers.reverse().reduce((under, top) => over(top, under), {r: 255, g: 255, b: 255, a: 1});
  };
  const look = (n) => {
    const s = getComputedStyle(n);
    const sides = ["Top", "Right", "Bottom", "Left"].map((side) => ({
      color: s[`border${side}Color`], width: parseFloat(s[`border${side}Width`]) || 0,
      style: s[`border${side}Style`]}));
    return {outlineStyle: s.outlineStyle, outlineWidth: parseFloat(s.outlineWidth) || 0,
            outlineColor: s.outlineColor, outlineOffset: parseFloat(s.outlineOffset) || 0,
            shadow: s.boxShadow, sides};
  };
  const layersOf = (shadow) => (!shadow || shadow === "none") ? [] : shadow.split(/,(?![^(]*\))/).map((x) => x.trim());

  // The element, then its ancestors up to (and including) the host of its shadow root.
  const chain = [el];
  for (let n = el.parentElement; n; n = n.parentElement) chain.push(n);
  if (el.getRootNode() instanceof ShadowRoot) chain.push(el.getRootNode().host);
  const focused = chain.map(look);
  el.blur();
  const unfocused = chain.map(look);
  el.focus({focusVisible: true});
  const refocused = deepActive() === el;

  const candidates = [];  // {ok, text}
  chain.forEach((node, i) => {
    const f = focused[i], u = unfocused[i];
    const where = i === 0 ? "" : ` on ${node.tagName.toLowerCase()}.${[...node.classList].join(".")}`;
    const changedOutline = f.outlineStyle !== "none" && f.outlineWidth > 0 &&
      (u.outlineStyle === "none" || u.outlineWidth === 0 || u.outlineColor !== f.outlineColor ||
       u.outlineStyle !== f.outlineStyle || u.outlineWidth !== f.outlineWidth);
    if (changedOutline) {
      // `auto` is the browser's own ring, drawn in the outline colour (currentColor unless set), so it is
      // judged like any other outline: a white ring around a white-text button vanishes on a white page.
      const col = parseColor(f.outlineColor);
      const bg = backdrop(node, f.outlineOffset < 0);
      const ratio = col ? contrast(over(col, bg), bg) : 0;
      candidates.push({ok: ratio >= minContrast, text: `outline ${f.outlineWidth}px ${f.outlineStyle} `
                       + `${f.outlineColor}${where}: ${ratio.toFixed(2)}:1 against ${rgb(bg)}`});
    }
    const before = new Set(layersOf(u.shadow));
    for (const layer of layersOf(f.shadow)) {
      if (before.has(layer)) continue;
      const col = parseColor(layer);
      const inset = /\binset\b/.test(layer);
      const bg = backdrop(node, inset);
      const ratio = col ? contrast(over(col, bg), bg) : 0;
      candidates.push({ok: ratio >= minContrast,
                       text: `box-shadow ${layer}${where}: ${ratio.toFixed(2)}:1 against ${rgb(bg)}`});
    }
    f.sides.forEach((side, k) => {
      const old = u.sides[k];
      if (side.width === 0 || side.style === "none") return;
      if (side.color === old.color && side.width === old.width) return;
      const bg = backdrop(node, false);
      const col = parseColor(side.color);
      if (!col) return;
      const now = over(col, bg);
      const oldCol = old.width > 0 && old.style !== "none" ? parseColor(old.color) : null;
      const was = oldCol ? over(oldCol, bg) : bg;
      const ratio = contrast(now, was);
      candidates.push({ok: ratio >= minContrast,
                       text: `border ${side.color} (was ${old.color})${where}: ${ratio.toFixed(2)}:1 change`});
    });
  });

  // A short, readable name for messages: role, accessible-ish name, element and widget host.
  const root = el.getRootNode();
  const host = root instanceof ShadowRoot ? root.host : null;
  let label = el.getAttribute("aria-label") || "";
  if (!label && el.labels && el.labels.length) label = el.labels[0].textContent;
  if (!label && el.closest("label")) label = el.closest("label").textContent;
  const field = el.matches("input, select, textarea");
  if (!label && host && field && root.querySelector("label")) label = root.querySelector("label").textContent;
  if (!label && !field) label = el.textContent;
  label = (label || "").replace(/\s+/g, " ").trim().slice(0, 60);
  const kind = el.getAttribute("role") || (el.tagName === "INPUT" ? `input[${el.type}]` : el.tagName.toLowerCase());
  const tag = el.tagName.toLowerCase() + [...el.classList].map((c) => "." + c).join("");
  const hostTag = host ? host.tagName.toLowerCase() + [...host.classList].map((c) => "." + c).join("") : "document";

  let matched = false;
  if (target) {
    if (mode === "group") matched = el.type === "radio" && target.type === "radio" && el.name === target.name
                                    && el.getRootNode() === target.getRootNode();
    else matched = el === target;
  }
  const good = candidates.filter((c) => c.ok);
  const indicator = good.length ? good[0].text
    : candidates.length ? [...new Set(candidates.map((c) => c.text))].join("; ") : "nothing changes when focused";
  return {interactive: true, kind, label, element: tag, host: hostTag, matched, refocused,
          visible: good.length > 0, indicator};
}""".replace("__DEEP_ACTIVE__", DEEP_ACTIVE)


@dataclass
class Stop:
    """One place Tab (or Shift+Tab) landed, and whether it showed focus."""

    kind: str
    label: str
    element: str
    host: str
    visible: bool
    indicator: str

    def __str__(self) -> str:
        return f'{self.kind} "{self.label}" <{self.element}> in <{self.host}>: {self.indicator}'


@dataclass
class Keyboard:
    """The keyboard of one page: moves focus, acts on it, and keeps what it saw.

    `stops` records every place focus landed; `failed` the flow steps (see `step`) that did not work.
    """

    page: Page
    stops: list[Stop] = field(default_factory=list, repr=False)
    failed: list[str] = field(default_factory=list, repr=False)

    # --- moving focus -------------------------------------------------------------------------

    def tab_to(self, target: Locator, *, back: bool = False, group: bool = False, limit: int = 40) -> Stop:
        """Press Tab (Shift+Tab if `back`) until `target` has focus; at most `limit` presses.

        group=True: stop at any radio button of `target`'s group (Tab enters a group at its checked one).
        Every stop on the way is recorded and judged for a visible focus indicator.
        """
        key = "Shift+Tab" if back else "Tab"
        passed: list[Stop] = []
        for _ in range(limit):
            self.page.keyboard.press(key)
            info = target.evaluate(STOP_JS, ["group" if group else "same", MIN_CONTRAST])
            if not info["interactive"]:
                continue
            assert info["refocused"], f"focus could not be put back on <{info['element']}> after reading its look"
            stop = Stop(info["kind"], info["label"], info["element"], info["host"], info["visible"], info["indicator"])
            self.stops.append(stop)
            passed.append(stop)
            if info["matched"]:
                return stop
        lines = "\n".join(f"    {n + 1:2d}. {s}" for n, s in enumerate(passed))
        raise AssertionError(f"{key} ×{limit} never reached {target}; focus went to:\n{lines}")

    # --- acting on the focused element --------------------------------------------------------

    def press(self, key: str, times: int = 1) -> None:
        for _ in range(times):
            self.page.keyboard.press(key)

    def replace_text(self, text: str) -> None:
        """Select what the focused field holds, type `text` over it and press Enter."""
        self.page.keyboard.press("Control+A")
        self.page.keyboard.type(text)
        self.page.keyboard.press("Enter")

    def choose(self, radio: Locator, limit: int = 8) -> None:
        """With focus in a radio group, press ArrowDown until `radio` is the checked one."""
        for _ in range(limit):
            if radio.is_checked():
                break
            self.page.keyboard.press("ArrowDown")
        expect(radio).to_be_checked()

    # --- the outcome ----------------------------------------------------------------------------

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        """One step of a flow whose failure is noted and reported by `finish`, so later steps still run."""
        try:
            yield
        except AssertionError as err:
            self.failed.append(f"{what}: {str(err).strip().splitlines()[0]}")

    def invisible(self) -> list[Stop]:
        """Stops without a visible focus indicator, once per distinct element."""
        seen, out = set(), []
        for stop in self.stops:
            key = (stop.kind, stop.label, stop.element, stop.host)
            if not stop.visible and key not in seen:
                seen.add(key)
                out.append(stop)
        return out

    def finish(self) -> None:
        """Fail with every step that did not work and every stop that did not show focus."""
        parts = []
        if self.failed:
            parts.append(f"{len(self.failed)} step(s) did not work:\n" + "\n".join(f"  - {f}" for f in self.failed))
        bad = self.invisible()
        if bad:
            parts.append(f"{len(bad)} of the {len(self.stops)} focus stops show no visible focus indicator "
                         f"(≥ {MIN_CONTRAST:g}:1 against what is beside it):\n" + "\n".join(f"  - {s}" for s in bad))
        assert not parts, "\n".join(parts)
