// The floor diagram's painter: the "render" script of explorables/components/floor_diagram.py.
// It draws the layout the server computed (explorables/components/floor_layout.py) as SVG, once per
// structure, and then only changes text, classes and attributes when the values or the selection change.
// Every piece of text is set with textContent: nothing the server sends is parsed as markup.
// Runs inside Panel's ReactiveHTML view with: data (the synced parameters), state (this view's own),
// and the template's elements fdroot, fdcaption, fdcanvas, fddetail.
const NS = "http://www.w3.org/2000/svg";
const WIDE_FITS = 0.86;  // the wide layout is drawn when at least this share of its width fits
const TALL_MAX_SCALE = 1.15;

function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const name in attrs) {
    if (attrs[name] !== undefined && attrs[name] !== null) e.setAttribute(name, String(attrs[name]));
  }
  if (parent) parent.appendChild(e);
  return e;
}

function shape(s, parent) {
  if (s.tag === "text") {
    const t = el("text", {x: s.x, y: s.y, "class": s["class"], "text-anchor": s.anchor}, parent);
    if (s.rotate) t.setAttribute("transform", "rotate(" + s.rotate + " " + s.x + " " + s.y + ")");
    t.textContent = s.text;
    return t;
  }
  if (s.tag === "rect") return el("rect", {x: s.x, y: s.y, width: s.w, height: s.h, rx: s.rx, "class": s["class"]}, parent);
  if (s.tag === "circle") return el("circle", {cx: s.cx, cy: s.cy, r: s.r, "class": s["class"]}, parent);
  return el("path", {d: s.d, "class": s["class"]}, parent);
}

function marker(m, g) {
  if (m.type === "square") {
    el("rect", {x: m.cx - m.r, y: m.cy - m.r, width: 2 * m.r, height: 2 * m.r, rx: 2, "class": "fd-marker fd-square"}, g);
    return;
  }
  el("circle", {cx: m.cx, cy: m.cy, r: m.r, "class": "fd-marker fd-" + m.type}, g);
  if (m.type === "plus") {
    const d = "M" + (m.cx - 5) + "," + m.cy + " H" + (m.cx + 5) + " M" + m.cx + "," + (m.cy - 5) + " V" + (m.cy + 5);
    el("path", {d: d, "class": "fd-plus-sign"}, g);
  }
}

function room() {
  // The width the drawing may take: the component's own box (the frame inside it hugs the drawing), less
  // the frame's padding and border.
  const host = view.el || fdroot.parentElement || fdroot;
  const style = getComputedStyle(fdroot);
  const inside = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight) + parseFloat(style.borderLeftWidth)
    + parseFloat(style.borderRightWidth);
  return (host.clientWidth || host.getBoundingClientRect().width || 0) - (inside || 0);
}

function texts() {
  // The cards' values and names, parsed once per change of them (the "texts" script clears them).
  if (!state.texts) state.texts = data.texts ? JSON.parse(data.texts) : {};
  return state.texts;
}

function parsed() {
  // Both layouts, parsed once per change of the structure (the "layouts" script clears them).
  if (!state.layouts) state.layouts = data.layouts ? JSON.parse(data.layouts) : {};
  return state.layouts;
}

state.pick = () => {
  const wide = parsed().wide;
  if (!wide) return null;
  return room() >= wide.width * WIDE_FITS ? "wide" : "tall";
};

state.say = (key) => {
  // The visible line under the diagram, its tooltip: the stage hovered or focused, else the selected one.
  // (No SVG <title>: it would repeat each button's name to screen readers, and be found by text searches.)
  const names = texts().names || {};
  const shownKey = key || data.selected;
  fddetail.textContent = shownKey && names[shownKey] ? names[shownKey] : "";
};

state.choose = (key) => {
  if (data.locked || !state.nodes || !state.nodes.has(key)) {
    state.say(key);
    return;
  }
  if (data.selected !== key) {
    data.selected = key;  // synced to the server, which sets the explorable's state
  }
  state.mark();
};

