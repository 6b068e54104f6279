"""The floor diagram's geometry and words: pure functions from what a floor is to what its SVG draws.

One floor drawn as the residual stream: a line that runs through the floor, with norm -> attention and
norm -> MLP branching off it and writing back at two + signs (pre-norm), or each norm sitting on the
stream after its + (post-norm). With residual = replace the identity path between a branch's tap and its
+ is cut. Position vectors are stamped onto the input before the floor, the causal mask sits inside
attention, when the explorable has them.

Two orientations, both sent to the browser, which draws the one that fits its width:
- "wide": the stream left to right, the sublayers above it, each stage's card below its point;
- "tall": the stream top to bottom on a rail, the sublayers on a second rail beside it, one column of cards.

Everything here is plain data (numbers and strings in dicts and lists) that the component sends once per
structure. What a floor is and what it shows now live in floor_model.py; the values' text comes from
numbers.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from blocktrace.explorables.components.floor_model import NORM_ROLES, UPDATE_ROLES, FloorSpec, Shown, Stage

__all__ = ["layouts", "layouts_json", "payload", "tall", "text_width", "wide", "wrap"]

LABEL_PX, LINE_PX = 12.0, 15.0  # a card's stage label
KEY_PX, VALUE_PX = 10.5, 11.5  # its engine key (monospace) and its value
HEADER_PX = 11.5  # a sublayer's title
SMALL_PX = 10.0  # chips, tags, the cut label, the end label
PAD = 7.0  # inside a card
CHIP_H, CHIP_GAP = 21.0, 4.0
HEADER_H = 21.0  # a sublayer frame's title row
FRAME_PAD = 6.0
DOT_R, PLUS_R = 5.0, 10.0

WIDE_CARD_W, WIDE_GAP, WIDE_MARGIN = 140.0, 20.0, 10.0
WIDE_GAP_BELOW = 14.0  # between two cards below the stream
WIDE_STAMP_W, WIDE_STAMP_H = 132.0, 44.0
MIN_STEP = 36.0  # the least distance between two points on the stream
WIDE_LABEL_LINES = 3
TALL_W, TALL_STREAM_X, TALL_BRANCH_X, TALL_CARD_X = 344.0, 18.0, 42.0, 60.0
TALL_LABEL_LINES = 2
TALL_GAP = 11.0

# --- text -------------------------------------------------------------------------------------

_NARROW = set("il.,:;!|'()[]{}` ·ijtfr")
_WIDE = set("mwMW@%—")


def text_width(text: str, size: float, mono: bool = False) -> float:
    """An estimate of the text's width in px, generous for DejaVu Sans (the fallback of system-ui here)."""
    if mono:
        return 0.61 * size * len(text)
    units = 0.0
    for ch in text:
        if ch in _NARROW:
            units += 0.36
        elif ch in _WIDE:
            units += 0.92
        elif ch.isupper() or ch.isdigit():
            units += 0.68
        else:
            units += 0.6
    return units * size


def wrap(text: str, width: float, size: float = LABEL_PX, max_lines: int = 2) -> list[str]:
    """Greedy word wrap to `width` px; a last line that still overflows ends in "…"."""
    words = text.split()
    lines: list[str] = []
    current = ""
    for word in words:
        trial = f"{current} {word}".strip()
        if current and text_width(trial, size) > width:
            lines.append(current)
            current = word
        else:
            current = trial
    if current:
        lines.append(current)
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [" ".join(lines[max_lines - 1:])]
    if lines and text_width(lines[-1], size) > width:
        last = lines[-1]
        while last and text_width(last + "…", size) > width:
            last = last[:-1]
        lines[-1] = last.rstrip() + "…"
    return lines or [""]


# --- drawing primitives ---------------------------------------------------------------------------

def _r(v: float) -> float:
    return round(float(v), 1)


def _path(d: str, cls: str) -> dict:
    return {"tag": "path", "d": d, "class": cls}


