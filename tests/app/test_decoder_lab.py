"""The decoder-block lab without a server: controls, the NaN path, URL state, fixtures and downloads."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from blocktrace.explorables.decoder_block_lab import DecoderLabExplorable, LabState
from blocktrace.explorables.decoder_block_lab import state as state_module
from blocktrace.explorables.decoder_block_lab.state import CORRECT_PREDICTION, QUERY_KEYS, VARIANTS
from blocktrace.explorables.decoder_block_lab.worked import ATOL, FIXTURE, RTOL, worked_example
from blocktrace.explorables.engine import run_preset
from blocktrace.explorables.engine.export import CSV_COLUMNS
from tests.drawn import meta, press, send
from tests.lab_page import chart, drawn, rows, table


@pytest.fixture
def lab() -> DecoderLabExplorable:
    view = DecoderLabExplorable(predict=False)
    view.__panel__()
    return view


def _snapshot(view: DecoderLabExplorable) -> dict:
    """Everything a control can change, as the browser draws it: each table with its numbers, each chart's numbers,
    each sentence."""
    m, _ = drawn(view)
    found: dict = {
        "shape_table": rows(view, "Shape of every tensor"), "param_table": rows(view, "Parameters of one block"),
        "exercise": m["exercise"], "stage_table": rows(view, "Block stages"), "invariants": m["invariants"],
        "norms": chart(view, "bars"), "norms_table": rows(view, "The vector and its two"),
        "norms_verdict": m["norms"]["verdict"], "act_curves": chart(view, "curves"),
        "act_points": chart(view, "points"),
        "delta": chart(view, "delta"), "badge": m["causal"]["badge"], "causal_table": rows(view, "Change in the block"),
        "depth_table": rows(view, "After "), "depth widths": [line["current"] for line in m["depth"]["lines"]],
        "worked_summary": table(view, "The lesson's seed-42 block"),  # no numbers: the marked row is in it
        "worked_detail": [rows(view, t["caption"]) for t in m["worked"]["detail"]],
        "break_summary": m["symptoms"], "live": m["live"],
    }
    for h in range(4):
        found[f"head{h}"] = chart(view, "heads", h) if h < len(m["heads"]) else None
    for k, variant in enumerate(VARIANTS):
        found[f"depth {variant}"] = (chart(view, "rms", k), chart(view, "grad", k))
    return found


def _changed(before: dict, after: dict) -> set[str]:
    def same(a, b) -> bool:
        try:
            np.testing.assert_equal(a, b)
            return True
        except AssertionError:
            return False
    return {k for k in before if not same(before[k], after[k])}


CONTROLS = [
    ("B", 2, {"shape_table", "stage_table", "live"}),
    ("T", 6, {"shape_table", "stage_table", "head0", "delta"}),
    ("d", 16, {"shape_table", "param_table", "exercise", "delta", "act_points"}),
    ("expansion", 8, {"shape_table", "param_table", "exercise", "act_points"}),
    ("norm", "layernorm", {"invariants", "param_table", "head0", "act_points", "depth ('pre', 'add')"}),
    ("mlp", "gelu", {"shape_table", "param_table", "act_points", "stage_table"}),
    ("placement", "post", {"invariants", "shape_table", "stage_table", "depth widths", "break_summary"}),
    ("causal", False, {"invariants", "head0", "badge", "delta", "break_summary"}),
    ("heads", 2, {"shape_table", "stage_table", "head0", "head1"}),
    ("residual", "replace", {"invariants", "depth widths", "break_summary"}),
    ("zero_eps", True, {"invariants", "stage_table", "break_summary"}),
    ("wrong_split", True, {"shape_table", "invariants", "break_summary"}),
    ("corrupt", 1, {"delta", "badge", "causal_table"}),
    ("corrupt_value", "-5", {"delta", "causal_table"}),
    ("blocks", 12, {"depth ('pre', 'add')", "depth ('post', 'replace')", "depth_table"}),
    ("norm_text", "1, 2, 3", {"norms", "norms_table", "norms_verdict"}),
    ("norm_eps", 0.1, {"norms", "norms_table"}),
    ("worked_name", "Q", {"worked_summary", "worked_detail"}),
]


@pytest.mark.parametrize(("name", "value", "expected"), CONTROLS, ids=[c[0] for c in CONTROLS])
def test_each_control_changes_what_is_shown_in_place(lab: DecoderLabExplorable, name: str, value, expected) -> None:
    """Every control, sent as the browser sends it, updates what is drawn with one new payload to the same
    component, never a new component or spec."""
    drawing, spec = lab.drawing, lab.drawing.spec
    before = _snapshot(lab)
    sent: list = []
    drawing.param.watch(lambda e: sent.append(e.new), "meta")
    send(lab, name, value)
    changed = _changed(before, _snapshot(lab))
    assert expected <= changed, f"{name}: expected {expected - changed} to change"
    assert lab.drawing is drawing and drawing.spec == spec and len(sent) == 1


def test_controls_carry_the_issues_labels_and_drive_the_state(lab: DecoderLabExplorable) -> None:
    """The controls are labelled as the issue names them, and a change from the browser moves the state."""
    labels = {c["label"] for c in json.loads(lab.drawing.spec)["controls"]}
    assert {"Normalisation", "MLP", "Placement", "Causal mask", "Heads", "Corrupt position", "Corrupt value",
            "Blocks"} <= labels
    send(lab, "norm", "layernorm")
    send(lab, "corrupt", 3)
    send(lab, "blocks", 7)
    send(lab, "break_mask", True)
    assert (lab.state.norm, lab.state.corrupt, lab.state.blocks, lab.state.causal) == ("layernorm", 3, 7, False)
    lab.state.placement = "post"
    c = meta(lab)["controls"]
    assert c["break_post"] is True and c["placement"] == "post"


def test_heatmaps_show_one_figure_per_head(lab: DecoderLabExplorable) -> None:
    """As many attention heatmaps are drawn as there are heads."""
    lab.state.heads = 4
    m = meta(lab)
    assert [h["title"] for h in m["heads"]] == [f"Attention weights, head {h}" for h in range(4)]
    assert chart(lab, "heads", 3).size == lab.state.T ** 2


def test_corrupt_position_follows_the_sequence_length(lab: DecoderLabExplorable) -> None:
    """Shortening the sequence pulls the corrupt position (and its slider) back inside it."""
    lab.state.T = 6
    lab.state.corrupt = 5
    lab.state.T = 3
    m = meta(lab)
    assert lab.state.corrupt == 2 and m["bounds"]["corrupt"] == [0, 2] and m["controls"]["corrupt"] == 2


def test_causal_badge_passes_with_the_mask_and_fails_without(lab: DecoderLabExplorable) -> None:
    """The lesson's default test (position 2, value 999): PASS with the mask, FAIL without, in words."""
    assert "PASS" in meta(lab)["causal"]["badge"][1] and np.all(lab.state.delta[:2] == 0.0)
    lab.state.causal = False
    assert "FAIL" in meta(lab)["causal"]["badge"][1] and np.any(lab.state.delta[:2] != 0.0)


