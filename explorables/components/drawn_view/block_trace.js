// The block trace drawn in the browser (explorables/transformer_block_trace/view.py sends its payload).
// meta (JSON per change): controls' values, locked, note, announce, verdict, error; once unlocked also rows
// [key, label, short name, width], offsets into values, d_mlp, lost (the row where the input is lost) and
// words (each chart's text alternative, written by the server). values: every number, one Float64Array.
// Needs draw.js (window.btDraw) first.

(function () {
  "use strict";
  var D = window.btDraw;
  var SUB = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089";
  var SWIGLU = ["gate", "SiLU(gate)", "value", "SiLU(gate) \u00d7 value"];
  var SWIGLU_LEAD = "Each hidden unit multiplies SiLU(gate) by its value. A gate near 0 (or well below it) lets " +
    "almost nothing through; for a large positive gate SiLU is close to the gate itself, so the unit can pass " +
    "more than its whole value.";

  function sub(i) { return String(i).replace(/\d/g, function (d) { return SUB[Number(d)]; }); }
  function slice(values, at, n) { var out = []; for (var i = 0; i < n; i++) out.push(values[at + i]); return out; }
  function finite(list) { return list.filter(function (v) { return Number.isFinite(v); }); }

  D.views.blockTrace = function (ctx) {
    var N = D.node, spec = ctx.spec, pal = ctx.palette;
    var side = N("div", {"class": "dv-side"}, ctx.root);
    var form = D.controlsCard(side, "Controls");
    var inspectSpec = null;
    (spec.controls || []).forEach(function (c) {
      if (c.name === "inspect") { inspectSpec = c; return; }
      ctx.control(form, c);
    });
    var main = N("div", {"class": "dv-main"}, ctx.root);
    var live = N("p", {"class": "bt-live", role: "status", "aria-live": "polite"}, main);
    var verdict = N("p", {"class": "bt-muted"}, main);
    var top = N("div", {"class": "dv-place"}, main);
    // The stage picker above the chart it drives; built once, so focus stays on it while the results redraw.
    var pick = inspectSpec ? ctx.control(main, inspectSpec) : null;
    var comp = N("div", {"class": "dv-place"}, main);
    var below = N("div", {"class": "dv-place"}, main);

    function fresh(place) { var p = place.cloneNode(false); place.replaceWith(p); return p; }

    function stageTable(parent, meta, values) {
      var width = 0, norms = meta.offsets.norm;
      meta.rows.forEach(function (r) { width = Math.max(width, r[3]); });
      var header = ["Stage"];
      for (var i = 0; i < width; i++) header.push("x" + i);
      header.push("\u2016\u00b7\u2016");
      var rows = meta.rows.map(function (r, n) {
        var list = slice(values, meta.offsets[r[0]], r[3]);
        while (list.length < width) list.push(null);
        list.push(values[norms + n]);
        var cls = [];
        if (r[0] === meta.lost) cls.push("lost");
        if (r[0] === meta.controls.inspect) cls.push("current");
        return {label: r[1], values: list, plain: [width], note: r[0] === meta.lost ? "input lost here" : null,
                className: cls.join(" "), current: r[0] === meta.controls.inspect};
      });
      var trs = D.table(parent, "One forward pass, stage by stage (rows are stages of one token, not separate tokens)",
                        header, rows, "stage-table");
      trs.forEach(function (tr, n) {
        tr.addEventListener("click", function () { if (!meta.locked) ctx.send("inspect", meta.rows[n][0]); });
      });
    }

    function normChart(parent, meta, values) {
      var rows = meta.rows, n = rows.length;
      var now = slice(values, meta.offsets.norm, n), then = slice(values, meta.offsets.norm_base, n);
      var hi = Math.max.apply(null, [0].concat(finite(now), finite(then)));
      hi = hi > 0 ? hi * 1.1 : 1;
      var c = D.chart(parent, {title: "Norm \u2016\u00b7\u2016 at each stage", height: 270, width: ctx.width,
                               words: meta.words.norm, filename: "transformer-block-trace-norms",
                               legend: [{label: "this run", colour: pal.series[0]},
                                        {label: "default block, same input", colour: pal.series[1], dash: "dashed"},
                                        {label: "input's norm", colour: pal.reference, dash: "dotted"}]});
      var left = 58, right = 12, topPad = 10, bottom = 70;
      var sx = function (k) { return left + (k + 0.5) * (c.w - left - right) / n; };
      var sy = function (v) { return topPad + (1 - Math.max(0, Math.min(v, hi)) / hi) * (c.h - topPad - bottom); };
      var g = D.yAxis(c, 0, hi, sy, left, right, "\u2016\u00b7\u2016");
      rows.forEach(function (r, k) {
        var y = c.h - bottom + 14;
        N("text", {x: sx(k), y: y, "text-anchor": "end", "class": "dv-tick",
                   transform: "rotate(-35 " + sx(k) + " " + y + ")"}, g, r[2]);
      });
      if (Number.isFinite(now[0])) {
        N("line", {x1: left, x2: c.w - right, y1: sy(now[0]), y2: sy(now[0]), stroke: pal.reference,
                   "stroke-dasharray": "2 4", "stroke-width": 2, "class": "dv-mark"}, c.svg);
      }
      function series(list, colour, dash, width, r, name) {
        var pts = list.map(function (v, k) { return sx(k) + "," + sy(v); }).join(" ");
        N("polyline", {points: pts, fill: "none", stroke: colour, "stroke-width": width, "stroke-dasharray": dash,
                       "class": "dv-mark"}, c.svg);
        list.forEach(function (v, k) {
          var dot = N("circle", {cx: sx(k), cy: sy(v), r: r, fill: colour, "class": "dv-mark dv-dot"}, c.svg);
          D.hover(dot, c.readout, name + ", " + rows[k][2] + ": \u2016\u00b7\u2016 " + D.number(v));
        });
      }
      series(then, pal.series[1], "6 4", 2, 4, "default block");
      series(now, pal.series[0], null, 3, 5, "this run");
    }

    // Bars around a zero line; labels beyond each bar's end where the bars are wide enough to hold them.
    function bars(c, groups, left, right, topPad, bottom, axisLabel) {
      var all = [];
      groups.forEach(function (g) { g.bars.forEach(function (b) { if (Number.isFinite(b.v)) all.push(b.v); }); });
      var lo = Math.min.apply(null, [0].concat(all)), hi = Math.max.apply(null, [0].concat(all));
      var span = (hi - lo) || 1, labelled = groups[0] && groups[0].label;
      var room = labelled ? 0.22 : 0.05;  // beyond the longest bars: for their labels, or a little air
      lo = lo < 0 ? lo - room * span : 0; hi = hi > 0 ? hi + room * span : (lo < 0 ? 0 : 1);
      var sy = function (v) { return topPad + (hi - Math.max(lo, Math.min(hi, v))) / (hi - lo) * (c.h - topPad - bottom); };
      D.yAxis(c, lo, hi, sy, left, right, axisLabel);
      var band = (c.w - left - right) / groups.length;
      groups.forEach(function (g, k) {
        var x0 = left + k * band, inner = band * 0.8 / g.bars.length;
        g.bars.forEach(function (b, j) {
          var x = x0 + band * 0.1 + j * inner, y0 = sy(0), y1 = sy(Number.isFinite(b.v) ? b.v : 0);
          var rect = N("rect", {x: x + inner * 0.05, width: inner * 0.9, y: Math.min(y0, y1), height: Math.max(1, Math.abs(y1 - y0)),
                                fill: b.colour, "class": "dv-mark"}, c.svg);
          D.hover(rect, c.readout, b.hover);
          if (labelled && inner >= 48) {  // 4 px clear of its bar, above a rise, below a fall (12 px text)
            N("text", {x: x + inner / 2, y: b.v >= 0 ? y1 - 7 : y1 + 16, "text-anchor": "middle", "class": "dv-label"},
              c.svg, D.number(b.v, 3, true));
          }
        });
        N("text", {x: x0 + band / 2, y: c.h - bottom + 16, "text-anchor": "middle", "class": "dv-tick"}, c.svg, g.name);
      });
      N("line", {x1: left, x2: c.w - right, y1: sy(0), y2: sy(0), stroke: pal.reference, "class": "dv-mark dv-zero"}, c.svg);
    }

    function componentChart(parent, meta, values) {
      var key = meta.controls.inspect, row = null;
      meta.rows.forEach(function (r) { if (r[0] === key) row = r; });
      if (!row) return;
      var list = slice(values, meta.offsets[key], row[3]);
      var letter = key === "blocks.0.mlp.hidden" ? "h" : "x";
      var c = D.chart(parent, {title: "Components of the selected stage: " + row[1], height: 240, width: ctx.width,
                               words: meta.words.comp, filename: "transformer-block-trace-components"});
      bars(c, list.map(function (v, k) {
        var colour = v > 0 ? pal.positive : v < 0 ? pal.negative : pal.reference;
        return {name: letter + sub(k), label: true,
                bars: [{v: v, colour: colour, hover: letter + sub(k) + ": " + D.number(v, 3, true)}]};
      }), 58, 12, 10, 26, "value (orange > 0, blue < 0)");
    }

    function swiglu(parent, meta, values) {
      var m = meta.d_mlp, at = meta.offsets.swiglu;
      N("h2", {"class": "bt-h2"}, parent, "Inside SwiGLU");
      N("p", {"class": "bt-lead"}, parent, SWIGLU_LEAD);
      var c = D.chart(parent, {title: "SwiGLU, hidden unit by hidden unit", height: 280, width: ctx.width,
                               words: meta.words.swiglu, filename: "transformer-block-trace-swiglu",
                               legend: SWIGLU.map(function (name, s) { return {label: name, colour: pal.series[s]}; })});
      var groups = [];
      for (var i = 0; i < m; i++) {
        var unit = "h" + sub(i);
        groups.push({name: unit, bars: SWIGLU.map(function (name, s) {
          var v = values[at + s * m + i];
          return {v: v, colour: pal.series[s], hover: unit + ", " + name + ": " + D.number(v, 3, true)};
        })});
      }
      bars(c, groups, 58, 12, 10, 26, "value");
      var rows = [];
      for (var u = 0; u < m; u++) {
        rows.push({label: "h" + u, values: [0, 1, 2, 3].map(function (s) { return values[at + s * m + u]; })});
      }
      D.table(parent, "SwiGLU detail", ["Hidden unit"].concat(SWIGLU), rows, "swiglu-table");
      var base = meta.offsets.norm_base, now = meta.offsets.norm, diff = meta.offsets.norm_diff;
      D.table(parent, "Compared with the default block (scale 1, residuals added, RMSNorm) on the same input",
              ["Stage", "default block \u2016\u00b7\u2016", "this run \u2016\u00b7\u2016", "\u2016difference\u2016"],
              meta.rows.map(function (r, n) {
                return {label: r[1], values: [values[base + n], values[now + n], values[diff + n]], plain: [0, 1, 2]};
              }), "baseline-table");
    }

    return {
      width: function () { return main.clientWidth; },
      draw: function (meta, values) {
        live.textContent = meta.announce || "";
        verdict.textContent = (meta.verdict && meta.verdict[0]) || "";
        verdict.className = meta.verdict && meta.verdict[1] ? "bt-" + meta.verdict[1] : "bt-muted";
        top = fresh(top); comp = fresh(comp); below = fresh(below);
        if (pick) pick.dvRow.hidden = !!meta.locked;
        if (meta.locked) {
          N("p", {"class": "bt-muted bt-locked", role: "status"}, top, meta.note);
          return;
        }
        stageTable(top, meta, values);
        normChart(top, meta, values);
        componentChart(comp, meta, values);
        swiglu(below, meta, values);
      }
    };
  };
})();