def _arrow_head(x: float, y: float, direction: str, size: float = 5.5) -> dict:
    """A filled triangle whose tip is at (x, y), pointing right, left, up or down."""
    s, h = size, size * 0.6
    points = {
        "right": [(x, y), (x - s, y - h), (x - s, y + h)],
        "left": [(x, y), (x + s, y - h), (x + s, y + h)],
        "down": [(x, y), (x - h, y - s), (x + h, y - s)],
        "up": [(x, y), (x - h, y + s), (x + h, y + s)],
        "down-left": [(x, y), (x + 1.0, y - s), (x + s, y - 1.0)],
    }[direction]
    return {"tag": "path", "d": "M" + " L".join(f"{_r(px)},{_r(py)}" for px, py in points) + " Z",
            "class": "fd-head"}


def _text(x: float, y: float, text: str, cls: str, anchor: str = "start", rotate: float = 0.0) -> dict:
    shape = {"tag": "text", "x": _r(x), "y": _r(y), "text": text, "class": cls}
    if anchor != "start":
        shape["anchor"] = anchor
    if rotate:
        shape["rotate"] = rotate
    return shape


def _rect(x: float, y: float, w: float, h: float, cls: str, rx: float = 6.0) -> dict:
    return {"tag": "rect", "x": _r(x), "y": _r(y), "w": _r(w), "h": _r(h), "rx": rx, "class": cls}


def _mask_glyph(x: float, y: float, on: bool) -> list[dict]:
    """A 3x3 attention grid at (x, y): with the mask, the cells above the diagonal are blanked."""
    cell, out = 3.4, []
    for i in range(3):
        for j in range(3):
            masked = on and j > i
            out.append(_rect(x + j * (cell + 0.8), y + i * (cell + 0.8), cell, cell,
                             "fd-mask-cell off" if masked else "fd-mask-cell", rx=0.6))
    return out


@dataclass
class _Canvas:
    """Shapes (drawn first, in order), nodes (drawn on top) and the size they need."""

    shapes: list[dict] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)

    def add(self, *shapes: dict) -> None:
        self.shapes.extend(shapes)


def _card_height(lines: int, key_beside_value: bool) -> float:
    rows = 1 if key_beside_value else 2
    return PAD + LINE_PX * lines + 14.0 * rows + PAD - 2.0


def _node(stage: Stage, kind: str, x: float, y: float, w: float, h: float, lines: list[str],
          key_beside_value: bool, marker: dict | None = None) -> dict:
    """A stage's card: its box, its label lines, its key, where its value goes and where a tag goes."""
    texts = [_text(x + PAD, y + PAD + 11.0 + LINE_PX * i, line, "fd-label") for i, line in enumerate(lines)]
    below = y + PAD + LINE_PX * len(lines)
    key = stage.role
    if key_beside_value:
        texts.append(_text(x + PAD, below + 11.0, key, "fd-key"))
        value = {"x": _r(x + w - PAD), "y": _r(below + 11.0), "anchor": "end"}
    else:
        texts.append(_text(x + PAD, below + 10.5, key, "fd-key"))
        value = {"x": _r(x + PAD), "y": _r(below + 25.0), "anchor": "start"}
    node = {"key": stage.key, "role": stage.role, "kind": kind,
            "box": [_r(x), _r(y), _r(w), _r(h)], "texts": texts, "value": value,
            "tag": {"x": _r(x + w - 4.0), "y": _r(y)}}
    if marker:
        node["marker"] = marker
    return node


def _chip(stage: Stage, x: float, y: float) -> dict:
    name = stage.role.split(".", 1)[1]
    w = _chip_width(stage)
    return {"key": stage.key, "role": stage.role, "kind": "part",
            "box": [_r(x), _r(y), _r(w), CHIP_H], "texts": [_text(x + w / 2, y + 14.5, name, "fd-chip", "middle")],
            "tag": {"x": _r(x + w - 2.0), "y": _r(y)}}


def _chip_width(stage: Stage) -> float:
    return text_width(stage.role.split(".", 1)[1], SMALL_PX, mono=True) + 14.0


def _chips_width(parts: list[Stage]) -> float:
    """The width of the parts' chips in one row."""
    return sum(_chip_width(p) for p in parts) + CHIP_GAP * max(len(parts) - 1, 0)


