"""What a page's charts draw, read in the browser, and the checks a designer makes on it.

MARKS_JS reads both kinds of chart the pages have: the SVG charts a browser-drawn explorable draws
(explorables/components/drawn_view/draw.js: `figure.dv-chart`, read from the DOM, DRAWN_MARKS_JS) and Bokeh
figures. For Bokeh it walks `Bokeh.index` for every figure on the page that has a size (hidden ones are skipped)
and returns, in each figure's canvas pixels: its frame, its title, its legends' boxes, its text labels (text
glyphs: value labels, heatmap cell values, an arrow's stage label) with their colours, and its marks
(bars, cells, line segments, dots, reference lines, arrows) mapped through the figure's scales by
Bokeh itself. The Python functions then say what a student would see as a defect: text on a mark it does
not label, text cut off by the frame or the canvas, a toolbar showing an "active" tick, or text and dots
too faint against what is behind them (WCAG contrast, from the colours the models use).
"""

from __future__ import annotations

from dataclasses import dataclass

# One colour reader for both: a packed 0xRRGGBBAA number (Bokeh's visuals), "none" or a CSS colour -> [r, g, b, a]
# (through a canvas context's fillStyle, which writes any CSS colour as #rrggbb or rgba()).
RGBA_JS = r"""
  const probe = document.createElement("canvas").getContext("2d");
  function rgba(c) {
    if (typeof c === "number") return [c >>> 24, (c >>> 16) & 255, (c >>> 8) & 255, (c & 255) / 255];
    if (c == null || c === "none") return [0, 0, 0, 0];
    probe.fillStyle = "#000000";
    probe.fillStyle = c;
    const s = probe.fillStyle;
    if (s[0] === "#") return [parseInt(s.slice(1, 3), 16), parseInt(s.slice(3, 5), 16), parseInt(s.slice(5, 7), 16), 1];
    const v = s.match(/[\d.]+/g).map(Number);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  }
"""