def test_eps_zero_nan_path_renders_without_error(lab: DecoderLabExplorable) -> None:
    """eps = 0 with a zero row gives NaN shown as such in tables, heatmaps and depth, and nothing raises or warns."""
    lab.state.zero_eps = True
    assert np.isnan(lab.state.trace.output).any()
    m = meta(lab)
    assert any(r.get("note") == "NaN" for r in table(lab, "Block stages")["rows"])
    assert any(item[1] == "✗ fails" for item in m["invariants"]["items"])
    assert "NaN" in m["depth"]["nan"]
    assert "FAIL" in m["causal"]["badge"][1]  # NaN cannot be shown to be 0
    lab.state.norm_text, lab.state.norm_eps = "0, 0, 0, 0", 0.0
    assert any(math.isnan(v) for r in rows(lab, "The vector and its two") for v in r[1:])
    assert "NaN" in meta(lab)["norms"]["verdict"]
    lab.state.norm_eps = 1e-6
    assert not any(math.isnan(v) for r in rows(lab, "The vector and its two") for v in r[1:])


def test_wrong_split_is_shown_as_a_message_not_an_error_page(lab: DecoderLabExplorable) -> None:
    """The wrong gate/value split shows its shapes and numpy's message in the shape table and the invariants."""
    lab.state.wrong_split = True
    shapes = rows(lab, "Shape of every tensor")
    assert any(r[0].startswith("Broken split") for r in shapes)
    assert any("mismatch" in str(cell) for r in shapes for cell in r)
    assert "SwiGLU split keeps the shapes" in [item[2] for item in meta(lab)["invariants"]["items"]]
    lab.state.mlp = "gelu"
    assert any("GELU has no gate/value split" in item[1] for item in meta(lab)["symptoms"])