def _chip_rows(parts: list[Stage], width: float) -> list[list[Stage]]:
    rows: list[list[Stage]] = []
    used = width + 1
    for part in parts:
        w = _chip_width(part)
        if used + CHIP_GAP + w > width:
            rows.append([])
            used = -CHIP_GAP
        rows[-1].append(part)
        used += CHIP_GAP + w
    return rows


def _frame_height(parts: list[Stage], inner_w: float, card_h: float) -> float:
    rows = len(_chip_rows(parts, inner_w))
    return HEADER_H + rows * (CHIP_H + CHIP_GAP) + card_h + FRAME_PAD


def _frame(canvas: _Canvas, spec: FloorSpec, sublayer: str, x: float, y: float, w: float, card_h: float,
           lines: list[str], key_beside_value: bool) -> dict:
    """A sublayer's frame: its title (and the mask, inside attention), its parts as chips, its update's card.

    Returns the update's node."""
    parts = spec.parts(sublayer)
    inner = w - 2 * FRAME_PAD
    h = _frame_height(parts, inner, card_h)
    canvas.add(_rect(x, y, w, h, f"fd-frame fd-frame-{sublayer}", rx=9.0))
    title = "Attention" if sublayer == "attn" else spec.mlp_title
    canvas.add(_text(x + FRAME_PAD + 2, y + 15.0, title, "fd-frame-title"))
    if sublayer == "attn" and spec.causal is not None:
        words = "causal mask" if spec.causal else "no mask"
        right = x + w - FRAME_PAD - 2
        canvas.add(_text(right, y + 15.0, words, "fd-mask-text" + ("" if spec.causal else " off"), "end"))
        canvas.add(*_mask_glyph(right - text_width(words, SMALL_PX) - 15.0, y + 6.5, spec.causal))
    cy = y + HEADER_H
    for row in _chip_rows(parts, inner):
        cx = x + FRAME_PAD
        for part in row:
            canvas.nodes.append(_chip(part, cx, cy))
            cx += _chip_width(part) + CHIP_GAP
        cy += CHIP_H + CHIP_GAP
    update = spec.stage(UPDATE_ROLES[0] if sublayer == "attn" else UPDATE_ROLES[1])
    assert update is not None  # FloorSpec requires both updates
    node = _node(update, "update", x + FRAME_PAD, y + h - FRAME_PAD - card_h, inner, card_h, lines, key_beside_value)
    canvas.nodes.append(node)
    return node


def _marker(kind: str, cx: float, cy: float) -> dict:
    return {"type": kind, "cx": _r(cx), "cy": _r(cy), "r": PLUS_R if kind == "plus" else DOT_R}


def _joint(cx: float, cy: float, residual: str) -> list[dict]:
    """Where a post-norm update meets the stream (not a stage: the sum before its norm is not recorded):
    a + when it is added, a dot when it replaces the stream."""
    if residual == "replace":
        return [{"tag": "circle", "cx": _r(cx), "cy": _r(cy), "r": DOT_R, "class": "fd-joint"}]
    return [{"tag": "circle", "cx": _r(cx), "cy": _r(cy), "r": PLUS_R, "class": "fd-plus"},
            _path(f"M{_r(cx - 5)},{_r(cy)} H{_r(cx + 5)} M{_r(cx)},{_r(cy - 5)} V{_r(cy + 5)}", "fd-plus-sign")]


def _station(rail_x: float, y: float, card_x: float) -> dict:
    """A card hanging off the tall layout's branch rail."""
    return _path(f"M{_r(rail_x)},{_r(y)} H{_r(card_x)}", "fd-tick")


def _cut_label(length: float) -> str:
    return "identity path cut" if length >= text_width("identity path cut", SMALL_PX) + 26 else "cut"