BOKEH_MARKS_JS = "() => {\n  if (typeof Bokeh === \"undefined\" || !Bokeh.index) return [];" + RGBA_JS + r"""
  const box = (l, t, r, b) => [Math.min(l, r), Math.min(t, b), Math.max(l, r), Math.max(t, b)];
  const ok = (...xs) => xs.every(Number.isFinite);
  const val = (p) => (p != null && typeof p === "object" && "value" in p) ? p.value : p;  // a spec's fixed value
  const figures = [];
  for (const pv of Bokeh.index.query(v => v.model.type == "Figure")) {
    const rect = pv.el.getBoundingClientRect();
    if (rect.width < 1 || rect.height < 1) continue;  // not laid out: hidden
    const f = pv.frame.bbox;
    const fig = {
      title: pv.model.title ? pv.model.title.text : "", width: pv.canvas_view.bbox.width,
      height: pv.canvas_view.bbox.height, frame: [f.left, f.top, f.right, f.bottom],
      background: rgba(pv.model.background_fill_color), legends: [], labels: [], marks: [], title_box: null,
      axis_labels: [],
      toolbar_active: 0,
    };
    const xs = pv.frame.x_scale, ys = pv.frame.y_scale, ctx = pv.canvas_view.primary.ctx;
    const measure = (font, text) => {  // on the plot's own canvas: an em size is relative to its font size
      ctx.save(); ctx.font = font; const width = ctx.measureText(text).width; ctx.restore(); return width;
    };
    for (const [model, view] of pv.renderer_views) {
      const type = model.type;
      if (model.visible === false) continue;
      if (type == "Legend") {
        const b = view.bbox;
        if (model.items.length) fig.legends.push([b.left, b.top, b.right, b.bottom]);
      } else if (type == "Title") {
        if (!model.text) continue;
        const width = measure(`${model.text_font_style} ${model.text_font_size} ${model.text_font}`, model.text);
        const l = view.layout.bbox;
        const left = model.align == "right" ? l.right - width
          : model.align == "center" ? (l.left + l.right - width) / 2 : l.left;
        fig.title_box = [left, l.top, left + width, l.bottom];
        fig.title_room = [l.left, l.right];
      } else if (type.endsWith("Axis")) {
        if (!model.axis_label) continue;
        const across = view.layout.bbox, vertical = across.height > across.width && across.width < 200;
        const centre = vertical ? (f.top + f.bottom) / 2 : (f.left + f.right) / 2;
        const length = vertical ? fig.height : fig.width;  // Bokeh centres the label on the frame
        const font = [model.axis_label_text_font_style, model.axis_label_text_font_size, model.axis_label_text_font]
          .join(" ");
        fig.axis_labels.push({text: model.axis_label, needed: measure(font, model.axis_label),
                              room: 2 * Math.min(centre, length - centre)});
      } else if (type == "Span") {
        if (model.location == null) continue;
        const w = model.line_width / 2;
        if (model.dimension == "width") {
          const y = ys.compute(model.location);
          fig.marks.push({kind: "span", box: [f.left, y - w, f.right, y + w], colour: rgba(model.line_color)});
        } else {
          const x = xs.compute(model.location);
          fig.marks.push({kind: "span", box: [x - w, f.top, x + w, f.bottom], colour: rgba(model.line_color)});
        }
      } else if (type == "Arrow") {
        const d = model.source.data, n = (d[model.x_start.field] || []).length;
        for (let i = 0; i < n; i++) {
          const x0 = xs.compute(d[model.x_start.field][i]), y0 = ys.compute(d[model.y_start.field][i]);
          const x1 = xs.compute(d[model.x_end.field][i]), y1 = ys.compute(d[model.y_end.field][i]);
          if (!ok(x0, y0, x1, y1)) continue;
          const colour = rgba(val(model.line_color));
          fig.marks.push({kind: "arrow", segment: [x0, y0, x1, y1], width: val(model.line_width), colour});
          const size = model.end ? val(model.end.size) : 0, length = Math.hypot(x1 - x0, y1 - y0);
          if (size > 0 && length > 0) {  // the head's triangle: from the tip back along the arrow, size/2 each side
            const ux = (x1 - x0) / length, uy = (y1 - y0) / length, bx = x1 - size * ux, by = y1 - size * uy;
            const hx = [x1, bx - uy * size / 2, bx + uy * size / 2], hy = [y1, by + ux * size / 2, by - ux * size / 2];
            const head = [Math.min(...hx), Math.min(...hy), Math.max(...hx), Math.max(...hy)];
            fig.marks.push({kind: "arrow head", box: head, colour});
          }
        }
      } else if (view.glyph) {
        const g = view.glyph, gtype = g.model.type, n = g.data_size, source = model.data_source.id;
        const fill = g.visuals.fill, line = g.visuals.line;
        const seen = (i) => (fill && fill.fill_alpha.get(i) > 0)
          || (line && line.line_alpha.get(i) > 0 && line.line_width.get(i) > 0);
        const colour = (i) => {  // [r, g, b, a]: the fill (times its alpha), else the line
          const c = rgba(fill ? fill.fill_color.get(i) : line.line_color.get(i));
          return c.slice(0, 3).concat([c[3] * (fill ? fill.fill_alpha.get(i) : line.line_alpha.get(i))]);
        };
        for (let i = 0; i < n; i++) {
          if (gtype == "VBar") {
            if (!seen(i) || !ok(g.sleft[i], g.sright[i], g.stop[i], g.sbottom[i])) continue;
            const bar = box(g.sleft[i], g.stop[i], g.sright[i], g.sbottom[i]);
            fig.marks.push({kind: "bar", colour: colour(i), box: bar});
          } else if (gtype == "Rect") {
            if (!seen(i) || !ok(g.sx0[i], g.sy1[i], g.swidth[i], g.sheight[i])) continue;
            fig.marks.push({kind: "cell", source, index: i, colour: colour(i),
                            box: box(g.sx0[i], g.sy1[i], g.sx0[i] + g.swidth[i], g.sy1[i] + g.sheight[i])});
          } else if (gtype == "Scatter") {
            const r = g.size.get(i) / 2;
            if (!seen(i) || !ok(g.sx[i], g.sy[i], r)) continue;
            fig.marks.push({kind: "dot", box: [g.sx[i] - r, g.sy[i] - r, g.sx[i] + r, g.sy[i] + r], colour: colour(i)});
          } else if (gtype == "Line") {
            if (i + 1 >= n || !(line.line_alpha.get(0) > 0)) continue;
            if (!ok(g.sx[i], g.sy[i], g.sx[i + 1], g.sy[i + 1])) continue;
            fig.marks.push({kind: "line", segment: [g.sx[i], g.sy[i], g.sx[i + 1], g.sy[i + 1]],
                            width: line.line_width.get(0), colour: colour(0)});
          } else if (gtype == "Text") {
            const label = g.labels[i], text = g.visuals.text;
            if (label == null || !(text.text_alpha.get(i) > 0)) continue;
            const sx = g.sx[i] + g.x_offset.get(i), sy = g.sy[i] + g.y_offset.get(i);
            if (!ok(sx, sy)) continue;
            const a = g.anchor_.get(i), p = g.padding || {left: 0, right: 0, top: 0, bottom: 0};
            const l = sx - a.x * g.swidth[i], t = sy - a.y * g.sheight[i];
            const c = rgba(text.text_color.get(i));
            const texts = model.data_source.data[g.model.text.field];
            fig.labels.push({text: String(texts ? texts[i] : g.model.text.value),
                             source, index: i, colour: c.slice(0, 3).concat([c[3] * text.text_alpha.get(i)]),
                             box: [l + p.left, t + p.top, l + g.swidth[i] - p.right, t + g.sheight[i] - p.bottom]});
          }
        }
      }
    }
    for (const tv of Bokeh.index.query(v => v.model == pv.model.toolbar)) {
      fig.toolbar_active += tv.shadow_el.querySelectorAll(".bk-active").length;
    }
    figures.push(fig);
  }
  return figures;
}
"""

