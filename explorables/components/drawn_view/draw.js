// What every browser-drawn explorable shares: numbers written as the server writes them, DOM and SVG nodes,
// tables, charts (title, hover line, text alternative, PNG download), a y axis, legends, a heatmap, the native
// controls, and the loop that draws one payload per change.
// A classic script: it defines window.btDraw and nothing else global. Each explorable's own file (e.g.
// block_trace.js) adds btDraw.views[name] = function (ctx) {...}; drawn_view/__init__.py sends both inline in
// the component's render script, then calls btDraw.mount.
// Every piece of text is set with textContent: nothing the server sends is parsed as markup.
// No template literals: ReactiveHTML's scripts read ${...} as its own.

(function () {
  "use strict";
  if (window.btDraw) return;  // one definition per page, however many components carry the script
  var SVGNS = "http://www.w3.org/2000/svg";
  var MINUS = "\u2212";
  var SVG_TAGS = {svg: 1, g: 1, rect: 1, line: 1, polyline: 1, circle: 1, text: 1, title: 1, path: 1};

  function node(tag, attrs, parent, text) {
    var e = SVG_TAGS[tag] ? document.createElementNS(SVGNS, tag) : document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (attrs[k] !== undefined && attrs[k] !== null && attrs[k] !== false) e.setAttribute(k, String(attrs[k]));
      }
    }
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  // Python's numbers.number(): true minus, fixed decimals rounded half to even on the exact binary value
  // (as Python's format does), "0.000" for anything that rounds to zero, e-notation from 1e4 on.
  function fixed(v, digits) {
    var exact = Math.abs(v).toFixed(Math.min(100, digits + 40));
    var cut = exact.indexOf(".") + digits + 1;
    var kept = exact.slice(0, cut), rest = exact.slice(cut);
    var text = Math.abs(v).toFixed(digits);
    if (/^50*$/.test(rest)) {  // an exact tie: toFixed rounds it up, Python to the even digit
      var last = kept.replace(".", "");
      if (Number(last[last.length - 1]) % 2 === 0) text = kept.replace(/\.$/, "");
    }
    return text;
  }

  function number(v, digits, signed) {
    if (digits === undefined) digits = 3;
    if (Number.isNaN(v)) return "NaN";
    if (!Number.isFinite(v)) return v < 0 ? MINUS + "\u221e" : (signed ? "+\u221e" : "\u221e");
    var text = fixed(v, digits);
    if (Number(text) === 0) return (0).toFixed(digits);
    if (Math.abs(v) >= 1e4) {
      text = Math.abs(v).toExponential(2).replace(/e([+-])(\d)$/, "e$10$2");
    }
    var sign = v < 0 ? MINUS : (signed ? "+" : "");
    return sign + text.replace("-", MINUS);
  }

  function signClass(text) {
    return text[0] === "+" ? "pos" : text[0] === MINUS ? "neg" : text === "NaN" ? "nan" : "zero";
  }

  // A number cell as components/html.py's cell_number writes it: signed, or plain (a norm).
  function cell(tr, v, plain) {
    if (v === null || v === undefined) return node("td", {"class": "num empty"}, tr);
    if (typeof v === "string") return node("td", {"class": "txt"}, tr, v);  // a word, e.g. "same"
    var text = number(v, 3, !plain);
    var kind = Number.isNaN(v) ? "nan" : plain ? "norm" : signClass(text);
    return node("td", {"class": "num " + kind}, tr, text);
  }

  // An accessible table as components/html.py's table(): caption, column headers, a header cell per row.
  // rows: [{label, values: [number|null], plain: [column index], note, className, current}]
  function table(parent, caption, header, rows, extraClass) {
    var wrap = node("div", {"class": "bt-table-wrap"}, parent);
    var t = node("table", {"class": "bt-table " + (extraClass || "")}, wrap);
    node("caption", null, t, caption);
    var head = node("tr", null, node("thead", null, t));
    header.forEach(function (h) { node("th", {scope: "col"}, head, h); });
    var body = node("tbody", null, t);
    return rows.map(function (r) {
      var tr = node("tr", {"class": r.className || null, "aria-current": r.current ? "step" : null}, body);
      var th = node("th", {scope: "row"}, tr, r.label);
      if (r.note) { th.appendChild(document.createTextNode(" ")); node("span", {"class": "row-note"}, th, r.note); }
      var plain = r.plain || [];
      r.values.forEach(function (v, i) { cell(tr, v, plain.indexOf(i) >= 0); });
      return tr;
    });
  }

  // A legend in HTML above its chart: never on the marks.
  function legend(parent, items) {
    var p = node("p", {"class": "dv-legend"}, parent);
    items.forEach(function (it) {
      node("span", {"class": "dv-key" + (it.dash ? " dv-" + it.dash : ""), style: "border-color:" + it.colour}, p, it.label);
    });
    return p;
  }

  // A chart: its title, an SVG as wide as its place, the hover line, its words, and a PNG download.
  function chart(parent, o) {
    var figure = node("figure", {"class": "dv-chart"}, parent);
    var head = node("div", {"class": "dv-chart-head"}, figure);
    node("figcaption", {"class": "dv-title"}, head, o.title);
    var save = node("button", {type: "button", "class": "dv-save", "aria-label": "Download \u201c" + o.title + "\u201d as PNG"}, head, "PNG");
    if (o.legend) legend(figure, o.legend);
    var w = Math.max(240, Math.floor(o.width || 600));
    var svg = node("svg", {width: w, height: o.height, viewBox: "0 0 " + w + " " + o.height, role: "img",
                           "aria-label": o.title}, figure);
    node("title", null, svg, o.title);
    var readout = node("p", {"class": "dv-readout bt-muted", "aria-hidden": "true"}, figure, "\u00a0");
    var alt = node("details", {"class": "alt-text"}, figure);
    node("summary", null, alt, "Describe \u201c" + (o.altTitle || o.title) + "\u201d in words");
    node("p", null, alt, (o.words || []).join(" "));
    save.addEventListener("click", function () { savePng(svg, o.filename || "chart"); });
    return {svg: svg, w: w, h: o.height, readout: readout};
  }

  function hover(mark, readout, text) {
    node("title", null, mark, text);
    mark.addEventListener("pointerenter", function () { readout.textContent = text; });
  }

  // Round steps for a linear axis from lo to hi (about `count` of them).
  function ticks(lo, hi, count) {
    var span = hi - lo;
    if (!(span > 0)) return [lo];
    var step = Math.pow(10, Math.floor(Math.log10(span / count)));
    var err = span / count / step;
    step *= err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1;
    var out = [];
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  // A y axis with grid lines: y(v) maps a value to the SVG's y; label is written beside the axis, turned.
  function yAxis(c, lo, hi, y, left, right, label) {
    var g = node("g", {"class": "dv-axis"}, c.svg);
    var list = ticks(lo, hi, 4), digits = 0;
    if (list.length > 1) digits = Math.max(0, Math.min(3, -Math.floor(Math.log10(list[1] - list[0]) + 1e-9)));
    list.forEach(function (v) {
      node("line", {x1: left, x2: c.w - right, y1: y(v), y2: y(v), "class": "dv-grid"}, g);
      node("text", {x: left - 6, y: y(v) + 4, "text-anchor": "end"}, g, number(v, digits));
    });
    if (label) {
      var mid = (y(lo) + y(hi)) / 2;
      node("text", {x: 12, y: mid, "text-anchor": "middle", transform: "rotate(-90 12 " + mid + ")",
                    "class": "dv-axis-label"}, g, label);
    }
    return g;
  }

  // A heatmap: rows x cols of weights in [0, 1], numbers only in cells wide enough to hold them.
  function heatmap(c, o) {
    var seq = o.palette.sequential, size = o.size, fits = size >= 40;
    for (var r = 0; r < o.rows; r++) {
      node("text", {x: o.left - 8, y: o.top + r * size + size / 2 + 4, "text-anchor": "end", "class": "dv-tick"}, c.svg, o.rowNames[r]);
      for (var col = 0; col < o.cols; col++) {
        var v = o.value(r, col);
        var bin = Number.isFinite(v) ? Math.min(Math.max(Math.floor(v * seq.length), 0), seq.length - 1) : seq.length - 1;
        var box = node("rect", {x: o.left + col * size, y: o.top + r * size, width: size, height: size, fill: seq[bin],
                                stroke: o.palette.cell_line, "class": "dv-mark dv-heat", "data-cell": r + "," + col}, c.svg);
        hover(box, c.readout, o.rowNames[r] + ", " + o.colNames[col] + ": " + number(v));
        if (fits) {
          node("text", {x: o.left + col * size + size / 2, y: o.top + r * size + size / 2 + 4, "text-anchor": "middle",
                        fill: o.palette.text_on[bin], "class": "dv-cell", "pointer-events": "none",
                        "data-cell": r + "," + col}, c.svg, number(v));
        }
      }
    }
  }

  // The chart as a PNG file: the SVG with its computed styles written in, on its page's background, at 2x.
  var STYLE_PROPS = ["fill", "stroke", "stroke-width", "stroke-dasharray", "font-size", "font-family", "font-weight",
                     "opacity", "font-variant-numeric"];
  function savePng(svg, filename) {
    var copy = svg.cloneNode(true);
    var from = [svg].concat(Array.prototype.slice.call(svg.querySelectorAll("*")));
    var to = [copy].concat(Array.prototype.slice.call(copy.querySelectorAll("*")));
    from.forEach(function (el, i) {
      var cs = getComputedStyle(el);
      to[i].setAttribute("style", STYLE_PROPS.map(function (p) { return p + ":" + cs.getPropertyValue(p); }).join(";"));
    });
    var w = Number(svg.getAttribute("width")), h = Number(svg.getAttribute("height"));
    var bg = getComputedStyle(svg.closest(".dv") || svg).backgroundColor || "#fff";
    copy.setAttribute("xmlns", SVGNS);
    var img = new Image();
    img.onload = function () {
      var canvas = document.createElement("canvas");
      canvas.width = w * 2; canvas.height = h * 2;
      var g = canvas.getContext("2d");
      g.fillStyle = bg; g.fillRect(0, 0, canvas.width, canvas.height);
      g.scale(2, 2); g.drawImage(img, 0, 0, w, h);
      canvas.toBlob(function (blob) {
        var a = document.createElement("a");
        a.href = URL.createObjectURL(blob); a.download = filename + ".png";
        document.body.appendChild(a); a.click(); a.remove();
        setTimeout(function () { URL.revokeObjectURL(a.href); }, 10000);
      }, "image/png");
    };
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(new XMLSerializer().serializeToString(copy));
  }

  // --- the controls, drawn here and checked on the server ---------------------------------------------------
  // One change in flight at a time: the first goes at once, later ones wait for the server's answer (the
  // payload's "ack") and only the latest of each control is sent then. A dragged slider is paced by the server.
  function channel(io) {
    var pending = {}, sent = 0, inflight = 0, since = 0, inflightName = null;
    function flush() {
      var names = Object.keys(pending);
      if (!names.length) return;
      if (inflight && performance.now() - since < 1000) return;
      var name = names[0], v = pending[name];
      delete pending[name];
      sent += 1; inflight = sent; inflightName = name; since = performance.now();
      io.send({name: name, value: v, n: sent});
    }
    return {
      send: function (name, value) { pending[name] = value; flush(); },
      answered: function (ack) { if (inflight && ack >= inflight) { inflight = 0; inflightName = null; flush(); } },
      waiting: function (name) { return name in pending || name === inflightName; }
    };
  }

  // One native control: <label for>, the error line beside a text field (role alert), the range's value shown.
  function control(parent, c, send) {
    var id = "dv-" + c.name;
    var row = node("div", {"class": "dv-field dv-" + c.kind}, parent);
    var input, lastText = null;
    if (c.kind === "button") {
      input = node("button", {type: "button", id: id}, row, c.label);
      input.addEventListener("click", function () { send("action", c.name); });
    } else if (c.kind === "checkbox") {
      var wrap = node("label", {"for": id}, row);  // the box inside its label: the words toggle it
      input = node("input", {type: "checkbox", id: id}, wrap);
      wrap.appendChild(document.createTextNode(c.label));
      input.addEventListener("change", function () { send(c.name, input.checked); });
    } else {
      var head = node("div", {"class": "dv-field-head"}, row);
      node("label", {"for": id}, head, c.label);
      if (c.kind === "range") {
        var out = node("output", {"for": id, "class": "dv-out"}, head);
        input = node("input", {type: "range", id: id, min: c.min, max: c.max, step: c.step,
                               "aria-valuemin": c.min, "aria-valuemax": c.max}, row);
        input.dvDigits = c.digits === undefined ? 2 : c.digits;
        input.addEventListener("input", function () {
          out.textContent = Number(input.value).toFixed(input.dvDigits);
          input.setAttribute("aria-valuenow", input.value);
          send(c.name, Number(input.value));
        });
        input.dvOut = out;
      } else if (c.kind === "select") {
        // Each option's value is its words, as the student reads them; the server gets the state's value.
        input = node("select", {id: id}, row);
        setOptions(input, c.options || []);
        input.addEventListener("change", function () { send(c.name, input.dvValues[input.value]); });
      } else {
        input = node("input", {type: "text", id: id, "aria-describedby": (c.hint ? id + "-hint " : "") + id + "-error",
                               autocomplete: "off", spellcheck: "false"}, row);
        if (c.hint) node("div", {id: id + "-hint", "class": "bt-muted dv-hint"}, row, c.hint);
        var submit = function () { if (input.value !== lastText) { lastText = input.value; send(c.name, input.value); } };
        input.addEventListener("change", submit);
        input.addEventListener("keydown", function (e) { if (e.key === "Enter") submit(); });
        input.dvError = node("p", {id: id + "-error", "class": "bt-field-error", role: "alert"}, row);
        input.dvSeen = function (v) { lastText = v; };
      }
    }
    input.dvRow = row;
    return input;
  }

  // A card of native controls under its title (an h2): a form named by its title, never submitted (a field sends
  // its own change). With o.id, a section named by its heading instead (o.className: the card's own class), as the
  // decoder lab's numbered panels are. The controls go in with ctx.control(card, c).
  function controlsCard(parent, title, o) {
    o = o || {};
    var card;
    if (o.id) {
      card = node("section", {"class": "bt-card" + (o.className ? " " + o.className : ""), "aria-labelledby": o.id},
                  parent);
    } else {
      card = node("form", {"class": "dv-controls bt-card", "aria-label": title}, parent);
      card.addEventListener("submit", function (e) { e.preventDefault(); });
    }
    node("h2", {"class": "bt-h2", id: o.id}, card, title);
    return card;
  }

  // A select's options as the server lists them now ([[words, value], ...]), replaced only when they change.
  function setOptions(input, options) {
    var key = JSON.stringify(options);
    if (input.dvOptions === key) return;
    input.dvOptions = key;
    input.replaceChildren();
    input.dvLabels = {}; input.dvValues = {};
    options.forEach(function (o) { node("option", {value: o[0]}, input, o[0]); input.dvLabels[o[1]] = o[0]; input.dvValues[o[0]] = o[1]; });
  }

  // A range's bounds as the server has them now (e.g. the stepper's last stage follows the floors).
  function setBounds(input, b) {
    if (String(b[0]) !== input.min) { input.min = String(b[0]); input.setAttribute("aria-valuemin", String(b[0])); }
    if (String(b[1]) !== input.max) { input.max = String(b[1]); input.setAttribute("aria-valuemax", String(b[1])); }
  }

  // A control shows the server's value, unless the student's newer one is on its way.
  function showControl(input, v, locked) {
    input.disabled = !!locked;
    if (v === undefined) return;
    if (input.type === "checkbox") { if (input.checked !== !!v) input.checked = !!v; }
    else if (input.type === "range") {
      if (Number(input.value) !== v) input.value = String(v);
      input.setAttribute("aria-valuenow", String(v));
      input.dvOut.textContent = Number(v).toFixed(input.dvDigits);
    } else if (input.tagName === "SELECT") {
      var label = input.dvLabels[v];
      if (label !== undefined && input.value !== label) input.value = label;
    }
    else if (input.type === "text") {
      if (document.activeElement !== input && input.getRootNode().activeElement !== input && input.value !== String(v)) {
        input.value = String(v);
      }
      if (input.dvSeen) input.dvSeen(String(v));  // the server's text: what the student is typing still goes
    }
  }

  // --- one payload per change -----------------------------------------------------------------------------
  // io: {get(name), send(change)}; the view (btDraw.views[name]) builds its places once (ctx) and returns
  // {draw(meta, values)}; meta and values arriving in one message are drawn once.
  function mount(el, io, name) {
    var spec = JSON.parse(io.get("spec") || "{}");
    var root = node("div", {"class": "dv" + (spec.embed ? " dv-embed" : "")}, el);
    var ch = channel(io);
    var inputs = {};
    var ctx = {
      spec: spec, root: root, palette: spec.palette || {}, width: 0,
      send: ch.send,
      control: function (parent, c) { inputs[c.name] = control(parent, c, ch.send); return inputs[c.name]; }
    };
    var view = btDraw.views[name](ctx);
    var lastMeta = null;
    function update() {
      var text = io.get("meta");
      if (!text) return;
      var started = performance.now();
      var meta = JSON.parse(text);
      lastMeta = meta;
      ch.answered(meta.ack || 0);  // before the controls are shown: a change sent now keeps its input as it is
      var values = meta.controls || {}, options = meta.options || {}, bounds = meta.bounds || {};
      var off = meta.disabled || [];
      for (var n in inputs) {
        if (options[n]) setOptions(inputs[n], options[n]);
        if (bounds[n]) setBounds(inputs[n], bounds[n]);
        showControl(inputs[n], ch.waiting(n) ? undefined : values[n], meta.locked || off.indexOf(n) >= 0);
        if (inputs[n].dvError) {  // one message (error, error_field), or one per field (errors)
          inputs[n].dvError.textContent = (meta.errors || {})[n] || (n === meta.error_field && meta.error ? meta.error : "");
        }
      }
      ctx.width = Math.floor(view.width ? view.width() : root.clientWidth);
      view.draw(meta, io.get("values") || []);
      // For tests and benchmarks: the drawing is done, and how long it took in this browser.
      el.dispatchEvent(new CustomEvent("dv-drawn", {bubbles: true, composed: true,
                                                    detail: {ms: performance.now() - started}}));
    }
    var scheduled = false;
    function schedule() {
      if (scheduled) return;
      scheduled = true;
      queueMicrotask(function () { scheduled = false; update(); });
    }
    var lastWidth = 0;
    var observer = new ResizeObserver(function () {
      var w = Math.floor(view.width ? view.width() : root.clientWidth);
      if (w !== lastWidth) { lastWidth = w; if (lastMeta) schedule(); }
    });
    observer.observe(root);
    update();
    return {update: schedule, remove: function () { observer.disconnect(); }};
  }

  window.btDraw = {views: {}, mount: mount, node: node, number: number, signClass: signClass, cell: cell,
                   table: table, legend: legend, chart: chart, hover: hover, ticks: ticks, yAxis: yAxis,
                   heatmap: heatmap, savePng: savePng, controlsCard: controlsCard};
})();