def _stream(canvas: _Canvas, start: float, end: float, cuts: list[tuple[float, float]], along: str,
            at: float) -> None:
    """The stream line from `start` to `end` (x when along == "x", else y), dashed with a labelled gap where
    each cut runs, and an arrow at the end."""
    def seg(a: float, b: float, cls: str) -> dict:
        if along == "x":
            return _path(f"M{_r(a)},{_r(at)} H{_r(b)}", cls)
        return _path(f"M{_r(at)},{_r(a)} V{_r(b)}", cls)

    pos = start
    for a, b in sorted(cuts):
        canvas.add(seg(pos, a, "fd-stream"))
        label = _cut_label(b - a)
        half = text_width(label, SMALL_PX) / 2 + 5
        mid = (a + b) / 2
        canvas.add(seg(a, mid - half, "fd-stream fd-cut"), seg(mid + half, b, "fd-stream fd-cut"))
        if along == "x":
            canvas.add(_text(mid, at + 3.5, label, "fd-cut-label", "middle"))
        else:
            canvas.add(_text(at + 3.5, mid, label, "fd-cut-label", "middle", rotate=-90))
        pos = b
    canvas.add(seg(pos, end, "fd-stream"))


# --- the plan: what comes after what along the stream --------------------------------------------

def _plan(spec: FloorSpec) -> list[tuple[str, str]]:
    """(item, role) along the stream: ("stream", role) stage points, ("stamp", "") the position vectors,
    ("branch", "attn"/"mlp") a sublayer leaving and rejoining the stream at its +, ("stream_norm", role)
    a post-norm norm on the stream."""
    plan: list[tuple[str, str]] = []
    if spec.positions is not None:
        plan += [("stream", "embed"), ("stamp", "")]
    plan.append(("stream", "resid_pre"))
    for sublayer, norm, out in (("attn", "ln1.normalized", "resid_mid"), ("mlp", "ln2.normalized", "resid_post")):
        plan.append(("branch", sublayer))
        if spec.placement == "post":
            plan.append(("stream_norm", norm))
        plan.append(("stream", out))
    return plan


def _stream_marker(spec: FloorSpec, role: str) -> str:
    """A + for a stage that is a sum (pre-norm adds, positions on); a dot for any other point."""
    if role == "resid_pre":
        return "plus" if spec.positions else "dot"
    if role in ("resid_mid", "resid_post"):
        return "plus" if spec.placement == "pre" and spec.residual == "add" else "dot"
    return "dot"


STAMP_ON = ("+ position vectors", "p₀, p₁, … one per slot")
STAMP_OFF = ("positions off:", "nothing is added")


# --- wide: the stream left to right ----------------------------------------------------------------