# The SVG charts of browser-drawn explorables, in the same form: coordinates in the SVG's own pixels, the whole
# SVG as the frame (a label must stay inside it), value labels (.dv-label, .dv-cell) with their computed colours,
# marks (.dv-mark: bars, dots, the line's segments, reference lines, heatmap cells with the number each holds),
# the axis label's length against its room,
# the title's width against its place. Legends are HTML above the chart, off the marks by construction.
DRAWN_MARKS_JS = "() => {" + RGBA_JS + r"""
  const found = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("figure.dv-chart")) found.push(el);
    for (const el of root.querySelectorAll("*")) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  function background(el) {  // the first opaque background behind el, across shadow roots
    for (let e = el; e; e = e.parentElement || (e.getRootNode && e.getRootNode().host)) {
      const c = rgba(getComputedStyle(e).backgroundColor);
      if (c[3] > 0.5) return c;
    }
    return [255, 255, 255, 1];
  }
  const figures = [];
  for (const figure of found) {
    const svg = figure.querySelector("svg");
    const r = svg.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) continue;
    const at = (el) => {
      const b = el.getBoundingClientRect();
      return [b.left - r.left, b.top - r.top, b.right - r.left, b.bottom - r.top];
    };
    const caption = figure.querySelector("figcaption");
    const fig = {title: caption ? caption.textContent : "", width: r.width, height: r.height,
                 frame: [0, 0, r.width, r.height], background: background(svg), legends: [], labels: [], marks: [],
                 axis_labels: [], toolbar_active: 0,
                 title_box: null};
    if (caption) {
      fig.title_box = [0, 0, caption.scrollWidth, caption.clientHeight];
      fig.title_room = [0, caption.clientWidth];
    }
    const cellLabel = {};  // a heatmap cell's number (data-cell "row,col") -> its index among the labels
    svg.querySelectorAll(".dv-label, .dv-cell").forEach((t, i) => {
      if (t.dataset.cell) cellLabel[t.dataset.cell] = i;
      fig.labels.push({text: t.textContent, source: "svg", index: i, colour: rgba(getComputedStyle(t).fill),
                       box: at(t)});
    });
    svg.querySelectorAll(".dv-mark").forEach((m) => {
      const cs = getComputedStyle(m);
      if (m.classList.contains("dv-heat")) {  // a heatmap cell: the number it holds must stay inside it
        const index = m.dataset.cell in cellLabel ? cellLabel[m.dataset.cell] : -1;
        fig.marks.push({kind: "cell", source: "svg", index, box: at(m), colour: rgba(cs.fill)});
      } else if (m.tagName === "polyline") {
        const pts = m.getAttribute("points").trim().split(/\s+/).map(p => p.split(",").map(Number));
        for (let i = 0; i + 1 < pts.length; i++) {
          fig.marks.push({kind: "line", segment: [...pts[i], ...pts[i + 1]],
                          width: Number(m.getAttribute("stroke-width") || 1), colour: rgba(cs.stroke)});
        }
      } else if (m.tagName === "line") {
        fig.marks.push({kind: "span", box: at(m), colour: rgba(cs.stroke)});
      } else {
        fig.marks.push({kind: m.tagName === "circle" ? "dot" : "bar", box: at(m), colour: rgba(cs.fill)});
      }
    });
    svg.querySelectorAll(".dv-axis-label").forEach((t) => {
      // turned (a y axis): the chart's height is its room; along an x axis, its width
      const turned = /rotate/.test(t.getAttribute("transform") || "");
      fig.axis_labels.push({text: t.textContent, needed: t.getComputedTextLength(), room: turned ? r.height : r.width});
    });
    figures.push(fig);
  }
  return figures;
}
"""