def test_constant_vector_survives_rms_norm_but_not_layer_norm(lab: DecoderLabExplorable) -> None:
    """The constant-vector preset: RMSNorm gives all ones, LayerNorm all zeros, and the verdict says so."""
    press(lab, "Constant 2, 2, 2, 2")
    out = lab.state.normalised()
    np.testing.assert_allclose(out["RMSNorm"], np.ones(4), atol=1e-6)
    np.testing.assert_allclose(out["LayerNorm"], np.zeros(4))
    assert "constant vector" in meta(lab)["norms"]["verdict"]


def test_typed_vector_errors_are_shown_as_text_and_the_last_good_vector_stays(lab: DecoderLabExplorable) -> None:
    """A vector that does not parse leaves the last good one in place; the message is text, never markup: it
    travels with no <, > or & in the JSON and the browser sets it with textContent."""
    send(lab, "norm_text", "1, <img src=x onerror=alert(1)>")
    assert lab.state.norm_vector == [3.0, -1.0, 0.5, 2.0]
    assert "<img" in meta(lab)["errors"]["norm_text"] and not {"<", ">", "&"} & set(lab.drawing.meta)


def test_default_lab_is_the_decoder_lab_preset(lab: DecoderLabExplorable) -> None:
    """With the defaults the lab's block is exactly `blocktrace trace --preset decoder-lab`."""
    preset = run_preset("decoder-lab")
    for stage in preset:
        np.testing.assert_array_equal(lab.state.trace[stage.key][0], stage.values)


# --- URL state ------------------------------------------------------------------------------------


def test_url_state_is_restored() -> None:
    """Every documented key sets its control."""
    query = {"norm": "layernorm", "mlp": "gelu", "placement": "post", "causal": "off", "heads": "2", "corrupt": "1",
             "corrupt_value": "-3.5", "blocks": "10", "d": "32", "T": "6", "B": "2", "expansion": "2",
             "residual": "replace", "zero_eps": "on", "split": "wrong"}
    view = DecoderLabExplorable(query=query, predict=False)
    s = view.state
    assert (s.norm, s.mlp, s.placement, s.causal, s.heads, s.corrupt, s.corrupt_value, s.blocks, s.d, s.T) == (
        "layernorm", "gelu", "post", False, 2, 1, -3.5, 10, 32, 6)
    assert (s.B, s.expansion, s.residual, s.zero_eps, s.wrong_split) == (2, 2, "replace", True, True)
    assert view.notices == []
    assert s.trace.output.shape == (2, 6, 32) and len(s.depth[("pre", "add")]["depth"]) == 11
    for name, spec in QUERY_KEYS.items():
        assert spec.read(spec.write(getattr(s, spec.param))) == getattr(s, spec.param), name


def test_invalid_url_values_fall_back_with_a_notice() -> None:
    """Unusable values keep the defaults and each gets a notice; markup in a value is never rendered."""
    query = {"norm": "<b>x</b>", "heads": "3", "d": "9", "T": "99", "blocks": "0", "corrupt": "x",
             "corrupt_value": "nan", "causal": "maybe"}
    view = DecoderLabExplorable(query=query, predict=False)
    s = view.state
    assert (s.norm, s.heads, s.d, s.T, s.blocks, s.corrupt, s.corrupt_value, s.causal) == (
        "rmsnorm", 1, 8, 4, 48, 2, 999.0, True)
    assert len(view.notices) == len(query)
    layout = view.__panel__()
    assert layout is not None


def test_a_corrupt_position_beyond_t_is_pulled_inside() -> None:
    """A link naming position 7 of a 3-position sequence shows the last position instead."""
    view = DecoderLabExplorable(query={"T": "3", "corrupt": "7"}, predict=False)
    m = meta(view)
    assert view.state.corrupt == 2 and m["controls"]["corrupt"] == 2 and m["bounds"]["corrupt"] == [0, 2]


# --- the worked example ----------------------------------------------------------------------------


