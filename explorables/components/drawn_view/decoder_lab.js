// The decoder-block lab drawn in the browser (explorables/decoder_block_lab/view.py sends its payload, payload.py
// builds it). spec (once): the controls, each with its panel (0: above the panels), the panels' titles and leads,
// the palette. meta (JSON per change): controls' values, bounds, disabled, locked, errors beside fields, the budget
// message, the trained floor's note, the held lines; once built, per panel its tables (words as they are, a
// number's place in `num`, read from values at `at`), verdicts, sentences, and offsets into values for each chart.
// While the prediction is not committed, invariants, heads and causal are null: their places say what will appear.
// Needs draw.js (window.btDraw) first. Every word, typed ones too, is set as text.

(function () {
  "use strict";
  var D = window.btDraw;
  var DASH = {solid: null, dashed: "7 4", dotted: "2 4", dotdash: "2 4 7 4"};

  function slice(values, at, n) { var out = []; for (var i = 0; i < n; i++) out.push(values[at + i]); return out; }
  function fresh(place) { var p = place.cloneNode(false); place.replaceWith(p); return p; }
  function sci(v) {  // a change far below 0.001 still reads as itself
    if (!Number.isFinite(v)) return D.number(v);
    return v === 0 ? "0" : v.toExponential(3).replace("-", "\u2212");
  }

  // The width a chart gets in `parent` (its content box): the chart is as wide as its place.
  function placeWidth(parent) {
    var cs = getComputedStyle(parent);
    var pad = (parseFloat(cs.paddingLeft) || 0) + (parseFloat(cs.paddingRight) || 0);
    return Math.max(240, Math.floor(parent.clientWidth - pad));
  }

  // A table of the payload: each row's words, its numbers read from values; "—" (no RMS) in line with the numbers,
  // and a row's quiet remark (its aside) after its label, as components/html.py's table() writes them.
  function drawTable(parent, t, values) {
    var rows = t.rows.map(function (r) {
      var cells = r.cells.slice();
      (r.num || []).forEach(function (i, k) { cells[i] = values[r.at + k]; });
      return {label: r.label, values: cells, plain: r.plain, note: r.note, className: r.className, current: r.current};
    });
    var trs = D.table(parent, t.caption, t.header, rows, t.cls);
    var wrap = parent.lastChild;  // a table wider than its place scrolls: then it takes the keyboard's focus too
    if (wrap.scrollWidth > wrap.clientWidth + 1) {
      wrap.setAttribute("tabindex", "0");
      wrap.setAttribute("role", "region");
      wrap.setAttribute("aria-label", t.caption);
    }
    trs.forEach(function (tr, n) {
      var r = t.rows[n];
      if (r.aside) {
        var th = tr.querySelector("th");
        th.appendChild(document.createTextNode(" "));
        D.node("span", {"class": "row-aside"}, th, r.aside);
      }
      Array.prototype.forEach.call(tr.querySelectorAll("td.txt"), function (td) {
        if (td.textContent === "\u2014") td.className = "num none";
      });
    });
    return trs;
  }

  function xAxis(c, ticks, x, y, digits, label) {
    var g = D.node("g", {"class": "dv-axis"}, c.svg);
    ticks.forEach(function (v) {
      D.node("text", {x: x(v), y: y + 14, "text-anchor": "middle"}, g, D.number(v, digits));
    });
    if (label) D.node("text", {x: (x(ticks[0]) + x(ticks[ticks.length - 1])) / 2, y: y + 30, "text-anchor": "middle",
                               "class": "dv-axis-label"}, g, label);
  }

  // A y axis on a log scale: a grid line and a label per decade (every second or third when there are many).
  function logAxis(c, lo, hi, y, left, right, label) {
    var g = D.node("g", {"class": "dv-axis"}, c.svg);
    var a = Math.floor(lo), b = Math.ceil(hi), step = Math.max(1, Math.ceil((b - a) / 6));
    for (var e = a; e <= b; e += step) {
      if (e < lo - 1e-9 || e > hi + 1e-9) continue;
      D.node("line", {x1: left, x2: c.w - right, y1: y(e), y2: y(e), "class": "dv-grid"}, g);
      D.node("text", {x: left - 6, y: y(e) + 4, "text-anchor": "end"}, g, e === 0 ? "1" : "1e" + String(e).replace("-", "\u2212"));
    }
    var mid = (y(lo) + y(hi)) / 2;
    D.node("text", {x: 12, y: mid, "text-anchor": "middle", transform: "rotate(-90 12 " + mid + ")",
                    "class": "dv-axis-label"}, g, label);
  }

  // Lines as polylines broken where a value cannot be drawn (NaN, or 0 on a log axis), with their names on hover.
  function lines(c, list, sx, sy, readout) {
    list.forEach(function (l) {
      var runs = [[]];
      l.xs.forEach(function (xv, i) {
        var yv = l.ys[i];
        if (yv === null || !Number.isFinite(yv)) { if (runs[runs.length - 1].length) runs.push([]); return; }
        runs[runs.length - 1].push(sx(xv).toFixed(1) + "," + sy(yv).toFixed(1));
      });
      runs.forEach(function (run) {
        if (!run.length) return;
        var attrs = {points: run.join(" "), fill: "none", stroke: l.colour, "stroke-width": l.width,
                     "stroke-dasharray": DASH[l.dash] || l.dash || null, "class": "dv-mark dv-line"};
        var p = D.node(run.length > 1 ? "polyline" : "circle", run.length > 1 ? attrs :
          {cx: run[0].split(",")[0], cy: run[0].split(",")[1], r: 3, fill: l.colour, "class": "dv-mark dv-dot"}, c.svg);
        D.hover(p, readout, l.name);
      });
    });
  }

  // Hover anywhere over a chart: the readout names every series at the nearest x.
  function nearest(c, left, right, xs, toX, say) {
    var band = D.node("rect", {x: left, y: 0, width: Math.max(0, c.w - left - right), height: c.h - 36,
                               fill: "transparent", "class": "dv-hover-band"}, c.svg);
    band.addEventListener("pointermove", function (e) {
      var box = c.svg.getBoundingClientRect(), px = (e.clientX - box.left) * c.w / box.width, best = 0;
      xs.forEach(function (x, i) { if (Math.abs(toX(x) - px) < Math.abs(toX(xs[best]) - px)) best = i; });
      c.readout.textContent = say(best);
    });
  }

  D.views.decoderLab = function (ctx) {
    var N = D.node, spec = ctx.spec, pal = ctx.palette;
    var main = N("div", {"class": "dv-main dl-main"}, ctx.root);
    var top = N("div", {"class": "dl-top"}, main);
    var trained = N("div", null, top);
    var live = N("p", {"class": "bt-live dl-live", role: "status", "aria-live": "polite"}, top);
    var topControls = N("div", {"class": "dl-controls"}, top);
    var panels = {};
    (spec.panels || []).forEach(function (p) {
      var sec = D.controlsCard(main, p.n + ". " + p.title, {id: "dl-panel-" + p.n, className: "dl-panel"});
      N("p", {"class": "bt-lead"}, sec, p.lead);
      panels[p.n] = {sec: sec, controls: N("div", {"class": "dl-controls"}, sec)};
    });
    // Panel 3: the buttons in a row under the fields; panel 8: one switch under another.
    var vectorButtons = panels[3] ? N("div", {"class": "dl-buttons"}, panels[3].sec) : null;
    (spec.controls || []).forEach(function (c) {
      var parent = !c.panel ? topControls : c.panel === 3 && c.kind === "button" ? vectorButtons : panels[c.panel].controls;
      if (c.panel === 8) panels[8].controls.classList.add("dl-switches");
      ctx.control(parent, c);
    });
    // Each panel's results go in a place of its own, redrawn per payload; panel 1's budget message and panel 6's
    // under their controls; panel 7's summary above its control.
    var places = {};
    [1, 2, 3, 4, 5, 6, 7, 8].forEach(function (n) {
      if (!panels[n]) return;
      places[n] = N("div", {"class": "dv-place"}, panels[n].sec);
    });
    var workedTop = panels[7] ? N("div", {"class": "dv-place"}, panels[7].sec) : null;
    if (workedTop) panels[7].sec.insertBefore(workedTop, panels[7].controls);
    var depthTop = panels[6] ? N("div", {"class": "dv-place"}, panels[6].sec) : null;
    if (depthTop) panels[6].sec.insertBefore(depthTop, panels[6].controls);

    function held(parent, text) { N("p", {"class": "bt-muted bt-locked dl-held", role: "status"}, parent, text); }

    function budget(parent, meta) {
      if (meta.budget) N("p", {"class": "bt-field-error", role: "alert"}, parent, meta.budget);
    }

    function trainedNote(parent, t) {
      if (!t) return;
      if (t.error) { N("p", {"class": "bt-field-error", role: "alert"}, parent, t.error); return; }
      var box = N("div", {"class": "bt-notice", role: "note"}, parent);
      var p = N("p", null, box);
      N("strong", null, p, "Trained weights:");
      p.appendChild(document.createTextNode(" " + t.lines[0]));
      var q = N("p", null, box, t.lines[1] + " ");
      N("a", {href: t.race}, q, "Back to the race");
      q.appendChild(document.createTextNode(" \u00b7 "));
      N("a", {href: "?"}, q, "The lab with drawn weights");
    }

    // --- panel 2: invariants, stages, heads ---------------------------------------------------------------
    function invariants(parent, inv) {
      var box = N("div", {"class": "dl-invariants", role: "status", "aria-live": "polite"}, parent);
      N("h3", {"class": "bt-h3"}, box, inv.head);
      var ul = N("ul", null, box);
      inv.items.forEach(function (it) {
        var li = N("li", {"class": "dl-" + it[0]}, ul);
        N("span", {"class": "dl-mark"}, li, it[1]);
        li.appendChild(document.createTextNode(" "));
        N("strong", null, li, it[2]);
        li.appendChild(document.createTextNode(": " + it[3]));
      });
    }

    function heads(parent, meta, values) {
      var grid = N("div", {"class": "dl-heads"}, parent);
      var n = meta.labels.length, width = placeWidth(parent);
      var each = meta.heads.length > 1 ? Math.min(width, Math.max(260, Math.floor((width - 16) / 2))) : Math.min(width, 420);
      meta.heads.forEach(function (h) {
        var cell = N("div", {"class": "dl-head"}, grid);
        cell.style.width = each + "px";
        var left = 70, right = 6, top = 6, bottom = 56;
        var size = Math.max(14, Math.min(64, Math.floor((each - left - right) / n)));
        var c = D.chart(cell, {title: h.title, height: top + n * size + bottom, width: each, words: h.words,
                               filename: "decoder-lab-" + h.title.toLowerCase().replace(/[^a-z0-9]+/g, "-")});
        D.heatmap(c, {rows: n, cols: n, size: size, left: left, top: top, rowNames: meta.labels,
                      colNames: meta.labels, palette: pal,
                      value: function (r, k) { return values[h.pattern + r * n + k]; }});
        meta.labels.forEach(function (f, k) {
          var x = left + k * size + size / 2, y = top + n * size + 12;
          N("text", {x: x, y: y, "text-anchor": "end", "class": "dv-tick", transform: "rotate(-35 " + x + " " + y + ")"},
            c.svg, f);
        });
      });
    }

    // --- panel 3: the vector and its two norms, as grouped bars ---------------------------------------------
    function normBars(parent, o, values) {
      var width = placeWidth(parent), n = o.n, k = o.series.length;
      var left = 48, right = 8, top = 8, bottom = 30, height = 260;
      var colours = [pal.series[0], pal.series[1], pal.series[2]];
      var c = D.chart(parent, {title: "The vector and its two norms", altTitle: "The vector and its normalisations",
                               height: height, width: width, words: o.words, filename: "decoder-lab-norms",
                               legend: o.series.map(function (s, i) { return {label: s, colour: colours[i]}; })});
      var all = slice(values, o.bars, n * k).filter(Number.isFinite);
      var lo = Math.min(0, Math.min.apply(null, all.concat([0]))), hi = Math.max(0, Math.max.apply(null, all.concat([0])));
      if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
      var pad = (hi - lo) * 0.08; lo = lo < 0 ? lo - pad : lo; hi += pad;
      var span = height - top - bottom;
      var sy = function (v) { return top + (hi - v) / (hi - lo) * span; };
      D.yAxis(c, lo, hi, sy, left, right, "value");
      var group = (c.w - left - right) / n, bar = Math.min(28, group * 0.8 / k);
      for (var i = 0; i < n; i++) {
        var x0 = left + i * group + (group - bar * k) / 2;
        N("text", {x: left + i * group + group / 2, y: height - bottom + 16, "text-anchor": "middle", "class": "dv-tick"},
          c.svg, "x" + i);
        for (var s = 0; s < k; s++) {
          var v = values[o.bars + s * n + i];
          if (!Number.isFinite(v)) continue;  // NaN: no bar; the table says NaN
          var y0 = sy(Math.max(v, 0)), y1 = sy(Math.min(v, 0));
          var r = N("rect", {x: x0 + s * bar, y: y0, width: Math.max(1, bar - 1), height: Math.max(1, y1 - y0),
                             fill: colours[s], "class": "dv-mark dv-bar"}, c.svg);
          D.hover(r, c.readout, "x" + i + ", " + o.series[s] + ": " + D.number(v, 3, true));
        }
      }
      N("line", {x1: left, x2: c.w - right, y1: sy(0), y2: sy(0), stroke: pal.reference, "class": "dv-mark"}, c.svg);
    }

    // --- panel 4: the activation curves and this trace's points -----------------------------------------------
    function activations(parent, o, values) {
      var width = placeWidth(parent), height = 320, left = 48, right = 10, top = 8, bottom = 40;
      var series = [[pal.series[0], 3, "solid"], [pal.series[5], 3, "dashed"], [pal.series[2], 2, "dotted"]];
      var legend = o.names.map(function (name, i) {
        return {label: name, colour: series[i][0], dash: series[i][2] === "solid" ? null : series[i][2]};
      }).concat([{label: "this trace's pre-activations", colour: pal.ink}]);
      var c = D.chart(parent, {title: "Activations and this trace's points", altTitle: "Activation curves",
                               height: height, width: width, words: o.words, filename: "decoder-lab-activations",
                               legend: legend});
      var xs = slice(values, o.curves, o.n), lim = o.limit;
      var ys = [1, 2, 3].map(function (k) { return slice(values, o.curves + k * o.n, o.n); });
      var px = slice(values, o.points, o.m), py = slice(values, o.points + o.m, o.m);
      var every = ys[0].concat(ys[1], ys[2], py).filter(Number.isFinite);
      var lo = Math.min.apply(null, every.concat([-0.5])), hi = Math.max.apply(null, every.concat([1]));
      var sx = function (v) { return left + (v + lim) / (2 * lim) * (c.w - left - right); };
      var sy = function (v) { return top + (hi - v) / (hi - lo) * (height - top - bottom); };
      D.yAxis(c, lo, hi, sy, left, right, "output");
      xAxis(c, D.ticks(-lim, lim, 6), sx, height - bottom, 0, "pre-activation x");
      N("line", {x1: sx(0), x2: sx(0), y1: top, y2: height - bottom, stroke: pal.reference, "class": "dv-mark"}, c.svg);
      N("line", {x1: left, x2: c.w - right, y1: sy(0), y2: sy(0), stroke: pal.reference, "class": "dv-mark"}, c.svg);
      lines(c, o.names.map(function (name, i) {
        return {xs: xs, ys: ys[i], colour: series[i][0], width: series[i][1], dash: series[i][2], name: name};
      }), sx, sy, c.readout);
      for (var i = 0; i < o.m; i++) {
        if (!Number.isFinite(px[i]) || !Number.isFinite(py[i])) continue;
        var dot = N("circle", {cx: sx(px[i]), cy: sy(py[i]), r: 3.5, fill: pal.ink, "fill-opacity": 0.7,
                               "class": "dv-mark dv-dot"}, c.svg);
        D.hover(dot, c.readout, "pre-activation " + D.number(px[i], 3, true) + ", after activation " +
                D.number(py[i], 3, true));
      }
    }

    // --- panel 5: the causal test ---------------------------------------------------------------------------
    function deltaColour(v, topValue) {
      var seq = pal.sequential;
      if (!Number.isFinite(v)) return "#b3261e";
      if (v === 0) return pal.zero_cell;
      var low = Math.log10(Math.max(topValue, 1e-300)) - 8;  // eight decades below the largest change
      var level = v > 0 ? (Math.log10(v) - low) / 8 : 0;
      return seq[1 + Math.round(Math.min(Math.max(level, 0), 1) * (seq.length - 2))];
    }

    function deltaMap(parent, o, meta, values) {
      var width = placeWidth(parent), left = 78, right = 8, top = 6, bottom = 40, row = 28;
      var cellW = Math.max(1, (width - left - right) / o.d), height = top + o.T * row + bottom;
      var c = D.chart(parent, {title: "|\u0394 output| per position \u00d7 feature", altTitle: "|\u0394 output| per position and feature",
                               height: height, width: width, words: o.words, filename: "decoder-lab-causal"});
      for (var i = 0; i < o.T; i++) {
        N("text", {x: left - 8, y: top + i * row + row / 2 + 4, "text-anchor": "end", "class": "dv-tick"}, c.svg,
          meta.labels[i]);
        for (var j = 0; j < o.d; j++) {
          var v = values[o.delta + i * o.d + j];
          var r = N("rect", {x: left + j * cellW, y: top + i * row, width: cellW, height: row, fill: deltaColour(v, o.top),
                             stroke: o.d <= 64 ? pal.faint : "none", "stroke-opacity": 0.5, "class": "dv-mark dv-heat"}, c.svg);
          D.hover(r, c.readout, "position " + meta.labels[i] + ", feature " + j + ": |\u0394 output| " + sci(v));
        }
      }
      var step = Math.max(1, Math.floor(o.d / 16)), ticks = [];
      for (var t = 0; t < o.d; t += step) ticks.push(t);
      xAxis(c, ticks, function (f) { return left + (f + 0.5) * cellW; }, top + o.T * row, 0, spec.delta_axis);
      if (o.corrupt > 0) {  // the positions before the corrupted one, which must stay exactly 0
        N("rect", {x: left, y: top, width: o.d * cellW, height: o.corrupt * row, fill: "none", stroke: "#1a7f37",
                   "stroke-width": 3, "stroke-dasharray": "7 4", "pointer-events": "none", "class": "dl-earlier"}, c.svg);
      }
      c.readout.after(N("p", {"class": "bt-muted dl-note"}, null, "Rows are positions (the dashed box: the positions " +
        "before the corrupted one, which must stay exactly 0); columns are features."));
    }

    function causal(parent, o, meta, values) {
      var line = N("p", {"class": "dl-badge-line", role: "status", "aria-live": "polite"}, parent);
      N("span", {"class": "dl-badge dl-" + o.badge[0]}, line, o.badge[1]);
      line.appendChild(document.createTextNode(" " + o.badge[2]));
      if (o.prediction) {
        var p = N("p", {"class": "dl-verdict"}, parent, o.prediction[0] + " ");
        N("span", {"class": "bt-" + o.prediction[2]}, p, o.prediction[1]);
      }
      var row = N("div", {"class": "dl-beside"}, parent);
      var first = N("div", {"class": "dl-first"}, row), second = N("div", {"class": "dl-second"}, row);
      drawTable(first, o.table, values);
      deltaMap(second, o, meta, values);
    }

    // --- panel 6: depth, on log axes ---------------------------------------------------------------------------
    function depthChart(parent, o, key, title, label, values) {
      var width = placeWidth(parent), height = 340, left = 56, right = 10, top = 8, bottom = 40;
      var legend = o.lines.map(function (l) {
        return {label: l.name + (l.current ? " (current)" : ""), colour: pal.series[l.series],
                dash: l.dash === "solid" ? null : l.dash === "dotted" ? "dotted" : "dashed"};
      });
      var c = D.chart(parent, {title: title, height: height, width: width, words: [], filename: "decoder-lab-" + key,
                               legend: legend});
      var all = [];
      var data = o.lines.map(function (l) {
        var ys = slice(values, l[key], l.n).map(function (v) { return Number.isFinite(v) && v > 0 ? Math.log10(v) : null; });
        ys.forEach(function (v) { if (v !== null) all.push(v); });
        return ys;
      });
      var lo = all.length ? Math.min.apply(null, all) : -1, hi = all.length ? Math.max.apply(null, all) : 1;
      if (hi - lo < 0.5) { lo -= 0.5; hi += 0.5; }
      lo -= (hi - lo) * 0.05; hi += (hi - lo) * 0.05;
      var x0 = 0.5, x1 = o.blocks + 1.5;
      var sx = function (v) { return left + (v - x0) / (x1 - x0) * (c.w - left - right); };
      var sy = function (v) { return top + (hi - v) / (hi - lo) * (height - top - bottom); };
      logAxis(c, lo, hi, sy, left, right, label);
      xAxis(c, D.ticks(1, o.blocks + 1, 6).filter(function (v) { return v % 1 === 0; }), sx, height - bottom, 0,
            "block's input (the last point: the output)");
      var xs = [];
      for (var b = 1; b <= o.lines[0].n; b++) xs.push(b);
      nearest(c, left, right, xs, sx, function (i) {
        return "block " + xs[i] + ": " + o.lines.map(function (l) { return l.name + " " + sci(values[l[key] + i]); }).join("; ");
      });
      // the current arrangement last, so it is drawn over the others
      var order = o.lines.map(function (l, k) { return k; }).sort(function (a, b) { return o.lines[a].current - o.lines[b].current; });
      lines(c, order.map(function (k) {
        var l = o.lines[k];
        return {xs: xs, ys: data[k], colour: pal.series[l.series], width: l.current ? 5 : 2, dash: l.dash,
                name: l.name + (l.current ? " (current)" : "")};
      }), sx, sy, c.readout);
      return c;
    }

    function depth(parent, o, values) {
      var row = N("div", {"class": "dl-beside"}, parent);
      var a = N("div", {"class": "dl-half"}, row), b = N("div", {"class": "dl-half"}, row);
      var ca = depthChart(a, o, "rms", "Residual stream RMS entering each block", "RMS of the stream (log scale)", values);
      var cb = depthChart(b, o, "grad", "\u2016\u2202L/\u2202stream\u2016 at each block's input", "gradient norm (log scale)", values);
      // One text alternative for both (the server's sentences cover both charts)
      [ca, cb].forEach(function (c) { var d = c.svg.parentNode.querySelector("details.alt-text"); if (d) d.remove(); });
      var alt = N("details", {"class": "alt-text"}, parent);
      N("summary", null, alt, "Describe \u201cResidual RMS and gradient norm with depth\u201d in words");
      N("p", null, alt, o.words.join(" "));
      drawTable(parent, o.table, values);
    }

    function symptoms(parent, list) {
      if (typeof list === "string") {
        N("p", {"class": "bt-muted dl-symptoms", role: "status"}, parent, list);
        return;
      }
      var box = N("div", {"class": "dl-symptoms", role: "status", "aria-live": "polite"}, parent);
      N("h3", {"class": "bt-h3"}, box, "Symptoms now");
      var ul = N("ul", null, box);
      list.forEach(function (it) {
        var li = N("li", null, ul);
        N("strong", null, li, it[0]);
        li.appendChild(document.createTextNode(": " + it[1]));
      });
    }

    return {
      width: function () { return main.clientWidth; },
      draw: function (meta, values) {
        trained = fresh(trained);
        trainedNote(trained, meta.trained);
        for (var n in places) places[n] = fresh(places[n]);
        if (workedTop) workedTop = fresh(workedTop);
        if (depthTop) depthTop = fresh(depthTop);
        budget(places[1], meta);
        if (meta.building) {
          live.textContent = "Building the lab\u2026";
          return;
        }
        live.textContent = meta.live;
        // 1. shapes
        drawTable(places[1], meta.shapes, values);
        drawTable(places[1], meta.params, values);
        N("p", {"class": "dl-answer"}, places[1], meta.exercise);
        // 2. design choices
        if (meta.invariants) invariants(places[2], meta.invariants);
        else held(places[2], meta.held[0]);
        drawTable(places[2], meta.stages, values);
        if (meta.heads) heads(places[2], meta, values);
        else held(places[2], meta.held[1]);
        // 3. norms
        var p3 = N("div", {"class": "dl-beside"}, places[3]);
        var n1 = N("div", {"class": "dl-first"}, p3), n2 = N("div", {"class": "dl-second"}, p3);
        N("p", {"class": "dl-verdict", role: "status"}, n1, meta.norms.verdict);
        drawTable(n1, meta.norms.table, values);
        normBars(n2, meta.norms, values);
        // 4. activations
        activations(places[4], meta.acts, values);
        // 5. causal safety
        if (meta.causal) causal(places[5], meta.causal, meta, values);
        else held(places[5], meta.held[2]);
        // 6. depth
        N("p", {"class": (meta.depth.wide ? "bt-notice" : "bt-muted dl-note") + " dl-depth-setup"}, depthTop, meta.depth.setup);
        budget(places[6], meta);
        N("p", {"class": "dl-verdict", role: "status", "aria-live": "polite"}, places[6], meta.depth.status);
        if (meta.depth.nan) N("p", {"class": "bt-field-error"}, places[6], meta.depth.nan);
        depth(places[6], meta.depth, values);
        // 7. worked example
        if (meta.worked.error) N("p", {"class": "bt-notice", role: "status"}, workedTop, meta.worked.error);
        else {
          drawTable(workedTop, meta.worked.summary, values);
          meta.worked.detail.forEach(function (t) { drawTable(places[7], t, values); });
        }
        // 8. break it
        symptoms(places[8], meta.symptoms);
      }
    };
  };
})();
