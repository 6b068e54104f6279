// The block trace drawn in the browser from one payload per change (issue 39 spike).
// A classic script (not a module): it defines window.btTrace = {mount, number} and nothing else global.
// explorables/components/browser_view/__init__.py has Panel serve it as a page script (`__javascript__`, from
// this package, cached by the browser) for the JSComponent and the cached ReactiveHTML, and sends its text
// inline in the render script of the other ReactiveHTML variant.
// Input: spec (JSON, once: palette, controls), meta (JSON per change: controls' values, rows, offsets,
// words) and values (numbers, a typed array decoded by BokehJS from the binary buffer).
// Every piece of text is set with textContent: nothing the server sends is parsed as markup.
// No template literals: ReactiveHTML's scripts read ${...} as its own.

(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var MINUS = "\u2212";
  var NUMBER_FITS_PX = 34;  // a heatmap cell at least this wide and tall prints its weight ("0.000" at 12 px)

  function tvNode(tag, attrs, parent, text) {
    var e = (tag === "svg" || tag === "g" || tag === "rect" || tag === "line" || tag === "polyline" ||
             tag === "circle" || tag === "text" || tag === "title" || tag === "path")
      ? document.createElementNS(SVGNS, tag) : document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, String(attrs[k]));
      }
    }
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  // Python's numbers.number(): true minus, fixed decimals rounded half to even on the exact binary value
  // (as Python's format does), "0.000" for anything that rounds to zero, e-notation from 1e4 on.
  function tvFixed(v, digits) {
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

  function tvNumber(v, digits, signed) {
    if (digits === undefined) digits = 3;
    if (Number.isNaN(v)) return "NaN";
    if (!Number.isFinite(v)) return v < 0 ? MINUS + "\u221e" : (signed ? "+\u221e" : "\u221e");
    var text = tvFixed(v, digits);
    if (Number(text) === 0) return (0).toFixed(digits);
    if (Math.abs(v) >= 1e4) {
      text = Math.abs(v).toExponential(2).replace(/e([+-])(\d)$/, "e$10$2");
    }
    var sign = v < 0 ? MINUS : (signed ? "+" : "");
    return sign + text.replace("-", MINUS);
  }

  function tvSignClass(text) {
    return text[0] === "+" ? "pos" : text[0] === MINUS ? "neg" : text === "NaN" ? "nan" : "zero";
  }

  function mountTraceView(el, io) {
    var spec = JSON.parse(io.get("spec") || "{}");
    var pal = spec.palette || {};
    var root = tvNode("div", {"class": "tv"}, el);
    var inputs = {};
    var pending = {};
    var sent = 0;

    // --- controls drawn here (spec.native) ----------------------------------------------------------
    var controlsBox = null, errorLine = null;
    // One change in flight at a time: the first goes at once, later ones wait for the server's answer (the
    // payload's "ack") and only the latest of each control is sent then. A dragged slider is paced by the server.
    var inflight = 0, inflightSince = 0, inflightName = null;
    function flush() {
      var names = Object.keys(pending);
      if (!names.length) return;
      if (inflight && performance.now() - inflightSince < 1000) return;
      var name = names[0], v = pending[name];
      delete pending[name];
      sent += 1;
      inflight = sent;
      inflightName = name;
      inflightSince = performance.now();
      io.send({name: name, value: v, n: sent});
    }
    function send(name, value) {
      pending[name] = value;
      flush();
    }
    function answered(ack) {
      if (inflight && ack >= inflight) { inflight = 0; inflightName = null; flush(); }
    }
    if (spec.native) {
      controlsBox = tvNode("form", {"class": "tv-controls bt-card", "aria-label": "Controls"}, root);
      controlsBox.addEventListener("submit", function (e) { e.preventDefault(); });
      tvNode("h2", {"class": "bt-h2"}, controlsBox, "Controls");
      (spec.controls || []).forEach(function (c) {
        var id = "tv-" + c.name;
        var row = tvNode("div", {"class": "tv-field tv-" + c.kind}, controlsBox);
        var input;
        if (c.kind === "button") {
          input = tvNode("button", {type: "button", id: id}, row, c.label);
          input.addEventListener("click", function () { send("action", c.name); });
        } else if (c.kind === "checkbox") {
          input = tvNode("input", {type: "checkbox", id: id}, row);
          tvNode("label", {"for": id}, row, c.label);
          input.addEventListener("change", function () { send(c.name, input.checked); });
        } else {
          var label = tvNode("label", {"for": id}, row, c.label);
          if (c.kind === "range") {
            var out = tvNode("output", {"for": id, "class": "tv-out"}, label);
            input = tvNode("input", {type: "range", id: id, min: c.min, max: c.max, step: c.step}, row);
            input.addEventListener("input", function () {
              out.textContent = " " + Number(input.value).toFixed(2);
              send(c.name, Number(input.value));
            });
            input.tvOut = out;
          } else if (c.kind === "select") {
            input = tvNode("select", {id: id}, row);
            c.options.forEach(function (o) { tvNode("option", {value: o[1]}, input, o[0]); });
            input.addEventListener("change", function () { send(c.name, input.value); });
          } else {
            input = tvNode("input", {type: "text", id: id, "aria-describedby": id + "-error", autocomplete: "off"}, row);
            if (c.hint) tvNode("div", {"class": "bt-muted tv-hint"}, row, c.hint);
            input.addEventListener("change", function () { send(c.name, input.value); });
            errorLine = tvNode("p", {id: id + "-error", "class": "bt-field-error", role: "alert"}, row);
          }
        }
        inputs[c.name] = input;
      });
    }

    var live = tvNode("p", {"class": "bt-live", role: "status", "aria-live": "polite"}, root);
    var verdict = tvNode("p", {"class": "bt-muted"}, root);
    var results = tvNode("div", {"class": "tv-results"}, root);
    var readout = null;  // the hover line under a chart

    function showControls(meta) {
      if (!spec.native) return;
      var values = meta.controls || {};
      for (var name in inputs) {
        var input = inputs[name];
        input.disabled = !!meta.locked;
        if (!(name in values) || name in pending || name === inflightName) continue;  // the student's newer value
        var v = values[name];
        if (input.type === "checkbox") { if (input.checked !== !!v) input.checked = !!v; }
        else if (input.type === "range") {
          if (Number(input.value) !== v) input.value = String(v);
          input.tvOut.textContent = " " + Number(v).toFixed(2);
        } else if (document.activeElement !== input && input.value !== String(v)) input.value = String(v);
      }
      if (errorLine) {
        errorLine.textContent = meta.error ? "Could not use this vector: " + meta.error + ". The last good vector is still traced." : "";
      }
    }

    // --- the stage table ------------------------------------------------------------------------------
    function stageTable(meta, values, parent) {
      var rows = meta.rows, width = 0;
      rows.forEach(function (r) { width = Math.max(width, r[3]); });
      var wrap = tvNode("div", {"class": "bt-table-wrap"}, parent);
      var table = tvNode("table", {"class": "bt-table stage-table"}, wrap);
      tvNode("caption", null, table, "One forward pass, stage by stage (rows are stages of one token, not separate tokens)");
      var head = tvNode("tr", null, tvNode("thead", null, table));
      tvNode("th", {scope: "col"}, head, "Stage");
      for (var i = 0; i < width; i++) tvNode("th", {scope: "col"}, head, "x" + i);
      tvNode("th", {scope: "col"}, head, "\u2016\u00b7\u2016");
      var body = tvNode("tbody", null, table);
      var norms = meta.offsets.norm;
      rows.forEach(function (r, n) {
        var key = r[0], at = meta.offsets[key];
        var cls = [];
        if (key === meta.lost) cls.push("lost");
        if (meta.controls && key === meta.controls.inspect) cls.push("current");
        var tr = tvNode("tr", {"class": cls.join(" ") || null, "aria-current": cls.indexOf("current") >= 0 ? "step" : null}, body);
        var th = tvNode("th", {scope: "row"}, tr, r[1]);
        if (key === meta.lost) tvNode("span", {"class": "row-note"}, th, "input lost here");
        for (var j = 0; j < width; j++) {
          if (j >= r[3]) { tvNode("td", {"class": "num empty"}, tr); continue; }
          var text = tvNumber(values[at + j], 3, true);
          tvNode("td", {"class": "num " + tvSignClass(text)}, tr, text);
        }
        tvNode("td", {"class": "num norm"}, tr, tvNumber(values[norms + n]));
        if (spec.native) {
          tr.addEventListener("click", function () { if (!meta.locked) send("inspect", key); });
        }
      });
    }

    // --- charts: an SVG of the container's own width --------------------------------------------------
    function chart(parent, title, height, words) {
      var figure = tvNode("figure", {"class": "tv-chart"}, parent);
      tvNode("figcaption", {"class": "tv-title"}, figure, title);
      var w = Math.max(260, Math.floor(drawWidth || 600));
      var svg = tvNode("svg", {width: w, height: height, viewBox: "0 0 " + w + " " + height, role: "img", "aria-label": title + ". " + words}, figure);
      tvNode("title", null, svg, title);
      var line = tvNode("p", {"class": "tv-readout bt-muted", "aria-hidden": "true"}, figure, "\u00a0");
      var alt = tvNode("details", {"class": "alt-text"}, figure);
      tvNode("summary", null, alt, "Describe \u201c" + title + "\u201d in words");
      tvNode("p", null, alt, words);
      return {svg: svg, w: w, h: height, readout: line};
    }

    function hover(mark, readoutLine, text) {
      tvNode("title", null, mark, text);
      mark.addEventListener("pointerenter", function () { readoutLine.textContent = text; });
    }

    function normPlot(meta, values, parent) {
      var rows = meta.rows, n = rows.length, at = meta.offsets.norm, base = meta.offsets.norm_base;
      var now = [], then = [], max = 0;
      for (var i = 0; i < n; i++) {
        now.push(values[at + i]); then.push(values[base + i]);
        max = Math.max(max, Number.isFinite(now[i]) ? now[i] : 0, Number.isFinite(then[i]) ? then[i] : 0);
      }
      var words = "Norm at each stage: " + rows.map(function (r, k) { return r[2] + " " + tvNumber(now[k]); }).join("; ") + ".";
      var legend = tvNode("p", {"class": "tv-legend"}, parent);
      tvNode("span", {"class": "tv-key", style: "border-color:" + pal.series[0]}, legend, "this run");
      tvNode("span", {"class": "tv-key tv-dashed", style: "border-color:" + pal.series[1]}, legend, "default block, same input");
      tvNode("span", {"class": "tv-key tv-dotted", style: "border-color:" + pal.reference}, legend, "input's norm");
      var c = chart(parent, "Norm \u2016\u00b7\u2016 at each stage", 250, words);
      var left = 46, right = 12, top = 10, bottom = 62;
      var sx = function (k) { return left + (k + 0.5) * (c.w - left - right) / n; };
      var hi = max > 0 ? max * 1.1 : 1;
      var sy = function (v) { return top + (1 - Math.max(0, Math.min(v, hi)) / hi) * (c.h - top - bottom); };
      var g = tvNode("g", {"class": "tv-axis"}, c.svg);
      for (var t = 0; t <= 4; t++) {
        var v = hi * t / 4, y = sy(v);
        tvNode("line", {x1: left, x2: c.w - right, y1: y, y2: y, "class": "tv-grid"}, g);
        tvNode("text", {x: left - 6, y: y + 4, "text-anchor": "end"}, g, tvNumber(v, 1));
      }
      rows.forEach(function (r, k) {
        tvNode("text", {x: sx(k), y: c.h - bottom + 16, "text-anchor": "end",
                        transform: "rotate(-35 " + sx(k) + " " + (c.h - bottom + 16) + ")"}, g, r[2]);
      });
      var ref = sy(now[0]);
      tvNode("line", {x1: left, x2: c.w - right, y1: ref, y2: ref, stroke: pal.reference, "stroke-dasharray": "2 4", "stroke-width": 2}, c.svg);
      function series(list, colour, dash, widthPx, r, name) {
        var pts = list.map(function (v, k) { return sx(k) + "," + sy(v); }).join(" ");
        tvNode("polyline", {points: pts, fill: "none", stroke: colour, "stroke-width": widthPx, "stroke-dasharray": dash}, c.svg);
        list.forEach(function (v, k) {
          var dot = tvNode("circle", {cx: sx(k), cy: sy(v), r: r, fill: colour, "class": "tv-dot"}, c.svg);
          hover(dot, c.readout, name + ", " + rows[k][2] + ": \u2016\u00b7\u2016 " + tvNumber(v));
        });
      }
      series(then, pal.series[1], "6 4", 2, 4, "default block");
      series(now, pal.series[0], null, 3, 5, "this run");
    }

    function componentBars(meta, values, parent) {
      var key = meta.controls.inspect, row = null;
      meta.rows.forEach(function (r) { if (r[0] === key) row = r; });
      if (!row) return;
      var at = meta.offsets[key], n = row[3], list = [];
      for (var i = 0; i < n; i++) list.push(values[at + i]);
      var letter = key === "blocks.0.mlp.hidden" ? "h" : "x";
      var words = row[1] + ": " + n + " components, " + list.map(function (v) { return tvNumber(v, 3, true); }).join(", ") + ".";
      var c = chart(parent, "Components of the selected stage: " + row[1], 220, words);
      var lo = Math.min(0, Math.min.apply(null, list)), hi = Math.max(0, Math.max.apply(null, list));
      var span = (hi - lo) || 1;
      lo = lo < 0 ? lo - 0.22 * span : 0; hi = hi > 0 ? hi + 0.22 * span : 0;
      var left = 12, right = 12, top = 6, bottom = 24, band = (c.w - left - right) / n;
      var sy = function (v) { return top + (hi - v) / ((hi - lo) || 1) * (c.h - top - bottom); };
      tvNode("line", {x1: left, x2: c.w - right, y1: sy(0), y2: sy(0), stroke: pal.reference}, c.svg);
      list.forEach(function (v, k) {
        var x = left + k * band, y0 = sy(0), y1 = sy(v);
        var text = tvNumber(v, 3, true);
        var bar = tvNode("rect", {x: x + band * 0.15, width: band * 0.7, y: Math.min(y0, y1), height: Math.abs(y1 - y0) || 1,
                                  fill: v > 0 ? pal.positive : v < 0 ? pal.negative : pal.reference}, c.svg);
        hover(bar, c.readout, letter + k + ": " + text);
        if (band >= 40) tvNode("text", {x: x + band / 2, y: v >= 0 ? y1 - 4 : y1 + 14, "text-anchor": "middle", "class": "tv-label"}, c.svg, text);
        tvNode("text", {x: x + band / 2, y: c.h - 6, "text-anchor": "middle", "class": "tv-tick"}, c.svg, letter + k);
      });
    }

    function heatmap(meta, values, parent) {
      var n = meta.positions, at = meta.offsets.pattern;
      var names = [];
      for (var i = 0; i < n; i++) names.push(String(i + 1));
      var words = [];
      for (var q = 0; q < n; q++) {
        var parts = [];
        for (var k = 0; k < n; k++) parts.push(names[k] + " " + tvNumber(values[at + q * n + k]));
        words.push("Query " + names[q] + " reads: " + parts.join(", ") + ".");
      }
      var size = Math.max(18, Math.min(56, Math.floor(((drawWidth || 600) - 70) / n)));
      var c = chart(parent, "Attention weights (query row reads key column)", 40 + n * size + 10, words.join(" "));
      var seq = pal.sequential, left = 50, top = 30, fits = size >= NUMBER_FITS_PX;
      for (var r = 0; r < n; r++) {
        tvNode("text", {x: left - 8, y: top + r * size + size / 2 + 4, "text-anchor": "end", "class": "tv-tick"}, c.svg, "q" + names[r]);
        for (var col = 0; col < n; col++) {
          var v = values[at + r * n + col];
          var bin = Number.isFinite(v) ? Math.min(Math.max(Math.floor(v * seq.length), 0), seq.length - 1) : seq.length - 1;
          var cell = tvNode("rect", {x: left + col * size, y: top + r * size, width: size, height: size,
                                     fill: seq[bin], stroke: pal.cell_line}, c.svg);
          hover(cell, c.readout, "query " + names[r] + ", key " + names[col] + ": weight " + tvNumber(v));
          if (fits) {
            tvNode("text", {x: left + col * size + size / 2, y: top + r * size + size / 2 + 4, "text-anchor": "middle",
                            fill: pal.text_on[bin], "class": "tv-cell", "pointer-events": "none"}, c.svg, tvNumber(v));
          }
        }
      }
      for (var kk = 0; kk < n; kk++) {
        tvNode("text", {x: left + kk * size + size / 2, y: top - 8, "text-anchor": "middle", "class": "tv-tick"}, c.svg, "k" + names[kk]);
      }
    }

    function swigluTable(meta, values, parent) {
      var m = meta.d_mlp, at = meta.offsets.swiglu;
      var wrap = tvNode("div", {"class": "bt-table-wrap"}, parent);
      var table = tvNode("table", {"class": "bt-table swiglu-table"}, wrap);
      tvNode("caption", null, table, "SwiGLU detail");
      var head = tvNode("tr", null, tvNode("thead", null, table));
      ["Hidden unit", "gate", "SiLU(gate)", "value", "SiLU(gate) \u00d7 value"].forEach(function (h) { tvNode("th", {scope: "col"}, head, h); });
      var body = tvNode("tbody", null, table);
      for (var i = 0; i < m; i++) {
        var tr = tvNode("tr", null, body);
        tvNode("th", {scope: "row"}, tr, "h" + i);
        for (var s = 0; s < 4; s++) {
          var text = tvNumber(values[at + s * m + i], 3, true);
          tvNode("td", {"class": "num " + tvSignClass(text)}, tr, text);
        }
      }
    }

    var lastMeta = null, drawWidth = 0;
    function update() {
      var metaText = io.get("meta");
      if (!metaText) return;
      var started = performance.now();
      var meta = JSON.parse(metaText);
      var values = io.get("values") || [];
      lastMeta = meta;
      answered(meta.ack || 0);  // before the controls are shown: a change sent now keeps its input as it is
      drawWidth = Math.floor(root.clientWidth);  // charts are drawn at the width of their place
      showControls(meta);
      live.textContent = meta.announce || "";
      verdict.textContent = (meta.verdict && meta.verdict[0]) || "";
      verdict.className = meta.verdict && meta.verdict[1] ? "bt-" + meta.verdict[1] : "bt-muted";
      var fresh = document.createElement("div");
      fresh.className = "tv-results";
      if (meta.locked) {
        tvNode("p", {"class": "bt-muted bt-locked", role: "status"}, fresh, meta.note);
      } else {
        stageTable(meta, values, fresh);
        normPlot(meta, values, fresh);
        componentBars(meta, values, fresh);
        heatmap(meta, values, fresh);
        swigluTable(meta, values, fresh);
      }
      results.replaceWith(fresh);
      results = fresh;
      // For tests and benchmarks: the drawing is done, and how long it took in this browser.
      el.dispatchEvent(new CustomEvent("tv-drawn", {bubbles: true, composed: true, detail: {ms: performance.now() - started}}));
    }

    var scheduled = false;
    function schedule() {  // meta and values arrive in one message as two changes: draw once
      if (scheduled) return;
      scheduled = true;
      queueMicrotask(function () { scheduled = false; update(); });
    }
    var lastWidth = 0;
    var observer = new ResizeObserver(function () {
      var w = Math.floor(root.clientWidth);
      if (w !== lastWidth) { lastWidth = w; if (lastMeta) schedule(); }
    });
    observer.observe(root);
    update();
    return {update: schedule, remove: function () { observer.disconnect(); }};
  }

  window.btTrace = {mount: mountTraceView, number: tvNumber};
})();