def wide(spec: FloorSpec) -> dict:
    """The stream left to right: sublayers (and the position stamp) in a row above it, the stream's stages in a
    row of cards below it, post-norm norms on the line itself.

    The two rows are packed apart: a card below only has to clear the cards below, a box above the boxes above,
    and each point on the stream has to come after the one before it.
    """
    canvas = _Canvas()
    card_w = WIDE_CARD_W
    inner = card_w - 2 * PAD
    frame_ws = {sub: max(card_w, _chips_width(spec.parts(sub))) + 2 * FRAME_PAD for sub in ("attn", "mlp")}
    lines = {s.role: wrap(s.label, inner, LABEL_PX, WIDE_LABEL_LINES) for s in spec.stages}
    plan = _plan(spec)
    branch_roles = list(UPDATE_ROLES) + ([*NORM_ROLES] if spec.placement == "pre" else [])
    stream_roles = [r for item, r in plan if item == "stream"]
    n_branch = max(len(lines[r]) for r in branch_roles)
    n_stream = max(len(lines[r]) for r in stream_roles)
    n_snorm = max((len(lines[r]) for item, r in plan if item == "stream_norm"), default=1)
    branch_h = _card_height(n_branch, False)
    stream_h = _card_height(n_stream, False)
    snorm_h = _card_height(n_snorm, False)
    frame_hs = {sub: _frame_height(spec.parts(sub), frame_ws[sub] - 2 * FRAME_PAD, branch_h) for sub in ("attn", "mlp")}
    row_h = max([*frame_hs.values(), branch_h, WIDE_STAMP_H if spec.positions is not None else 0.0])
    row_bottom = 12.0 + row_h
    gap = 36.0 if spec.placement == "pre" else max(36.0, snorm_h / 2 + 10.0)
    ys = row_bottom + gap  # the stream's y
    stream_top = ys + 22.0  # stream cards hang below it

    top_right = bottom_right = WIDE_MARGIN - WIDE_GAP  # the right edge of what each row holds so far
    next_x = WIDE_MARGIN  # the next point on the stream comes at or after this x
    points: list[float] = []  # x of every point on the stream, in order
    cuts: list[tuple[float, float]] = []

    def stream_card(role: str, cx: float, marker: str) -> None:
        stage = spec.stage(role)
        assert stage is not None
        canvas.add(_path(f"M{_r(cx)},{_r(ys)} V{_r(stream_top)}", "fd-tick"))
        canvas.nodes.append(_node(stage, "stream", cx - card_w / 2, stream_top, card_w, stream_h, lines[role], False,
                                  _marker(marker, cx, ys)))

    for index, (item, role) in enumerate(plan):
        if item == "stream" and not (role in ("resid_mid", "resid_post") and spec.placement == "pre"):
            after_stamp = index > 0 and plan[index - 1][0] == "stamp"
            cx = points[-1] if after_stamp else max(bottom_right + WIDE_GAP_BELOW + card_w / 2, next_x)
            stream_card(role, cx, _stream_marker(spec, role))
            bottom_right = cx + card_w / 2
            if not after_stamp:
                points.append(cx)
            next_x = cx + MIN_STEP
        elif item == "stamp":  # into the + of resid_pre, the next stage, from the free space above the embedding
            cx = max(bottom_right + WIDE_GAP_BELOW + card_w / 2, next_x)  # the + (resid_pre's card hangs below it)
            sx, sy = max(top_right + WIDE_GAP, WIDE_MARGIN), row_bottom - WIDE_STAMP_H
            sc = sx + WIDE_STAMP_W / 2
            on = bool(spec.positions)
            canvas.add(_rect(sx, sy, WIDE_STAMP_W, WIDE_STAMP_H, "fd-stamp" + ("" if on else " off")))
            for i, line in enumerate(STAMP_ON if on else STAMP_OFF):
                canvas.add(_text(sc, sy + 18.0 + 13.0 * i, line, "fd-stamp-text", "middle"))
            route = f"M{_r(sc)},{_r(row_bottom)} V{_r(row_bottom + 13)} H{_r(cx)} V{_r(ys - PLUS_R - 1)}"
            canvas.add(_path(route, "fd-branch" + ("" if on else " off")))
            if on:
                canvas.add(_arrow_head(cx, ys - PLUS_R - 1, "down"))
            top_right = sx + WIDE_STAMP_W
            points.append(cx)
        elif item == "branch":
            sub = role
            frame_w = frame_ws[sub]
            r = PLUS_R if spec.residual == "add" else DOT_R
            if spec.placement == "pre":
                norm = spec.stage(NORM_ROLES[0] if sub == "attn" else NORM_ROLES[1])
                assert norm is not None
                nx = max(top_right + WIDE_GAP, next_x - card_w / 2)  # its tap (its centre) after the last point
                # the frame's centre is the +, whose stage's card hangs below it, clear of the card before
                fx = max(nx + card_w + WIDE_GAP, bottom_right + WIDE_GAP_BELOW + card_w / 2 - frame_w / 2)
                ny = row_bottom - FRAME_PAD - branch_h  # level with the update's card in the frame
                tap_x = nx + card_w / 2
                canvas.nodes.append(_node(norm, "norm", nx, ny, card_w, branch_h, lines[norm.role], False))
                canvas.add(_path(f"M{_r(tap_x)},{_r(ys)} V{_r(ny + branch_h + 1)}", "fd-branch"),
                           _arrow_head(tap_x, ny + branch_h + 1, "up"),
                           _path(f"M{_r(nx + card_w)},{_r(ny + branch_h / 2)} H{_r(fx - 1)}", "fd-branch"),
                           _arrow_head(fx - 1, ny + branch_h / 2, "right"))
            else:  # post-norm: the sublayer reads the stream itself
                fx = max(top_right + WIDE_GAP, next_x + 12.0)
                tap_x = fx - 12.0
                mid = row_bottom - FRAME_PAD - branch_h / 2
                canvas.add(_path(f"M{_r(tap_x)},{_r(ys)} V{_r(mid)} H{_r(fx - 1)}", "fd-branch"),
                           _arrow_head(fx - 1, mid, "right"))
            out_role = UPDATE_ROLES[0] if sub == "attn" else UPDATE_ROLES[1]
            _frame(canvas, spec, sub, fx, row_bottom - frame_hs[sub], frame_w, branch_h, lines[out_role], False)
            mx = fx + frame_w / 2
            top_right = fx + frame_w
            canvas.add(_path(f"M{_r(mx)},{_r(row_bottom)} V{_r(ys - r - 1)}", "fd-branch"),
                       _arrow_head(mx, ys - r - 1, "down"))
            if spec.residual == "replace":
                cuts.append((tap_x + 4, mx - r - 3))
            points.append(mx)
            next_x = mx + MIN_STEP
            if spec.placement == "pre":  # the sum is a stage: its card hangs under the +
                merged = "resid_mid" if sub == "attn" else "resid_post"
                stream_card(merged, mx, _stream_marker(spec, merged))
                bottom_right = mx + card_w / 2
            else:
                canvas.add(*_joint(mx, ys, spec.residual))
        elif item == "stream_norm":
            stage = spec.stage(role)
            assert stage is not None
            nx = max(next_x - 14.0, bottom_right + WIDE_GAP_BELOW)  # on the line, clear of the cards below it
            canvas.nodes.append(_node(stage, "norm stream-norm", nx, ys - snorm_h / 2, card_w, snorm_h, lines[role],
                                      False))
            points.append(nx + card_w / 2)
            bottom_right = nx + card_w
            next_x = nx + card_w + 18.0
    # The stream runs on past the last point, clear of its arrow, and says where it goes above its end.
    label_w = text_width(spec.end_label, SMALL_PX)
    end = max(points[-1] + label_w + 14.0, points[-1] + 40.0)
    _stream(canvas, points[0], end, cuts, "x", ys)
    canvas.add(_arrow_head(end + 4, ys, "right"), _text(end + 4, ys - 9.0, spec.end_label, "fd-end", "end"))
    width = max(end + 12.0, top_right + WIDE_MARGIN, bottom_right + WIDE_MARGIN)
    height = stream_top + stream_h + 10.0
    return {"width": _r(width), "height": _r(height), "shapes": canvas.shapes, "nodes": canvas.nodes}