MARKS_JS = f"() => [...({BOKEH_MARKS_JS.strip()})(), ...({DRAWN_MARKS_JS.strip()})()]"

# Every figure shown (at least `count`, Bokeh's and drawn ones together) has the width of its element again since
# the viewport changed, has painted since (no painter waits), and has drawn data.
SETTLED_JS = r"""
(count) => {
  const drawn = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll("figure.dv-chart svg")) drawn.push(el);
    for (const el of root.querySelectorAll("*")) if (el.shadowRoot) walk(el.shadowRoot);
  };
  walk(document);
  const shownDrawn = drawn.filter(svg => svg.getBoundingClientRect().width >= 1);
  const drawnOk = shownDrawn.every(svg => {  // drawn at its place's width (draw.js: at least 240 px)
    const place = svg.closest("figure").clientWidth;
    return Math.abs(svg.width.baseVal.value - Math.max(240, place)) < 2 && svg.querySelector(".dv-mark");
  });
  const hasBokeh = typeof Bokeh !== "undefined" && Bokeh.index;
  const shown = hasBokeh ? [...Bokeh.index.query(v => v.model.type == "Figure")]
    .filter(pv => pv.el.getBoundingClientRect().width >= 1) : [];
  return shown.length + shownDrawn.length >= count && drawnOk && shown.every(pv => {
    const width = pv.el.getBoundingClientRect().width;
    const painted = !pv._invalidate_all && pv._invalidated_painters.size == 0;
    const drawn = [...pv.renderer_views.values()].some(v => v.glyph && v.glyph.data_size > 0);
    return Math.abs(pv.canvas_view.bbox.width - width) < 1 && painted && drawn;
  });
}
"""

TOUCH = 0.5  # px: boxes that only touch do not overlap
CLEAR = 2.0  # px of room a legend or a label keeps from marks it does not label and from the frame's edge


@dataclass(frozen=True)
class Problem:
    figure: str
    what: str

    def __str__(self) -> str:
        return f"{self.figure}: {self.what}"


def _intersects(a: list[float], b: list[float]) -> bool:
    return min(a[2], b[2]) - max(a[0], b[0]) > TOUCH and min(a[3], b[3]) - max(a[1], b[1]) > TOUCH


def _inside(inner: list[float], outer: list[float]) -> bool:
    return (inner[0] >= outer[0] - TOUCH and inner[1] >= outer[1] - TOUCH
            and inner[2] <= outer[2] + TOUCH and inner[3] <= outer[3] + TOUCH)


def _clip(b: list[float], frame: list[float]) -> list[float] | None:
    """The part of a mark the frame shows (Bokeh clips glyphs to the frame), or None."""
    c = [max(b[0], frame[0]), max(b[1], frame[1]), min(b[2], frame[2]), min(b[3], frame[3])]
    return c if c[2] > c[0] and c[3] > c[1] else None


def _segment_hits(segment: list[float], width: float, b: list[float]) -> bool:
    """Whether a stroked segment crosses box b (Liang–Barsky on the box grown by half the stroke)."""
    x0, y0, x1, y1 = segment
    grow = width / 2 - TOUCH
    left, top, right, bottom = b[0] - grow, b[1] - grow, b[2] + grow, b[3] + grow
    dx, dy = x1 - x0, y1 - y0
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, x0 - left), (dx, right - x0), (-dy, y0 - top), (dy, bottom - y0)):
        if p == 0:
            if q < 0:
                return False
        else:
            t = q / p
            if p < 0:
                lo = max(lo, t)
            else:
                hi = min(hi, t)
            if lo > hi:
                return False
    return True


