// The block floor drawn in the browser (explorables/block_floor/view.py sends its payload, payload.py builds it).
// meta (JSON per change): controls' values, options, bounds, disabled, locked, banner, claim, error; once the bet
// is committed also settle, limit and orders: per order on view its words, labels, captions, each chart's words,
// and offsets into values (table: x0, x1, norm per stage; arrows: this stage's vector, then the previous one's;
// pattern: the floor's attention weights, row by row). values: every number, one Float64Array.
// Needs draw.js (window.btDraw) first. Every word, typed ones too, is set as text.

(function () {
  "use strict";
  var D = window.btDraw;

  function slice(values, at, n) { var out = []; for (var i = 0; i < n; i++) out.push(values[at + i]); return out; }

  D.views.blockFloor = function (ctx) {
    var N = D.node, spec = ctx.spec, pal = ctx.palette, embed = !!spec.embed;
    var side = N("div", {"class": "dv-side"}, ctx.root);
    var form = D.controlsCard(side, "Controls");
    var main = N("div", {"class": "dv-main"}, ctx.root);
    var settle = N("div", {"class": "dv-place"}, main);
    var orders = N("div", {"class": "dv-place"}, main);
    // The stepper and the claim it makes, with the stage it is at: one card. Beside the results, under the
    // controls; embedded, after the two tables (the charts follow it).
    var mission = N("div", {"class": "bt-card bf-mission"}, embed ? main : side);
    var plotsRow = N("div", {"class": "dv-place"}, main);
    N("h2", {"class": "bt-h2"}, mission, "Step and claim");
    N("p", null, mission, spec.mission || "");
    var bannerHead = N("strong", null, N("p", {"class": "bt-stage-banner"}, mission));
    var status = N("p", {"class": "bt-live", role: "status", "aria-live": "polite"}, mission);
    var rows = {}, switches = null;
    (spec.controls || []).forEach(function (c) {
      if (embed && c.kind === "checkbox") {  // embedded, the three switches share a cell: one short row of controls
        if (!switches) switches = N("div", {"class": "bf-switches"}, form);
        ctx.control(switches, c);
        return;
      }
      if (c.group !== "mission") { ctx.control(form, c); return; }
      var parent = mission;
      if (c.row) {
        if (!rows[c.row]) rows[c.row] = N("div", {"class": "bf-buttons"}, mission);
        parent = rows[c.row];
      }
      ctx.control(parent, c);
    });
    var claim = N("p", {role: "status", "aria-live": "polite", "class": "bf-claim"}, mission);

    function fresh(place) { var p = place.cloneNode(false); place.replaceWith(p); return p; }

    function heading(card, o, n) {
      var colours = (spec.orders || [])[n] || {colour: pal.series[0], text_on: "#fff"};
      var h = N("h2", {"class": "bt-h2 bt-order-head"}, card);
      N("span", {"class": "bt-order-tag", style: "background:" + colours.colour + ";color:" + colours.text_on}, h, o.tag);
      h.appendChild(document.createTextNode(" " + o.title));
      if (!embed) {
        var other = o.tag === "A" ? "B, the reversed order" : "A, the original order";
        N("p", {"class": "bt-muted bt-order-pair"}, card, "Read beside " + other + ": the same word, stage by stage.");
      }
      return colours.colour;
    }

    function phrase(card, o) {
      var p = N("p", {"class": "bt-phrase"}, card);
      o.words.forEach(function (w, i) {
        if (i) p.appendChild(document.createTextNode(" "));
        var chip = N("span", {"class": i === o.tracked ? "bt-chip tracked" : "bt-chip"}, p, w);
        N("span", {"class": "bt-slot"}, chip, o.slots[i]);
      });
      N("p", {"class": "bt-muted"}, card, o.added);
    }

    function floorTable(card, meta, o, values) {
      var header = ["Stage", "x0", "x1", "\u2016\u00b7\u2016"].concat(o.orders.length ? ["Orders"] : []);
      var stage = meta.controls.stage;
      var list = o.labels.map(function (label, k) {
        var v = slice(values, o.table + 3 * k, 3);
        if (o.orders.length) v.push(o.orders[k]);
        var now = k + 1 === stage;
        return {label: label, values: v, plain: [2], className: now ? "current" : null, current: now};
      });
      D.table(card, o.caption, header, list, "floor-table");
      card.lastChild.classList.add("bt-fit");
    }

    // The tracked word's vector as an arrow from the origin, the previous stage's faint and dashed; the stage
    // label past the tip, away from the origin, so it crosses neither axis nor arrow.
    function arrowChart(parent, meta, o, values, colour) {
      var width = placeWidth(parent), plane = Math.min(width - 54, 300);  // a square plane, at most 300 px
      var c = D.chart(parent, {title: o.tag + " \u00b7 the tracked word", altTitle: "Tracked word", height: plane + 42,
                               width: width, words: o.arrow_words, filename: "block-floor-" + o.tag + "-arrow",
                               legend: [{label: o.arrow_labels[0], colour: colour}].concat(o.n_arrows > 1 ?
                                 [{label: o.arrow_labels[1], colour: pal.reference, dash: "dashed"}] : [])});
      var lim = meta.limit, left = 46, bottom = 34, top = 8, right = 8;
      var span = c.h - top - bottom;
      var sx = function (x) { return left + (x + lim) / (2 * lim) * span; };
      var sy = function (y) { return top + (lim - y) / (2 * lim) * span; };
      var g = D.yAxis({svg: c.svg, w: left + span + right}, -lim, lim, sy, left, right, "component 1");
      D.ticks(-lim, lim, 4).forEach(function (v) {
        N("text", {x: sx(v), y: top + span + 14, "text-anchor": "middle"}, g, D.number(v, v % 1 ? 1 : 0));
      });
      N("text", {x: left + span / 2, y: top + span + 30, "text-anchor": "middle", "class": "dv-axis-label"}, g,
        "component 0");
      N("line", {x1: sx(0), x2: sx(0), y1: top, y2: top + span, stroke: pal.reference, "stroke-opacity": 0.6,
                 "class": "dv-mark"}, c.svg);
      N("line", {x1: left, x2: left + span, y1: sy(0), y2: sy(0), stroke: pal.reference, "stroke-opacity": 0.6,
                 "class": "dv-mark"}, c.svg);
      function arrow(x, y, stroke, width, head, dash, name) {
        var x0 = sx(0), y0 = sy(0), x1 = sx(x), y1 = sy(y), len = Math.hypot(x1 - x0, y1 - y0);
        var say = name + ": [" + D.number(x) + ", " + D.number(y) + "]";
        if (len < 3) {  // too short to draw as an arrow: a dot where it ends
          D.hover(N("circle", {cx: x1, cy: y1, r: 4, fill: stroke, "class": "dv-mark dv-dot"}, c.svg), c.readout, say);
        } else {
          head = Math.min(head, len * 0.8);
          var ux = (x1 - x0) / len, uy = (y1 - y0) / len, bx = x1 - head * ux, by = y1 - head * uy;
          var shaft = N("polyline", {points: x0 + "," + y0 + " " + bx + "," + by, fill: "none", stroke: stroke,
                                     "stroke-width": width, "stroke-dasharray": dash, "class": "dv-mark"}, c.svg);
          D.hover(shaft, c.readout, say);
          var tip = N("path", {d: "M" + x1 + "," + y1 + " L" + (bx - uy * head / 2) + "," + (by + ux * head / 2) +
                                  " L" + (bx + uy * head / 2) + "," + (by - ux * head / 2) + " Z",
                               fill: stroke, "class": "dv-mark"}, c.svg);
          D.hover(tip, c.readout, say);
        }
        return [x1, y1];
      }
      var v = slice(values, o.arrows, 2 * o.n_arrows);
      var before = o.n_arrows > 1 ? arrow(v[2], v[3], pal.reference, 2, 9, "6 4", o.arrow_labels[1]) : null;
      var end = arrow(v[0], v[1], colour, 3, 12, null, o.arrow_labels[0]);
      // The stage label at one of the tip's four corners: past the tip, away from the origin, unless the previous
      // arrow runs there; then the corner farthest from both arrows (and inside the plane).
      var origin = [sx(0), sy(0)], best = null;
      [[v[0] >= 0, v[1] >= 0], [v[0] < 0, v[1] >= 0], [v[0] >= 0, v[1] < 0], [v[0] < 0, v[1] < 0]].forEach(function (q, k) {
        var w = 7 * o.arrow_labels[0].length, cx = end[0] + (q[0] ? 8 + w / 2 : -8 - w / 2), cy = end[1] + (q[1] ? -12 : 12);
        var room = Math.min(away(cx, cy, origin, end), before ? away(cx, cy, origin, before) : 1e9);
        var inside = cx - w / 2 > left && cx + w / 2 < left + span && cy - 8 > top && cy + 8 < top + span;
        var score = (inside ? 0 : -1e6) + Math.min(room, 40) * 10 - k;  // the first corner when it is clear
        if (!best || score > best.score) best = {score: score, q: q};
      });
      N("text", {x: end[0] + (best.q[0] ? 8 : -8), y: end[1] + (best.q[1] ? -6 : 16),
                 "text-anchor": best.q[0] ? "start" : "end", "class": "dv-label"}, c.svg, o.arrow_labels[0]);
    }

    // The width a chart gets in `parent` (its content box): the chart is as wide as its place.
    function placeWidth(parent) {
      var cs = getComputedStyle(parent);
      var pad = (parseFloat(cs.paddingLeft) || 0) + (parseFloat(cs.paddingRight) || 0);  // none before it is in the page
      return Math.max(240, Math.floor(parent.clientWidth - pad));
    }

    // How far a point is from the segment a-b (px).
    function away(x, y, a, b) {
      var dx = b[0] - a[0], dy = b[1] - a[1], l = dx * dx + dy * dy;
      var t = l ? Math.max(0, Math.min(1, ((x - a[0]) * dx + (y - a[1]) * dy) / l)) : 0;
      return Math.hypot(x - a[0] - t * dx, y - a[1] - t * dy);
    }

    function heatChart(parent, o, values) {
      var n = o.words.length, left = 78, top = 6, bottom = 62, right = 8;
      var width = placeWidth(parent);
      var size = Math.max(18, Math.min(64, Math.floor((width - left - right) / n)));
      var c = D.chart(parent, {title: o.heat_title, altTitle: "Attention weights", height: top + n * size + bottom,
                               width: width, words: o.heat_words, filename: "block-floor-" + o.tag + "-attention"});
      D.heatmap(c, {rows: n, cols: n, size: size, left: left, top: top, rowNames: o.factors, colNames: o.factors,
                    palette: pal, value: function (r, k) { return values[o.pattern + r * n + k]; }});
      o.factors.forEach(function (f, k) {
        var x = left + k * size + size / 2, y = top + n * size + 12;
        N("text", {x: x, y: y, "text-anchor": "end", "class": "dv-tick", transform: "rotate(-35 " + x + " " + y + ")"},
          c.svg, f);
      });
      c.readout.after(N("p", {"class": "bt-muted"}, null, o.sums));  // under the weights, before their words
    }

    // Both cards (and, embedded, both chart cards) are laid out before anything is drawn in them: each chart
    // takes its place's width, which depends on the other card being there.
    function orderCards(meta, values) {
      var row = N("div", {"class": "bf-pair"}, orders);
      var plots = embed ? N("div", {"class": "bf-pair"}, plotsRow) : null;
      var places = meta.orders.map(function (o, n) {
        var card = N("section", {"class": "bt-card bt-order", "aria-label": o.title}, row);
        var colour = heading(card, o, n);
        card.style.borderTop = "4px solid " + colour;
        phrase(card, o);
        var charts = card;
        if (embed) {  // the two tables side by side in the first screen, the plots in a later row
          charts = N("section", {"class": "bt-card bt-order", "aria-label": o.title + ": charts"}, plots);
          charts.style.borderTop = "4px solid " + colour;
        }
        var arrowPlace = N("div", null, charts);
        var tablePlace = N("div", null, card);  // beside its phrase embedded, else under the arrow
        return {o: o, colour: colour, arrow: arrowPlace, table: tablePlace, heat: N("div", null, charts)};
      });
      places.forEach(function (p) {
        floorTable(p.table, meta, p.o, values);
        arrowChart(p.arrow, meta, p.o, values, p.colour);
        heatChart(p.heat, p.o, values);
      });
    }

    return {
      width: function () { return main.clientWidth; },
      draw: function (meta, values) {
        bannerHead.textContent = meta.banner[0];
        status.textContent = meta.banner[1];
        claim.replaceChildren();
        if (meta.claim) {
          N("span", {"class": "bt-" + meta.claim[1]}, claim, meta.claim[0]);
          claim.appendChild(document.createTextNode(meta.claim[2]));
        }
        settle = fresh(settle); orders = fresh(orders); plotsRow = fresh(plotsRow);
        if (meta.locked) {
          N("p", {"class": "bt-muted bt-locked", role: "status"}, orders, meta.note);
          return;
        }
        if (meta.settle) {
          var p = N("p", {"class": "bt-card"}, settle, meta.settle[0]);
          if (meta.settle[1]) {
            p.appendChild(document.createTextNode(" "));
            N("span", {"class": "bt-" + meta.settle[2]}, p, meta.settle[1]);
          }
        }
        orderCards(meta, values);
      }
    };
  };
})();
