"""The floor diagram's pure builders (explorables/components/floor_layout.py and floor_model.py): nodes, labels,
variants, what is shown."""

from __future__ import annotations

import itertools
import json

import pytest

from blocktrace.explorables.components import floor_layout as fl
from blocktrace.explorables.components import floor_model as fm
from blocktrace.explorables.engine import BlockConfig
from blocktrace.explorables.engine.forward import block_keys
from blocktrace.explorables.engine.stages import stage_texts

ORIENTATIONS = ("wide", "tall")
VARIANTS = list(itertools.product(("pre", "post"), ("add", "replace"), (None, True, False), (None, True, False)))


def spec(placement: str = "pre", residual: str = "add", causal: bool | None = None, positions: bool | None = None,
         parts: bool = True) -> fm.FloorSpec:
    """A floor with the engine's own labels for this variant (every part when `parts`)."""
    config = BlockConfig(placement=placement, residual=residual, causal=bool(causal), positions=bool(positions))
    texts = stage_texts(config)
    roles = [k for k in block_keys(config) if parts or k in fm.REQUIRED]
    if positions is not None:
        roles = ["embed", *roles]
    stages = [(r, r if r == "embed" else f"blocks.0.{r}", texts[r][0]) for r in roles]
    return fm.spec_from(stages, placement=placement, residual=residual, causal=causal, positions=positions)


def texts_of(layout: dict) -> list[str]:
    return [s["text"] for s in layout["shapes"] if s["tag"] == "text"]


def classes_of(layout: dict) -> list[str]:
    return [s["class"] for s in layout["shapes"]]


@pytest.mark.parametrize(("placement", "residual", "causal", "positions"), VARIANTS)
def test_every_stage_is_one_node_named_by_its_key_and_label(placement, residual, causal, positions) -> None:
    """Each stage appears once in each orientation, keyed by its stage key, carrying the table's label."""
    s = spec(placement, residual, causal, positions)
    for layout in fl.layouts(s).values():
        nodes = layout["nodes"]
        assert sorted(n["key"] for n in nodes) == sorted(s.keys)
        for n in nodes:
            stage = next(st for st in s.stages if st.key == n["key"])
            assert n["role"] == stage.role
            shown = [t["text"] for t in n["texts"]]
            if n["kind"] == "part":  # a chip is named by its key within the sublayer: q, scores, gate, …
                assert shown == [stage.role.split(".", 1)[1]]
            else:  # the label's lines, then the engine's key
                assert shown[-1] == stage.role
                assert " ".join(shown[:-1]).replace("…", "") in stage.label


@pytest.mark.parametrize(("placement", "residual", "causal", "positions"), VARIANTS)
def test_cards_fit_the_drawing_and_never_overlap(placement, residual, causal, positions) -> None:
    """Every card lies inside the drawing, and no two cards (chips apart) cover each other."""
    for layout in fl.layouts(spec(placement, residual, causal, positions)).values():
        boxes = []
        for n in layout["nodes"]:
            x, y, w, h = n["box"]
            assert 0 <= x and x + w <= layout["width"] and 0 <= y and y + h <= layout["height"], n["key"]
            if n["kind"] != "part":
                boxes.append((x, y, x + w, y + h, n["key"]))
        for a, b in itertools.combinations(boxes, 2):
            assert apart(a, b), (a[4], b[4])
        # The position stamp and the sublayer frames keep clear of every card they do not hold.
        for shape in layout["shapes"]:
            if shape["tag"] == "rect" and shape["class"].split()[0] in ("fd-stamp", "fd-frame"):
                box = (shape["x"], shape["y"], shape["x"] + shape["w"], shape["y"] + shape["h"], shape["class"])
                inside = [b for b in boxes if not apart(box, b)]
                assert all(box[0] <= b[0] and b[2] <= box[2] and box[1] <= b[1] and b[3] <= box[3] for b in inside), (
                    box[4], [b[4] for b in inside])
        json.dumps(layout, allow_nan=False)  # plain, finite data for the browser