function node(n, svg) {
  const [x, y, w, h] = n.box;
  const g = el("g", {"class": "fd-node k-" + n.kind.split(" ").join(" k-"), tabindex: -1, role: "button",
                     "data-key": n.key, "aria-pressed": "false"}, svg);
  el("rect", {x: x - 3.5, y: y - 3.5, width: w + 7, height: h + 7, rx: n.kind === "part" ? 7 : 9,
              "class": "fd-ring"}, g);
  el("rect", {x: x, y: y, width: w, height: h, rx: n.kind === "part" ? 5 : 7, "class": "fd-box"}, g);
  if (n.marker) marker(n.marker, g);
  for (const t of n.texts) shape(t, g);
  let value = null;
  if (n.value) value = el("text", {x: n.value.x, y: n.value.y, "text-anchor": n.value.anchor, "class": "fd-value"}, g);
  const tag = el("g", {"class": "fd-tag", visibility: "hidden"}, g);
  const tagBox = el("rect", {x: n.tag.x, y: n.tag.y - 8, width: 0, height: 16, rx: 8}, tag);
  const tagText = el("text", {x: n.tag.x - 7, y: n.tag.y + 3.6, "text-anchor": "end"}, tag);
  g.addEventListener("click", () => state.choose(n.key));
  g.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " " || event.key === "Spacebar") {
      event.preventDefault();
      state.choose(n.key);
      return;
    }
    // One Tab stop for the whole diagram: the arrow keys, Home and End move between its stages.
    const keys = Array.from(state.nodes.keys()), at = keys.indexOf(n.key);
    const to = {ArrowRight: at + 1, ArrowDown: at + 1, ArrowLeft: at - 1, ArrowUp: at - 1,
                Home: 0, End: keys.length - 1}[event.key];
    if (to === undefined) return;
    event.preventDefault();
    const next = keys[Math.max(0, Math.min(keys.length - 1, to))];
    state.nodes.get(next).g.focus();
  });
  g.addEventListener("focus", () => { state.focused = n.key; state.stop(n.key); state.say(n.key); });
  g.addEventListener("blur", () => { state.focused = null; state.say(null); });
  g.addEventListener("mouseenter", () => state.say(n.key));
  g.addEventListener("mouseleave", () => state.say(state.focused));
  return {g: g, value: value, tag: tag, tagBox: tagBox, tagText: tagText, tagX: n.tag.x,
          small: n.kind === "part"};
}

state.draw = () => {
  const which = state.pick();
  const focused = state.focused;
  fdcanvas.textContent = "";
  state.nodes = new Map();
  state.which = which;
  if (which === null) return;
  const layout = parsed()[which];
  const svg = el("svg", {viewBox: "0 0 " + layout.width + " " + layout.height, "class": "fd-svg fd-" + which,
                         role: "toolbar", "aria-label": "Stages of the floor (arrow keys move between stages)"});
  const most = which === "wide" ? layout.width : layout.width * TALL_MAX_SCALE;
  svg.style.maxWidth = most + "px";
  // The frame hugs the drawing (its caption and detail line wrap to it) rather than the whole column.
  fdroot.style.maxWidth = "calc(" + most + "px + 1.4rem + 2px)";
  for (const s of layout.shapes) shape(s, svg);
  for (const n of layout.nodes) state.nodes.set(n.key, node(n, svg));
  fdcanvas.appendChild(svg);
  state.fill();
  state.mark();
  if (focused && state.nodes.has(focused)) state.nodes.get(focused).g.focus();
};

state.fill = () => {
  if (!state.nodes) return;
  const values = texts().values || {};
  const names = texts().names || {};
  fdroot.classList.toggle("locked", !!data.locked);
  for (const [key, parts] of state.nodes) {
    const name = names[key] || key;
    parts.g.setAttribute("aria-label", name);
    if (data.locked) parts.g.setAttribute("aria-disabled", "true");
    else parts.g.removeAttribute("aria-disabled");
    if (parts.value) {
      const text = data.locked ? "—" : (values[key] || "");
      parts.value.textContent = text;
      parts.value.classList.toggle("bad", /NaN|∞/.test(text));
    }
  }
  state.say(state.focused);
};

state.stop = (key) => {  // the stage Tab lands on: the one last focused, else the selected one, else the first
  if (!state.nodes || state.nodes.size === 0) return;
  const stop = state.nodes.has(key) ? key : state.nodes.has(data.selected) ? data.selected
    : state.nodes.keys().next().value;
  for (const [k, parts] of state.nodes) parts.g.setAttribute("tabindex", k === stop ? "0" : "-1");
  state.tabStop = stop;
};

state.mark = () => {
  if (!state.nodes) return;
  state.stop(state.focused || data.selected);
  const alerts = data.alerts || {};
  for (const [key, parts] of state.nodes) {
    const on = key === data.selected;
    parts.g.classList.toggle("selected", on);
    parts.g.setAttribute("aria-pressed", on ? "true" : "false");
    if (on) parts.g.setAttribute("aria-current", "step");
    else parts.g.removeAttribute("aria-current");
    let alert = alerts[key] || "";
    parts.g.classList.toggle("alert", !!alert);
    if (parts.small) alert = alert.split(" ")[0];  // a chip has room for the mark only ("✗"); its name says all
    parts.tag.setAttribute("visibility", alert ? "visible" : "hidden");
    parts.tagText.textContent = alert;
    if (alert) {
      let width = 0;
      try { width = parts.tagText.getComputedTextLength(); } catch (err) { width = 0; }
      width = (width || alert.length * 6.2) + 14;
      parts.tagBox.setAttribute("x", String(parts.tagX - width));  // the pill ends at the card's top right
      parts.tagBox.setAttribute("width", String(width));
    }
  }
  state.say(state.focused);
};

state.caption = () => { fdcaption.textContent = data.caption || ""; };

state.fit = () => { if (state.pick() !== state.which) state.draw(); };

state.layouts = null;
if (state.observer) state.observer.disconnect();
if (typeof ResizeObserver !== "undefined") {
  state.observer = new ResizeObserver(() => state.fit());
  state.observer.observe(view.el || fdroot);
}
state.caption();
state.draw();