def _hits(mark: dict, b: list[float], frame: list[float]) -> bool:
    if "segment" in mark:
        clipped = _clip(b, frame)
        return clipped is not None and _segment_hits(mark["segment"], mark.get("width", 1), clipped)
    shown = _clip(mark["box"], frame)
    return shown is not None and _intersects(shown, b)


def _grown(b: list[float], by: float = CLEAR) -> list[float]:
    return [b[0] - by, b[1] - by, b[2] + by, b[3] + by]


def overlaps(fig: dict) -> list[Problem]:
    """Text on (or within CLEAR px of) a mark it does not label, text across the frame's edge or off the
    canvas, a title cut off, a toolbar button showing the 'active' tick."""
    name, frame, out = fig["title"] or "untitled figure", fig["frame"], []
    canvas = [0, 0, fig["width"], fig["height"]]
    for legend in fig["legends"]:
        if not _inside(legend, canvas):
            out.append(Problem(name, f"the legend {legend} runs off the canvas {canvas}"))
        for mark in fig["marks"]:
            if _hits(mark, _grown(legend), frame):
                out.append(Problem(name, f"the legend {legend} covers a {mark['kind']}"))
    for label in fig["labels"]:
        if not _inside(_grown(label["box"]), frame):
            out.append(Problem(name, f"label {label['text']!r} {label['box']} crosses the frame's edge {frame}"))
        for mark in fig["marks"]:
            own = mark["kind"] == "cell" and (mark["source"], mark["index"]) == (label["source"], label["index"])
            if own:
                if not _inside(label["box"], mark["box"]):
                    out.append(Problem(name, f"label {label['text']!r} spills out of its cell"))
            elif _hits(mark, _grown(label["box"]), frame):
                out.append(Problem(name, f"label {label['text']!r} {label['box']} sits on a {mark['kind']}"))
        for legend in fig["legends"]:
            if _intersects(legend, label["box"]):
                out.append(Problem(name, f"label {label['text']!r} is under the legend"))
    labels = fig["labels"]
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            if _intersects(a["box"], b["box"]):
                out.append(Problem(name, f"labels {a['text']!r} and {b['text']!r} overlap"))
    if fig["title_box"] is not None and fig["title_box"][2] > fig["title_room"][1] + TOUCH:
        out.append(Problem(name, f"the title is cut off: it needs {fig['title_box'][2]:.0f} px of "
                                 f"{fig['title_room'][1]:.0f}"))
    for axis in fig["axis_labels"]:
        if axis["needed"] > axis["room"] + TOUCH:
            out.append(Problem(name, f"the axis label {axis['text']!r} is cut off: it needs {axis['needed']:.0f} px "
                                     f"of {axis['room']:.0f}"))
    if fig["toolbar_active"]:
        out.append(Problem(name, "a toolbar button shows the 'active' tick"))
    return out


def _luminance(rgb: list[float]) -> float:
    def channel(c: float) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _over(colour: list[float], background: list[float]) -> list[float]:
    """A colour with alpha as it shows over an opaque background."""
    a = colour[3]
    return [colour[i] * a + background[i] * (1 - a) for i in range(3)]


def contrast(colour: list[float], background: list[float]) -> float:
    """The WCAG 2 contrast ratio of a (possibly translucent) colour over an opaque background."""
    lighter, darker = sorted((_luminance(_over(colour, background)), _luminance(background)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def faint(fig: dict, text: float = 4.5, dots: float = 3.0) -> list[Problem]:
    """Labels under `text`:1 against what is behind them (their cell, else the plot), dots under `dots`:1."""
    name, out = fig["title"] or "untitled figure", []
    cells = {(m["source"], m["index"]): m for m in fig["marks"] if m["kind"] == "cell"}
    for label in fig["labels"]:
        cell = cells.get((label["source"], label["index"]))
        behind = _over(cell["colour"], fig["background"]) if cell is not None else fig["background"]
        ratio = contrast(label["colour"], behind + [1])
        if ratio < text:
            out.append(Problem(name, f"label {label['text']!r} has contrast {ratio:.2f}:1 (needs {text}:1)"))
    for mark in fig["marks"]:
        if mark["kind"] == "dot":
            ratio = contrast(mark["colour"], fig["background"])
            if ratio < dots:
                out.append(Problem(name, f"a dot has contrast {ratio:.2f}:1 against the plot (needs {dots}:1)"))
                break
    return out