# --- tall: the stream top to bottom ------------------------------------------------------------------

def tall(spec: FloorSpec) -> dict:
    """The stream top to bottom on a rail at the left, each sublayer on a second rail beside it, and every card
    in one column to the right (a phone's width)."""
    canvas = _Canvas()
    card_w = TALL_W - TALL_CARD_X - 4.0
    inner = card_w - 2 * PAD
    frame_inner = card_w - 2 * FRAME_PAD - 2 * PAD
    xs, xb, cx0 = TALL_STREAM_X, TALL_BRANCH_X, TALL_CARD_X
    y = 8.0
    points: list[float] = []  # y of every point on the stream
    cuts: list[tuple[float, float]] = []
    plan = _plan(spec)

    def card_lines(role: str, width: float = inner) -> list[str]:
        stage = spec.stage(role)
        assert stage is not None
        return wrap(stage.label, width, LABEL_PX, TALL_LABEL_LINES)

    for item, role in plan:
        if item in ("stream", "stream_norm"):
            stage = spec.stage(role)
            assert stage is not None
            lines = card_lines(role)
            h = _card_height(len(lines), True)
            cy = y + h / 2
            if item == "stream":
                kind = _stream_marker(spec, role)
                marker = _marker(kind, xs, cy)
                node = _node(stage, "stream", cx0, y, card_w, h, lines, True, marker)
            else:
                marker = {"type": "square", "cx": _r(xs), "cy": _r(cy), "r": 6.5}
                node = _node(stage, "norm stream-norm", cx0, y, card_w, h, lines, True, marker)
            canvas.add(_path(f"M{_r(xs)},{_r(cy)} H{_r(cx0)}", "fd-tick"))
            canvas.nodes.append(node)
            points.append(cy)
            y += h + TALL_GAP
        elif item == "stamp":
            on = bool(spec.positions)
            h = 26.0
            canvas.add(_rect(cx0, y, card_w, h, "fd-stamp" + ("" if on else " off")))
            canvas.add(_text(cx0 + PAD, y + 17.0, " ".join(STAMP_ON if on else STAMP_OFF), "fd-stamp-text"))
            # into the + of resid_pre (the next card), from the upper right
            plus_y = y + h + TALL_GAP + _card_height(len(card_lines("resid_pre")), True) / 2
            canvas.add(_path(f"M{_r(cx0)},{_r(y + h / 2)} H{_r(xb)} L{_r(xs + 8)},{_r(plus_y - 8)}",
                             "fd-branch" + ("" if on else " off")))
            if on:
                canvas.add(_arrow_head(xs + 7.5, plus_y - 7.5, "down-left"))
            y += h + TALL_GAP
        elif item == "branch":
            sub = role
            tap_y = y - TALL_GAP / 2
            canvas.add(_path(f"M{_r(xs)},{_r(tap_y)} L{_r(xb)},{_r(tap_y + 14)}", "fd-branch"))
            rail_top = tap_y + 14
            y = tap_y + 20
            norm_role = NORM_ROLES[0] if sub == "attn" else NORM_ROLES[1]
            if spec.placement == "pre":
                norm = spec.stage(norm_role)
                assert norm is not None
                lines = card_lines(norm_role)
                h = _card_height(len(lines), True)
                canvas.nodes.append(_node(norm, "norm", cx0, y, card_w, h, lines, True))
                canvas.add(_station(xb, y + h / 2, cx0))
                y += h + TALL_GAP
            out_role = UPDATE_ROLES[0] if sub == "attn" else UPDATE_ROLES[1]
            lines = card_lines(out_role, frame_inner)
            card_h = _card_height(len(lines), True)
            fh = _frame_height(spec.parts(sub), card_w - 2 * FRAME_PAD, card_h)
            _frame(canvas, spec, sub, cx0, y, card_w, card_h, lines, True)
            canvas.add(_station(xb, y + fh - FRAME_PAD - card_h / 2, cx0))
            y += fh + TALL_GAP
            # down the rail and into the +
            if spec.placement == "post":
                merge_y = y + 4 + PLUS_R
                canvas.add(*_joint(xs, merge_y, spec.residual))
                y = merge_y + PLUS_R + 8
            else:
                next_role = "resid_mid" if sub == "attn" else "resid_post"
                merge_y = y + _card_height(len(card_lines(next_role)), True) / 2
            r = PLUS_R if spec.residual == "add" else DOT_R
            hit = r * 0.72 + 1.5
            canvas.add(_path(f"M{_r(xb)},{_r(rail_top)} V{_r(merge_y - 18)} L{_r(xs + hit)},{_r(merge_y - hit)}",
                             "fd-branch"),
                       _arrow_head(xs + hit, merge_y - hit, "down-left"))
            if spec.residual == "replace":
                cuts.append((tap_y + 4, merge_y - r - 3))
            if spec.placement == "post":
                points.append(merge_y)
    end = points[-1] + 30.0
    _stream(canvas, points[0], end, cuts, "y", xs)
    canvas.add(_arrow_head(xs, end + 4, "down"), _text(xs + 11, end + 3.5, spec.end_label, "fd-end"))
    return {"width": TALL_W, "height": _r(end + 10.0), "shapes": canvas.shapes, "nodes": canvas.nodes}


@lru_cache(maxsize=128)
def layouts(spec: FloorSpec) -> dict[str, dict]:
    """Both orientations of a floor (cached: a spec is frozen, and every session of a setting shares it)."""
    return {"wide": wide(spec), "tall": tall(spec)}


@lru_cache(maxsize=128)
def layouts_json(spec: FloorSpec) -> str:
    """Both orientations as compact JSON text: what the component sends (Bokeh would send a dict as nested
    key-value lists, about twice the bytes)."""
    return json.dumps(layouts(spec), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def payload(view: Shown) -> dict[str, Any]:
    """The component's parameter values for this view (the cards' values and names as one JSON text)."""
    texts = json.dumps({"values": dict(view.values), "names": dict(view.names)}, ensure_ascii=False)
    return {"layouts": layouts_json(view.spec), "texts": texts, "alerts": dict(view.alerts),
            "selected": view.selected, "locked": view.locked, "caption": view.caption}

