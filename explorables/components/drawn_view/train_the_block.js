// The race drawn in the browser (explorables/train_the_block/view.py sends its payload, payload.py builds it).
// meta (JSON per change or slice): controls' values, options, disabled, what Play says, whether Keep training shows,
// the task's note, the sides, the status and verdict, the progress line, the race in words; once a step is taken
// `curves` (offsets into values: each side's losses, one per step from step 1, its held-out readings as (step, %)
// pairs, the depth plot's two rows), and once the models were looked inside `look` (answers, both maps' offsets
// and words, the stage table's rows with their offsets). values: every number, one Float64Array.
// Needs draw.js (window.btDraw) first. Every word is set as text.

(function () {
  "use strict";
  var D = window.btDraw;
  var TINY = 1e-12;  // the least a log axis shows (plots.FLOOR_TINY)

  function at(values, i) { return values[i]; }

  D.views.trainTheBlock = function (ctx) {
    var N = D.node, spec = ctx.spec, pal = ctx.palette;
    var sides = (spec.sides || [{series: 0, dash: ""}, {series: 5, dash: "6 4"}]).map(function (s) {
      return {colour: pal.series[s.series % pal.series.length], dash: s.dash || null};
    });
    var side = N("div", {"class": "dv-side"}, ctx.root);
    var form = D.controlsCard(side, "The race");
    var main = N("div", {"class": "dv-main"}, ctx.root);
    var taskNote = N("p", {"class": "bt-muted"}, main);
    var statusLine = N("p", {"class": "bt-live", role: "status", "aria-live": "polite"}, main);
    var alertLine = N("p", {"class": "bt-field-error", role: "alert"}, main);
    var verdict = N("p", null, main);
    var keepPlace = N("div", {"class": "tb-keep"}, main);
    var progress = N("p", {"class": "bt-muted"}, main);
    var curves = N("div", {"class": "dv-place"}, main);
    var words = N("ul", {"class": "bt-alt"}, main);
    var look = N("section", {"class": "tb-inside", "aria-label": "Inside the two models"}, main);
    N("h2", {"class": "bt-h2"}, look, "Inside the two models");
    var lookNote = N("p", {"class": "bt-muted"}, look);
    var lookControls = N("div", {"class": "tb-look"}, look);
    var inside = N("div", {"class": "dv-place"}, look);
    var inputs = {}, sidesNote = null, buttons = null;
    (spec.controls || []).forEach(function (c) {
      var parent = c.group === "keep" ? keepPlace : c.group === "look" ? lookControls : form;
      if (c.row) {
        if (!buttons) buttons = N("div", {"class": "tb-buttons"}, form);
        parent = buttons;
      }
      inputs[c.name] = ctx.control(parent, c);
      if (c.name === "difference") sidesNote = N("p", {"class": "bt-muted tb-sides"}, form);
    });
    // Play says what a press does; its words change at once, the server's answer follows (and may set them back).
    if (inputs.play) {
      inputs.play.addEventListener("click", function () {
        if (!inputs.play.disabled) inputs.play.textContent = inputs.play.textContent === "Play" ? "Pause" : "Play";
      });
    }

    function fresh(place) { var p = place.cloneNode(false); place.replaceWith(p); return p; }

    // A chart drawn again under the pointer (every slice while the race plays) keeps showing what the pointer is
    // on: a step's loss or reading never changes within a race, so a curve keeps its words; a map's cell shows its
    // new weight. [{title, text, cell}] of the charts in `place`, in order (null: not hovered) ...
    function hovered(place) {
      return Array.prototype.map.call(place.querySelectorAll("figure.dv-chart"), function (f) {
        var r = f.querySelector(".dv-readout"), cell = f.querySelector(".dv-heat:hover");
        if (!f.matches(":hover") || !r.textContent.trim()) return null;
        return {title: f.querySelector("figcaption").textContent, text: r.textContent,
                cell: cell ? cell.getAttribute("data-cell") : null};
      });
    }

    // ... written back into the charts drawn since at the same places.
    function rehover(place, kept) {
      var figures = place.querySelectorAll("figure.dv-chart");
      kept.forEach(function (k, i) {
        var f = figures[i];
        if (!k || !f) return;
        var r = f.querySelector(".dv-readout");
        if (k.cell) {
          var cell = f.querySelector('.dv-heat[data-cell="' + k.cell + '"] title');
          if (cell) r.textContent = cell.textContent;
        } else if (f.querySelector("figcaption").textContent === k.title) {
          r.textContent = k.text;
        }
      });
    }

    function setText(el, text) { if (el.textContent !== text) el.textContent = text; }

    // The width a chart gets in `parent` (its content box): the chart is as wide as its place.
    function placeWidth(parent) {
      var cs = getComputedStyle(parent);
      var pad = (parseFloat(cs.paddingLeft) || 0) + (parseFloat(cs.paddingRight) || 0);
      return Math.max(240, Math.floor(parent.clientWidth - pad));
    }

    // A log axis from lo to hi (both > 0): a grid line at each power of ten, and at 2 and 5 times it when the
    // span is short; y(v) maps a value to the SVG's y.
    function logAxis(c, lo, hi, y, left, right, label) {
      var g = N("g", {"class": "dv-axis"}, c.svg);
      var a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi)), list = [];
      [[1, 2, 5], [1, 3], [1]].some(function (steps) {
        list = [];
        for (var e = a; e <= b; e++) {
          steps.forEach(function (m) { var v = m * Math.pow(10, e); if (v >= lo * 0.999 && v <= hi * 1.001) list.push(v); });
        }
        return list.length <= 8;
      });
      var every = Math.max(1, Math.ceil(list.length / 8));
      list.forEach(function (v, k) {
        if (k % every) return;
        N("line", {x1: left, x2: c.w - right, y1: y(v), y2: y(v), "class": "dv-grid"}, g);
        var digits = Math.max(0, Math.min(12, -Math.floor(Math.log10(v) + 1e-9)));
        var text = v < 1e-3 ? v.toExponential(0).replace("-", "\u2212") : D.number(v, digits);
        N("text", {x: left - 6, y: y(v) + 4, "text-anchor": "end"}, g, text);
      });
      if (label) {
        var mid = (y(lo) + y(hi)) / 2;
        N("text", {x: 12, y: mid, "text-anchor": "middle", transform: "rotate(-90 12 " + mid + ")",
                   "class": "dv-axis-label"}, g, label);
      }
    }

    // A log axis's ends around lo..hi (> 0): the nearest 1, 2 or 5 times a power of ten outside them.
    function logSpan(lo, hi) {
      lo = Math.max(lo, TINY);
      var e = Math.floor(Math.log10(lo)), low = Math.pow(10, e);
      [2, 5].forEach(function (m) { if (m * Math.pow(10, e) <= lo) low = m * Math.pow(10, e); });
      var f = Math.floor(Math.log10(hi)), high = Math.pow(10, f + 1);
      [5, 2, 1].forEach(function (m) { if (m * Math.pow(10, f) >= hi) high = m * Math.pow(10, f); });
      if (high <= low) high = low * 10;
      return [low, high];
    }

    // An x axis under the plot: integer ticks from lo to hi, and its label.
    function xAxis(c, lo, hi, x, bottom, label) {
      var g = N("g", {"class": "dv-axis"}, c.svg);
      D.ticks(lo, hi, Math.max(2, Math.floor(c.w / 90))).forEach(function (v) {
        if (Math.abs(v - Math.round(v)) > 1e-6) return;  // steps and depths are whole numbers
        v = Math.round(v);
        N("text", {x: x(v), y: c.h - bottom + 16, "text-anchor": "middle"}, g, D.number(v, 0));
      });
      N("text", {x: (x(lo) + x(hi)) / 2, y: c.h - 4, "text-anchor": "middle", "class": "dv-axis-label"}, g, label);
    }

    // A side's line through its finite points (a diverged model's NaN ends it): one polyline per run of points.
    function line(c, pts, colour, dash) {
      var run = [];
      function flush() {
        if (run.length > 1) {
          N("polyline", {points: run.join(" "), fill: "none", stroke: colour, "stroke-width": 2, "stroke-dasharray": dash,
                         "class": "dv-mark", "pointer-events": "none"}, c.svg);
        }
        run = [];
      }
      pts.forEach(function (p) { if (p) run.push(p[0].toFixed(1) + "," + p[1].toFixed(1)); else flush(); });
      flush();
    }

    function reference(c, yv, left, right, dash, name) {
      var mark = N("line", {x1: left, x2: c.w - right, y1: yv, y2: yv, stroke: pal.reference, "stroke-width": 1.5,
                            "stroke-dasharray": dash, "class": "dv-mark"}, c.svg);
      D.hover(mark, c.readout, name);
    }

    // Hover anywhere over the plot: the nearest step's values of both sides, in the line under the chart.
    function stepHover(c, left, right, top, bottom, x0, x1, say) {
      var pad = N("rect", {x: left, y: top, width: Math.max(1, c.w - left - right), height: Math.max(1, c.h - top - bottom),
                           fill: "transparent", "class": "tb-hover"}, c.svg);
      pad.addEventListener("pointermove", function (e) {
        var box = c.svg.getBoundingClientRect();
        var px = (e.clientX - box.left) * (c.w / box.width);
        var step = Math.round(x0 + (px - left) / (c.w - left - right) * (x1 - x0));
        c.readout.textContent = say(Math.max(x0, Math.min(x1, step)));
      });
    }

    function lossChart(parent, meta, values) {
      var cv = meta.curves, names = meta.names;
      var width = placeWidth(parent), left = 58, right = 12, top = 8, bottom = 40;
      var sentences = ["Training loss of both models, one point a step, on a log scale; guessing gives a loss of " +
                       D.number(cv.chance) + "."].concat(meta.words);
      var c = D.chart(parent, {title: "Training loss (log scale)", height: 260, width: width, words: sentences,
                               filename: "race-training-loss",
                               legend: [{label: names[0], colour: sides[0].colour},
                                        {label: names[1], colour: sides[1].colour, dash: "dashed"},
                                        {label: "loss of guessing", colour: pal.reference, dash: "dotted"}]});
      var n = Math.max(cv.sides[0].n, cv.sides[1].n, 2), lo = Infinity, hi = cv.chance;
      cv.sides.forEach(function (s) {
        for (var k = 0; k < s.n; k++) {
          var v = at(values, s.loss + k);
          if (Number.isFinite(v) && v > 0) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
        }
      });
      if (!Number.isFinite(lo)) lo = cv.chance / 10;
      var span = logSpan(lo, hi); lo = span[0]; hi = span[1];
      var x = function (s) { return left + (s - 1) / (n - 1) * (c.w - left - right); };
      var y = function (v) {
        var t = (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo));
        return top + (1 - Math.min(1, t)) * (c.h - top - bottom);
      };
      logAxis(c, lo, hi, y, left, right, "cross-entropy (lower is better)");
      xAxis(c, 1, n, x, bottom, "step");
      reference(c, y(cv.chance), left, right, "2 3", "loss of guessing: " + D.number(cv.chance));
      cv.sides.forEach(function (s, i) {
        var pts = [];
        for (var k = 0; k < s.n; k++) {
          var v = at(values, s.loss + k);
          pts.push(Number.isFinite(v) ? [x(k + 1), y(v)] : null);
        }
        line(c, pts, sides[i].colour, sides[i].dash);
      });
      stepHover(c, left, right, top, bottom, 1, n, function (step) {
        return "step " + step + ": " + cv.sides.map(function (s, i) {
          return names[i] + " " + (step <= s.n ? D.number(at(values, s.loss + step - 1)) : "\u2014");
        }).join(", ");
      });
    }

    function accuracyChart(parent, meta, values) {
      var cv = meta.curves, names = meta.names;
      var width = placeWidth(parent), left = 58, right = 12, top = 8, bottom = 40;
      var n = Math.max(cv.sides[0].n, cv.sides[1].n, 2);
      var said = ["Held-out accuracy of both models, read every few steps; the race is to " + meta.target_text + "."];
      cv.sides.forEach(function (s, i) {
        var parts = [];
        for (var k = 0; k < s.n_held; k++) {
          parts.push("step " + at(values, s.held + 2 * k) + " " + D.number(at(values, s.held + 2 * k + 1), 1) + " %");
        }
        said.push(names[i] + ": " + (parts.length ? parts.join(", ") : "no reading yet") + ".");
      });
      var c = D.chart(parent, {title: "Held-out accuracy: the race is to " + meta.target_text, height: 240, width: width,
                               words: said, altTitle: "Held-out accuracy", filename: "race-held-out-accuracy",
                               legend: [{label: names[0], colour: sides[0].colour},
                                        {label: names[1], colour: sides[1].colour, dash: "dashed"},
                                        {label: "the target, " + meta.target_text, colour: pal.reference, dash: "dashed"}]});
      var x = function (s) { return left + (s - 1) / (n - 1) * (c.w - left - right); };
      var y = function (v) { return top + (1 - Math.max(0, Math.min(100, v)) / 100) * (c.h - top - bottom); };
      D.yAxis(c, 0, 100, y, left, right, "% right");
      xAxis(c, 1, n, x, bottom, "step");
      reference(c, y(cv.target), left, right, "6 4", "the target: " + meta.target_text);
      cv.sides.forEach(function (s, i) {
        var pts = [];
        for (var k = 0; k < s.n_held; k++) pts.push([x(at(values, s.held + 2 * k)), y(at(values, s.held + 2 * k + 1))]);
        line(c, pts, sides[i].colour, sides[i].dash);
        for (k = 0; k < s.n_held; k++) {
          var step = at(values, s.held + 2 * k), v = at(values, s.held + 2 * k + 1);
          var dot = N("circle", {cx: x(step), cy: y(v), r: 3.5, fill: sides[i].colour, "class": "dv-mark dv-dot"}, c.svg);
          D.hover(dot, c.readout, names[i] + ", step " + step + ": " + D.number(v, 1) + " %");
        }
      });
    }

    function depthChart(parent, meta, values) {
      var cv = meta.curves, names = meta.names, n = cv.n_depth;
      var width = placeWidth(parent), left = 64, right = 12, top = 8, bottom = 40;
      var lo = Infinity, hi = 0, said = ["The gradient \u2016\u2202loss/\u2202stream\u2016 entering each floor at " +
                                         "each model's latest step, on a log scale (depth 0: the embeddings; last: the output)."];
      [0, 1].forEach(function (i) {
        var parts = [];
        for (var d = 0; d < n; d++) {
          var v = at(values, cv.depth + i * n + d);
          if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); parts.push("depth " + d + " " + v.toExponential(2).replace("-", "\u2212")); }
        }
        said.push(names[i] + ": " + parts.join(", ") + ".");
      });
      var c = D.chart(parent, {title: "Gradient reaching each floor now (log)", height: 240, width: width, words: said,
                               altTitle: "Gradient reaching each floor", filename: "race-gradient-by-depth",
                               legend: [{label: names[0], colour: sides[0].colour},
                                        {label: names[1], colour: sides[1].colour, dash: "dashed"}]});
      if (!(hi > 0)) { lo = 1e-3; hi = 1; }
      var span = logSpan(lo, hi); lo = span[0]; hi = span[1];
      var x = function (d) { return left + (n > 1 ? d / (n - 1) : 0.5) * (c.w - left - right); };
      var y = function (v) {
        var t = (Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo));
        return top + (1 - Math.min(1, t)) * (c.h - top - bottom);
      };
      logAxis(c, lo, hi, y, left, right, "\u2016\u2202loss/\u2202stream\u2016");
      xAxis(c, 0, Math.max(1, n - 1), x, bottom, "depth (0: the embeddings; last: the output)");
      [0, 1].forEach(function (i) {
        var pts = [];
        for (var d = 0; d < n; d++) {
          var v = at(values, cv.depth + i * n + d);
          pts.push(Number.isFinite(v) ? [x(d), y(v)] : null);
        }
        line(c, pts, sides[i].colour, sides[i].dash);
        for (d = 0; d < n; d++) {
          var w = at(values, cv.depth + i * n + d);
          if (!Number.isFinite(w)) continue;
          var dot = N("circle", {cx: x(d), cy: y(w), r: 3.5, fill: sides[i].colour, "class": "dv-mark dv-dot"}, c.svg);
          D.hover(dot, c.readout, names[i] + ", depth " + d + ": " + w.toExponential(3).replace("-", "\u2212"));
        }
      });
    }

    function mapChart(parent, lk, m, values) {
      var n = lk.factors.length, left = 70, top = 6, bottom = 56, right = 8;
      var width = placeWidth(parent);
      var size = Math.max(12, Math.min(48, Math.floor((width - left - right) / n)));
      var c = D.chart(parent, {title: m.title, altTitle: m.title + ": attention weights", height: top + n * size + bottom,
                               width: width, words: m.words, filename: "race-attention-" + m.title.slice(0, 1)});
      D.heatmap(c, {rows: n, cols: n, size: size, left: left, top: top, rowNames: lk.factors, colNames: lk.factors,
                    palette: pal, value: function (r, k) { return at(values, m.at + r * n + k); }});
      lk.factors.forEach(function (f, k) {
        var x = left + k * size + size / 2, y = top + n * size + 12;
        N("text", {x: x, y: y, "text-anchor": "end", "class": "dv-tick", transform: "rotate(-35 " + x + " " + y + ")"},
          c.svg, f);
      });
    }

    // A wide table scrolls sideways in its own box on a phone: the box takes the keyboard's focus (arrow keys
    // scroll it) and is named by the table's caption.
    function scrollable(parent, caption) {
      var wrap = parent.lastChild;
      wrap.setAttribute("tabindex", "0");
      wrap.setAttribute("role", "region");
      wrap.setAttribute("aria-label", caption);
    }

    function stageTable(parent, t, values) {
      if (t.missing) { N("p", {"class": "bt-muted"}, parent, t.missing); return; }
      var any = false;
      var rows = t.rows.map(function (r) {
        var first = [];
        for (var i = 0; i < t.header.length - 5; i++) first.push(i < r[4] ? at(values, r[3] + 1 + i) : null);
        if (r[7]) any = true;
        return {label: r[0], values: [r[1], r[2], r[7] ? "\u2014" : at(values, r[3])].concat(first, [r[5]]),
                plain: [2], className: r[6] ? "current" : null, current: r[6]};
      });
      D.table(parent, t.caption, t.header, rows, "tb-stages");
      scrollable(parent, t.caption);
      if (any) N("p", {"class": "bt-muted"}, parent, t.no_rms);
    }

    function drawInside(meta, values) {
      var lk = meta.look;
      inside = fresh(inside);
      setText(lookNote, lk ? lk.note : meta.look_first);
      if (!lk) return;
      var answers = lk.answers.map(function (r) { return {label: r[0], values: r[1]}; });
      D.table(inside, lk.answers_caption, [""].concat(lk.positions), answers, "tb-answers");
      scrollable(inside, lk.answers_caption);
      var maps = N("div", {"class": "tb-maps"}, inside);
      var places = lk.maps.map(function () { return N("div", {"class": "tb-map"}, maps); });
      lk.maps.forEach(function (m, i) { mapChart(places[i], lk, m, values); });
      stageTable(inside, lk.table, values);
    }

    var lastInside = null;
    return {
      width: function () { return main.clientWidth; },
      draw: function (meta, values) {
        setText(taskNote, "");
        taskNote.replaceChildren();
        N("strong", null, taskNote, meta.task[0]);
        taskNote.appendChild(document.createTextNode(" " + meta.task[1]));
        if (sidesNote) setText(sidesNote, meta.sides);
        var st = meta.status;
        setText(statusLine, st.alert ? "" : st.text);
        setText(alertLine, st.alert ? st.text : "");
        alertLine.hidden = !st.alert;
        setText(verdict, st.verdict ? st.verdict[0] : "");
        verdict.className = st.verdict ? "bt-" + st.verdict[1] : "";
        verdict.hidden = !st.verdict;
        if (inputs.play) setText(inputs.play, meta.play);
        if (inputs.keep) inputs.keep.dvRow.hidden = !meta.keep;
        setText(progress, meta.progress);
        progress.hidden = !meta.progress;
        words.replaceChildren();
        meta.words.forEach(function (w) { N("li", null, words, w); });
        var kept = hovered(curves);
        curves = fresh(curves);
        if (!meta.curves) {
          N("p", {"class": "bt-muted bt-placeholder"}, curves, meta.no_curves);
        } else {
          lossChart(curves, meta, values);
          accuracyChart(curves, meta, values);
          depthChart(curves, meta, values);
          rehover(curves, kept);
        }
        // The look changes every few slices: drawn again only when it (or the width) did.
        var key = null;
        if (meta.look) {
          var nums = [];
          for (var i = meta.look.span[0]; i < meta.look.span[1]; i++) nums.push(values[i]);
          key = JSON.stringify(meta.look) + nums.join(",") + "|" + main.clientWidth;
        } else {
          key = meta.look_first;
        }
        if (key !== lastInside) {
          lastInside = key;
          var held = hovered(inside);
          drawInside(meta, values);
          rehover(inside, held);
        }
      }
    };
  };
})();