def apart(a: tuple, b: tuple) -> bool:
    """Two boxes (x0, y0, x1, y1, …) that do not overlap."""
    return a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_pre_norm_branches_and_post_norm_sits_on_the_stream(orientation) -> None:
    """Pre-norm: each norm is a card on its branch and both residual points are + signs. Post-norm: each norm
    is drawn on the stream after its +, which is not a stage of its own."""
    pre = {n["role"]: n for n in fl.layouts(spec("pre"))[orientation]["nodes"]}
    post = {n["role"]: n for n in fl.layouts(spec("post"))[orientation]["nodes"]}
    assert pre["ln1.normalized"]["kind"] == "norm" and post["ln1.normalized"]["kind"] == "norm stream-norm"
    assert pre["resid_mid"]["marker"]["type"] == "plus" and post["resid_mid"]["marker"]["type"] == "dot"
    post_shapes = classes_of(fl.layouts(spec("post"))[orientation])
    assert post_shapes.count("fd-plus") == 2  # the two sums, drawn before their norms
    if orientation == "wide":  # the norm's card is centred on the stream's line
        ys = next(s for s in fl.layouts(spec("post"))["wide"]["shapes"] if s["class"] == "fd-stream")["d"]
        line_y = float(ys.split(",")[1].split()[0])
        x, y, w, h = post["ln1.normalized"]["box"]
        assert y < line_y < y + h


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_replace_cuts_the_identity_path_with_a_label(orientation) -> None:
    """residual = replace: two dashed, labelled gaps in the stream, and no + where nothing is added."""
    cut = fl.layouts(spec(residual="replace"))[orientation]
    added = fl.layouts(spec(residual="add"))[orientation]
    assert classes_of(cut).count("fd-stream fd-cut") == 4  # each cut is two dashed halves around its label
    assert [t for t in texts_of(cut) if t in ("identity path cut", "cut")]
    assert "fd-stream fd-cut" not in classes_of(added)
    markers = {n["role"]: n.get("marker", {}).get("type") for n in cut["nodes"]}
    assert markers["resid_mid"] == markers["resid_post"] == "dot"


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_the_mask_is_drawn_inside_attention_when_the_explorable_has_one(orientation) -> None:
    """causal True: "causal mask" and blanked future cells; False: "no mask"; None: nothing at all."""
    on, off, none = (fl.layouts(spec(causal=c))[orientation] for c in (True, False, None))
    assert "causal mask" in texts_of(on) and "fd-mask-cell off" in classes_of(on)
    assert "no mask" in texts_of(off) and "fd-mask-cell off" not in classes_of(off)
    assert not any(c.startswith("fd-mask") for c in classes_of(none))
    attention = next(s for s in on["shapes"] if s.get("class") == "fd-frame fd-frame-attn")
    mask = next(s for s in on["shapes"] if s.get("class") == "fd-mask-text")
    assert attention["x"] <= mask["x"] <= attention["x"] + attention["w"]
    assert attention["y"] <= mask["y"] <= attention["y"] + attention["h"]


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_position_stamps_are_added_before_the_floor(orientation) -> None:
    """positions on: the stamp is drawn and resid_pre is a sum (+) after the embedding; off: the stamp says so."""
    on = fl.layouts(spec(positions=True))[orientation]
    off = fl.layouts(spec(positions=False))[orientation]
    none = fl.layouts(spec(positions=None))[orientation]
    assert " ".join(fl.STAMP_ON) in " ".join(texts_of(on))
    assert " ".join(fl.STAMP_OFF) in " ".join(texts_of(off))
    assert "fd-stamp" not in classes_of(none) and "embed" not in [n["role"] for n in none["nodes"]]
    roles = [n["role"] for n in on["nodes"]]
    assert roles.index("embed") < roles.index("resid_pre")  # drawn in forward order
    markers = {n["role"]: n["marker"]["type"] for n in on["nodes"] if "marker" in n}
    assert markers["resid_pre"] == "plus" and {n["role"]: n["marker"]["type"] for n in off["nodes"]
                                                if "marker" in n}["resid_pre"] == "dot"


def test_a_floor_needs_its_stages() -> None:
    """A spec without a stream, norm or update stage is refused, as is a position stamp without an embedding."""
    full = spec()
    with pytest.raises(ValueError, match="attn_out"):
        fm.FloorSpec(tuple(s for s in full.stages if s.role != "attn_out"))
    with pytest.raises(ValueError, match="embed"):
        fm.FloorSpec(full.stages, positions=True)


def test_labels_wrap_and_shorten_but_names_keep_every_word() -> None:
    """A label too long for its card ends in "…" on the card; the accessible name keeps it whole."""
    lines = fl.wrap("a " + "very " * 30 + "long label", 120, max_lines=2)
    assert len(lines) == 2 and lines[-1].endswith("…")
    assert all(fl.text_width(line, fl.LABEL_PX) <= 120 for line in lines)
    long = fm.Stage("resid_pre", "blocks.0.resid_pre", "x " * 80)
    assert fm.stage_name(long, "norm 1.000", False).startswith("x " * 80)


def test_locked_view_has_structure_but_no_values() -> None:
    """While the gate is locked nothing of the trace is in the view: no card values, no alerts, names without
    numbers; once unlocked the values and alerts arrive."""
    s = spec()
    values = {k: ("‖·‖ 2.000", "norm 2.000") for k in s.keys}
    alerts = {"blocks.0.resid_mid": "input lost"}
    locked = fm.shown(s, "blocks.0.resid_post", values, True, alerts)
    assert locked.values == {} and locked.alerts == {} and locked.locked
    assert all("2.000" not in name and fm.LOCKED_NAME in name for name in locked.names.values())
    assert locked.selected == "blocks.0.resid_post"
    open_ = fm.shown(s, "blocks.0.resid_post", values, False, alerts)
    assert open_.values["blocks.0.attn_out"] == "‖·‖ 2.000"
    assert open_.names["blocks.0.resid_mid"] == (
        f"{s.stage('resid_mid').label} (blocks.0.resid_mid): norm 2.000. Input lost.")
    payload = fl.payload(open_)
    assert payload["layouts"] is fl.layouts_json(s)  # one text, shared by every view of this floor
    assert json.loads(payload["layouts"]) == fl.layouts(s)
    assert json.loads(payload["texts"]) == {"values": dict(open_.values), "names": dict(open_.names)}
    assert fm.shown(s, "blocks.9.nowhere", values, False).selected == ""  # a key the floor lacks selects nothing
