"""The floor diagram in each explorable's session: its nodes, its selection both ways, and nothing before commit."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from blocktrace.explorables.block_floor import FloorExplorable
from blocktrace.explorables.components.floor_diagram import DIAGRAM_ENV, FloorDiagram
from blocktrace.explorables.components.floor_model import LOCKED_NAME
from blocktrace.explorables.components.numbers import NO_RMS, NO_RMS_NOTE, number
from blocktrace.explorables.decoder_block_lab.view import DecoderLabExplorable
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable
from tests.app.bokeh_ws_client import models, pull_document
from tests.drawn import press
from tests.lab_page import rows
from tests.lab_page import table as lab_table

# The stages each explorable's table lists, written out here rather than taken from the code under test.
TRACE_KEYS = ["blocks.0.resid_pre", "blocks.0.ln1.normalized", "blocks.0.attn_out", "blocks.0.resid_mid",
              "blocks.0.ln2.normalized", "blocks.0.mlp.hidden", "blocks.0.mlp_out", "blocks.0.resid_post"]
FLOOR_ONE = ["embed", "blocks.0.resid_pre", "blocks.0.ln1.normalized", "blocks.0.attn_out", "blocks.0.resid_mid",
             "blocks.0.ln2.normalized", "blocks.0.mlp_out", "blocks.0.resid_post"]
LAB_LOCAL = ["resid_pre", "ln1.normalized", "attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn_out",
             "resid_mid", "ln2.normalized", "mlp.gate", "mlp.value", "mlp.hidden", "mlp_out", "resid_post"]


def layout(diagram: FloorDiagram, orientation: str = "wide") -> dict:
    """One orientation of what the component sends (JSON text)."""
    return json.loads(diagram.layouts)[orientation]


def node_keys(diagram: FloorDiagram, orientation: str = "wide") -> list[str]:
    return [n["key"] for n in layout(diagram, orientation)["nodes"]]


def in_layout(view) -> list[FloorDiagram]:
    return list(view.__panel__().select(FloorDiagram))


def test_trace_diagram_follows_the_inspected_stage_both_ways() -> None:
    """The trace's diagram has its eight stages; a state change moves the selection, and a stage picked in the
    diagram becomes the inspected one (the table's marked row)."""
    view = TraceExplorable(predict=False)
    diagram = view.diagram.component
    assert in_layout(view) == [diagram]
    assert sorted(node_keys(diagram)) == sorted(TRACE_KEYS) == sorted(node_keys(diagram, "tall"))
    assert diagram.selected == "blocks.0.resid_post"
    view.state.inspect = "blocks.0.attn_out"
    assert diagram.selected == "blocks.0.attn_out"
    diagram.selected = "blocks.0.ln2.normalized"  # as the browser sends a click or Enter
    assert view.state.inspect == "blocks.0.ln2.normalized"
    shown = json.loads(view.drawing.meta)  # the browser marks the row of the inspected stage (block_trace.js)
    assert shown["controls"]["inspect"] == "blocks.0.ln2.normalized"
    trace = view.state.trace
    for key in TRACE_KEYS:  # each card shows the norm of its row, as the table's last column does
        assert diagram.values[key] == f"‖·‖ {np.linalg.norm(trace[key][0]):.3f}"
    diagram.selected = "blocks.7.nowhere"  # a key this floor lacks is set back
    assert (diagram.selected, view.state.inspect) == ("blocks.0.ln2.normalized", "blocks.0.ln2.normalized")


def test_trace_diagram_shows_no_value_before_the_commit_and_refuses_a_pick() -> None:
    """Locked: the structure and the stage names only; a pick from the browser is set back. Unlocked: values."""
    view = TraceExplorable()
    diagram = view.diagram.component
    assert diagram.locked and diagram.values == {} and diagram.alerts == {}
    assert sorted(node_keys(diagram)) == sorted(TRACE_KEYS)
    assert [name for name in diagram.names.values() if re.search(r"\d\.\d", name)] == []  # no number at all
    assert all(name.endswith(f"): {LOCKED_NAME}.") for name in diagram.names.values())
    diagram.selected = "blocks.0.attn_out"
    assert (diagram.selected, view.state.inspect) == ("blocks.0.resid_post", "blocks.0.resid_post")
    view.state.prediction.commit("keep-erase")
    assert not diagram.locked and diagram.values["blocks.0.resid_post"].startswith("‖·‖ ")
    diagram.selected = "blocks.0.attn_out"
    assert view.state.inspect == "blocks.0.attn_out"


def test_trace_diagram_cuts_the_identity_path_in_replace_mode() -> None:
    """Replacing: the layout changes in place (the same component) and the stage where the input is lost is tagged."""
    view = TraceExplorable(predict=False)
    diagram = view.diagram.component
    assert "fd-stream fd-cut" not in [s["class"] for s in layout(diagram)["shapes"]]
    view.state.replace = True
    assert view.diagram.component is diagram
    assert "fd-stream fd-cut" in [s["class"] for s in layout(diagram)["shapes"]]
    assert diagram.alerts == {"blocks.0.resid_mid": "input lost"}


def test_floor_diagram_draws_the_floor_of_the_stage_on_view() -> None:
    """Floor 1: embedding, position stamp and the six stages; stepping to floor 2 draws floor 2, starting from
    floor 1's output; a stage picked in the diagram is stepped to; the first divergence is tagged."""
    view = FloorExplorable(predict=False)
    s, diagram = view.state, view.diagram.component
    assert in_layout(view) == [diagram]
    assert node_keys(diagram) == FLOOR_ONE and diagram.selected == "embed"
    assert "+ position vectors" in [t["text"] for t in layout(diagram)["shapes"] if t["tag"] == "text"]
    assert diagram.alerts == {}, "where the orders split is what the claim asks: not told before it"
    press(view, "This is the first divergence")  # a claim (wrong: stage 1); the diagram says where they split
    assert diagram.alerts == {"blocks.0.resid_pre": "orders split here"}  # the middle word's slot stamp differs
    diagram.selected = "blocks.0.attn_out"
    assert s.stage == 4
    s.floors = 2
    s.stage = 10
    assert diagram.selected == "blocks.1.attn_out"
    assert node_keys(diagram) == ["blocks.0.resid_post", "blocks.1.ln1.normalized", "blocks.1.attn_out",
                                  "blocks.1.resid_mid", "blocks.1.ln2.normalized", "blocks.1.mlp_out",
                                  "blocks.1.resid_post"]
    diagram.selected = "blocks.0.resid_post"  # the start of floor 2's stream is floor 1's stage 8
    assert s.stage == 8 and node_keys(diagram) == FLOOR_ONE
    row = s.original["blocks.0.resid_post"][s.tracked]
    assert diagram.values["blocks.0.resid_post"] == "[" + ", ".join(  # as the lesson writes a vector
        f"{v:.3f}".replace("-", "−") for v in row) + "]"
    texts = lambda: [t["text"] for t in layout(diagram)["shapes"] if t["tag"] == "text"]  # noqa: E731
    assert "no mask" in texts()
    s.causal = True
    assert "causal mask" in texts()


def test_floor_diagram_shows_no_vector_before_the_bet() -> None:
    """Before the bet: no vector, no divergence tag, and the stepper cannot be moved from the diagram."""
    view = FloorExplorable()
    diagram = view.diagram.component
    assert diagram.locked and diagram.values == {} and diagram.alerts == {}
    diagram.selected = "blocks.0.mlp_out"
    assert view.state.stage == 1 and diagram.selected == "embed"


def test_lab_diagram_draws_the_block_as_configured() -> None:
    """Every stage of the stage table is a node; post-norm puts the norms on the stream; a failing check tags its
    stage; the pick is the state's `inspect`, marked in the stage table and kept in the link."""
    view = DecoderLabExplorable(predict=False)
    s, diagram = view.state, view.diagram.component
    assert in_layout(view) == [diagram]
    assert sorted(node_keys(diagram)) == sorted(f"blocks.0.{k}" for k in LAB_LOCAL)
    assert diagram.alerts == {} and diagram.selected == "blocks.0.resid_post"
    diagram.selected = "blocks.0.attn.pattern"
    assert s.inspect == "attn.pattern"
    marked = [r for r in lab_table(view, "Block stages")["rows"] if r.get("current")]
    assert len(marked) == 1 and marked[0]["cells"][0] == "attn.pattern" and "current" in marked[0]["className"]
    s.placement = "post"
    kinds = {n["role"]: n["kind"] for n in layout(diagram)["nodes"]}
    assert kinds["ln1.normalized"] == kinds["ln2.normalized"] == "norm stream-norm"
    s.param.update(placement="pre", residual="replace")
    assert diagram.alerts == {"blocks.0.resid_mid": "✗ first failure", "blocks.0.resid_post": "✗ fails"}
    assert "Check fails: resid_mid == resid_pre + attn_out" in diagram.names["blocks.0.resid_mid"]
    s.param.update(residual="add", causal=False)
    assert list(diagram.alerts) == ["blocks.0.attn.pattern"]
    s.inspect = "mlp.value"
    s.mlp = "gelu"  # no value projection: the pick moves to the hidden units
    assert s.inspect == "mlp.hidden" and diagram.selected == "blocks.0.mlp.hidden"
    assert "blocks.0.mlp.value" not in node_keys(diagram)
    restored = DecoderLabExplorable(query={"inspect": "attn.q"}, predict=False)
    assert restored.diagram.component.selected == "blocks.0.attn.q"


def test_lab_diagram_shows_nan_as_text() -> None:
    """eps = 0 on the all-zero row: the cards say NaN (and the invariants' failures are tagged), never an error."""
    view = DecoderLabExplorable(query={"zero_eps": "on"}, predict=False)
    diagram = view.diagram.component
    assert diagram.values["blocks.0.resid_post"] == "RMS NaN"
    assert "blocks.0.ln1.normalized" in diagram.alerts


def table_rms(view: DecoderLabExplorable) -> dict[str, str]:
    """The drawn stage table's RMS column, by the stage's local key, written as the browser writes it
    (draw.js's number(), Python's numbers.number())."""
    return {r[1]: r[3] if isinstance(r[3], str) else number(r[3]) for r in rows(view, "Block stages")}


@pytest.mark.parametrize("query", [{}, {"zero_eps": "on"}], ids=["masked-scores-infinite", "eps-0-nan"])
def test_lab_diagram_and_stage_table_show_one_rms(query: dict[str, str]) -> None:
    """The diagram's card and the stage table give every stage the same RMS, also for the scores, whose masked
    entries are −∞ (RMS "—" in both, and the table's note says why), and for stages holding NaN (NaN in both)."""
    view = DecoderLabExplorable(query=query, predict=False)
    diagram, table = view.diagram.component, table_rms(view)
    assert sorted(table) == sorted(LAB_LOCAL)
    assert np.isneginf(view.state.trace["blocks.0.attn.scores"]).any()
    for local, shown in table.items():
        assert diagram.values[f"blocks.0.{local}"] == f"RMS {shown}", local
    assert table["attn.scores"] == ("NaN" if query else NO_RMS)
    asides = [r.get("aside") for r in lab_table(view, "Block stages")["rows"]]
    assert (NO_RMS_NOTE in asides) != bool(query)
    assert (table["resid_post"] == "NaN") == bool(query)


def test_views_are_built_without_the_diagram_when_switched_off(monkeypatch) -> None:
    """BLOCKTRACE_DIAGRAM=off (the latency benchmark's comparison): no component, and the views still update."""
    monkeypatch.setenv(DIAGRAM_ENV, "off")
    for view in (TraceExplorable(predict=False), FloorExplorable(predict=False),
                 DecoderLabExplorable(predict=False)):
        assert view.diagram.component is None and in_layout(view) == []
    trace = TraceExplorable(predict=False)
    trace.state.inspect = "blocks.0.attn_out"
    assert json.loads(trace.drawing.meta)["controls"]["inspect"] == "blocks.0.attn_out"


@pytest.mark.parametrize("path", ["/explorables/transformer-block-trace", "/explorables/block-floor"])
def test_a_served_page_sends_the_diagram_without_values(server, path: str) -> None:
    """The server decides: before the commit the page's document holds the diagram's structure and names, but no
    value of the trace."""
    document = pull_document(server.url(path))
    found = [m for m in models(document) if "layouts" in m.get("attributes", {})]
    assert len(found) == 1
    data = found[0]["attributes"]
    assert data["locked"] is True
    assert data.get("alerts", {"type": "map", "entries": []}).get("entries", []) == []  # left out when empty, or empty
    texts = json.loads(data["texts"])
    assert texts["values"] == {}
    names = texts["names"]
    assert len(names) >= 8 and all("appear once you commit" in name and not re.search(r"\d\.\d", name)
                                   for name in names.values())
    assert json.loads(data["layouts"])["wide"]["nodes"]  # the structure is there