def test_worked_example_matches_the_fixtures_within_float32_tolerance(lab: DecoderLabExplorable) -> None:
    """Every intermediate of the lesson's seed-42 block matches the PyTorch fixture to ATOL + RTOL·|value|, and
    says so."""
    w = lab.state.worked
    assert FIXTURE.exists() and not w.error
    assert len(w.rows) == 16 and w.all_match
    for row in w.rows:
        assert row.engine.shape == row.reference.shape, row.name
        np.testing.assert_allclose(row.engine, row.reference, rtol=RTOL, atol=ATOL, err_msg=row.name)
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    case = next(c for c in data["cases"] if c["name"] == "lesson-seed-42")
    np.testing.assert_allclose(w.row("X2").engine, np.asarray(case["tensors"]["X2"][0]), rtol=RTOL, atol=ATOL)
    summary = table(lab, "The lesson's seed-42 block")
    assert "all match" in summary["caption"] and not any("✗" in str(c) for r in summary["rows"] for c in r["cells"])


def test_missing_fixture_shows_a_notice_instead_of_crashing(monkeypatch, tmp_path: Path) -> None:
    """Without reference.json the worked-example panel says so plainly, and the rest of the lab works."""
    monkeypatch.setattr(state_module, "worked_example", lambda: worked_example(tmp_path / "reference.json"))
    view = DecoderLabExplorable(predict=False)
    view.__panel__()
    m = meta(view)
    assert "were not found" in m["worked"]["error"] and "detail" not in m["worked"]
    assert "worked_name" in m["disabled"]
    view.state.norm = "layernorm"
    assert any("mean 0 and std 1" in item[2] + item[3] for item in meta(view)["invariants"]["items"])


def test_broken_fixture_shows_a_notice(tmp_path: Path) -> None:
    """A fixture file that is not the expected JSON gives a readable notice, not an exception."""
    bad = tmp_path / "reference.json"
    bad.write_text('{"cases": []}', encoding="utf-8")
    assert "could not be read" in worked_example(bad).error


# --- downloads, prediction, sessions --------------------------------------------------------------


def test_downloads_produce_valid_json_and_csv(lab: DecoderLabExplorable) -> None:
    """The CSV and JSON buttons hand over the engine's export of the current trace (NaN as null in JSON)."""
    lab.state.zero_eps = True
    data = json.loads(lab.downloads.json.callback().getvalue().decode())
    assert data["config"]["eps"] == 0.0 and [s["key"] for s in data["stages"]] == lab.state.trace.keys()
    rows = list(csv.DictReader(io.StringIO(lab.downloads.csv.callback().getvalue().decode())))
    assert list(rows[0]) == CSV_COLUMNS
    assert len(rows) == sum(s.values.size for s in lab.state.trace)
    assert lab.downloads.csv.filename.endswith(".csv") and lab.downloads.json.filename.endswith(".json")


def test_prediction_gate_locks_the_controls_until_committed() -> None:
    """Controls stay locked and the causal result hidden until a prediction is committed; then the verdict shows."""
    view = DecoderLabExplorable()
    m = meta(view)
    assert m["locked"] is True and m["causal"] is None and "causal test" not in m["live"]  # no spoiler
    send(view, "norm", "layernorm")
    assert view.state.norm == "rmsnorm" and meta(view)["controls"]["norm"] == "rmsnorm"
    assert view.state.prediction.commit(CORRECT_PREDICTION, "only attention mixes positions") is None
    m = meta(view)
    assert m["locked"] is False and m["causal"] is not None and "causal test PASS" in m["live"]
    assert "matches what the lab shows" in m["causal"]["prediction"][1]
    send(view, "norm", "layernorm")
    assert view.state.norm == "layernorm"
    unlocked = DecoderLabExplorable(predict=False)
    assert meta(unlocked)["locked"] is False


def test_sessions_share_no_components_models_or_state() -> None:
    """Two sessions each build their own state, drawing and diagram."""
    a, b = DecoderLabExplorable(predict=False), DecoderLabExplorable(predict=False)
    assert a.state is not b.state and a.drawing is not b.drawing and a.diagram is not b.diagram
    send(a, "norm", "layernorm")
    assert b.state.norm == "rmsnorm" and meta(b)["controls"]["norm"] == "rmsnorm"


def test_state_alone_has_no_view() -> None:
    """The state computes every derived value on its own (no Panel objects needed)."""
    s = LabState()
    assert s.trace is not None and s.delta.shape == (4, 8) and len(s.depth) == 4 and s.norm_vector
