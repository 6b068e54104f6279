"""The decoder-block lab without a server: controls, the NaN path, URL state, fixtures and downloads."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from blocktrace.explorables.decoder_block_lab import DecoderLabExplorable, LabState
from blocktrace.explorables.decoder_block_lab import state as state_module
from blocktrace.explorables.decoder_block_lab.state import CORRECT_PREDICTION, QUERY_KEYS
from blocktrace.explorables.decoder_block_lab.worked import ATOL, FIXTURE, RTOL, worked_example
from blocktrace.explorables.engine import run_preset
from blocktrace.explorables.engine.export import CSV_COLUMNS


@pytest.fixture
def lab() -> DecoderLabExplorable:
    view = DecoderLabExplorable(predict=False)
    view.__panel__()
    return view


def _snapshot(view: DecoderLabExplorable) -> dict:
    """Everything a control can change: every data source's data and every HTML pane's markup."""
    sources = {
        "norms": view.norms_src, "act_curves": view.act_curves, "act_points": view.act_points,
        "delta": view.delta_src, **{f"head{h}": src for h, (_, src) in enumerate(view.heads)},
        **{f"depth {v}": src for v, src in view.depth_srcs.items()},
    }
    panes = {name: pane for name, pane in vars(view).items() if hasattr(pane, "object") and isinstance(
        getattr(pane, "object", None), str)}
    return {
        **{name: copy.deepcopy(dict(src.data)) for name, src in sources.items()},
        **{name: pane.object for name, pane in panes.items()},
        "depth widths": [r.glyph.line_width for rs in view.depth_renderers.values() for r in rs],
    }


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
    ("corrupt_value", -5.0, {"delta", "causal_table"}),
    ("blocks", 12, {"depth ('pre', 'add')", "depth ('post', 'replace')", "depth_table"}),
    ("norm_text", "1, 2, 3", {"norms", "norms_table", "norms_verdict"}),
    ("norm_eps", 0.1, {"norms", "norms_table"}),
    ("worked_name", "Q", {"worked_summary", "worked_detail"}),
]


@pytest.mark.parametrize(("name", "value", "expected"), CONTROLS, ids=[c[0] for c in CONTROLS])
def test_each_control_changes_what_is_shown_in_place(lab: DecoderLabExplorable, name: str, value, expected) -> None:
    """Every control updates its views by replacing source data and pane markup, never by building new figures."""
    figures = [lab.norms_fig, lab.act_fig, lab.delta_fig, lab.rms_fig, lab.grad_fig, *(f for f, _ in lab.heads)]
    before = _snapshot(lab)
    setattr(lab.state, name, value)
    changed = _changed(before, _snapshot(lab))
    assert expected <= changed, f"{name}: expected {expected - changed} to change"
    assert figures == [lab.norms_fig, lab.act_fig, lab.delta_fig, lab.rms_fig, lab.grad_fig,
                       *(f for f, _ in lab.heads)]


def test_widgets_carry_the_issues_labels_and_drive_the_state(lab: DecoderLabExplorable) -> None:
    """The controls are labelled as the issue names them, and moving a widget moves the state."""
    labels = {w.label for w in lab.controls}
    assert {"Normalisation", "MLP", "Placement", "Causal mask", "Heads", "Corrupt position", "Corrupt value",
            "Blocks"} <= labels
    lab.w_norm.value = "layernorm"
    lab.w_corrupt.value = 3
    lab.w_blocks.value = 7
    lab.w_break_mask.value = True
    assert (lab.state.norm, lab.state.corrupt, lab.state.blocks, lab.state.causal) == ("layernorm", 3, 7, False)
    lab.state.placement = "post"
    assert lab.w_break_post.value is True and lab.w_placement.value == "post"


def test_heatmaps_show_one_figure_per_head(lab: DecoderLabExplorable) -> None:
    """Only as many attention heatmaps are visible as there are heads."""
    lab.state.heads = 4
    assert lab.head_box.objects == lab.head_panes[:4]
    assert len(lab.heads[3][1].data["value"]) == lab.state.T ** 2


def test_corrupt_position_follows_the_sequence_length(lab: DecoderLabExplorable) -> None:
    """Shortening the sequence pulls the corrupt position (and its slider) back inside it."""
    lab.state.T = 6
    lab.state.corrupt = 5
    lab.state.T = 3
    assert lab.state.corrupt == 2 and lab.w_corrupt.end == 2 and lab.w_corrupt.value == 2


def test_causal_badge_passes_with_the_mask_and_fails_without(lab: DecoderLabExplorable) -> None:
    """The lesson's default test (position 2, value 999): PASS with the mask, FAIL without, in words."""
    assert "PASS" in lab.badge.object and np.all(lab.state.delta[:2] == 0.0)
    lab.state.causal = False
    assert "FAIL" in lab.badge.object and np.any(lab.state.delta[:2] != 0.0)


def test_eps_zero_nan_path_renders_without_error(lab: DecoderLabExplorable) -> None:
    """eps = 0 with a zero row gives NaN shown as such in tables, heatmaps and depth, and nothing raises or warns."""
    lab.state.zero_eps = True
    assert np.isnan(lab.state.trace.output).any()
    assert "NaN" in lab.stage_table.object and "✗ fails" in lab.invariants.object
    assert "NaN" in lab.depth_note.object
    assert "FAIL" in lab.badge.object  # NaN cannot be shown to be 0
    lab.state.norm_text, lab.state.norm_eps = "0, 0, 0, 0", 0.0
    assert "NaN" in lab.norms_table.object and "NaN" in lab.norms_verdict.object
    lab.state.norm_eps = 1e-6
    assert "NaN" not in lab.norms_table.object


def test_wrong_split_is_shown_as_a_message_not_an_error_page(lab: DecoderLabExplorable) -> None:
    """The wrong gate/value split shows its shapes and numpy's message in the shape table and the invariants."""
    lab.state.wrong_split = True
    assert "Broken split" in lab.shape_table.object and "mismatch" in lab.shape_table.object
    assert "SwiGLU split keeps the shapes" in lab.invariants.object
    lab.state.mlp = "gelu"
    assert "GELU has no gate/value split" in lab.break_summary.object


def test_constant_vector_survives_rms_norm_but_not_layer_norm(lab: DecoderLabExplorable) -> None:
    """The constant-vector preset: RMSNorm gives all ones, LayerNorm all zeros, and the verdict says so."""
    lab.w_constant.clicks += 1
    out = lab.state.normalised()
    np.testing.assert_allclose(out["RMSNorm"], np.ones(4), atol=1e-6)
    np.testing.assert_allclose(out["LayerNorm"], np.zeros(4))
    assert "constant vector" in lab.norms_verdict.object


def test_typed_vector_errors_are_shown_escaped_and_the_last_good_vector_stays(lab: DecoderLabExplorable) -> None:
    """A vector that does not parse leaves the last good one in place; the message is text, never markup."""
    lab.state.norm_text = "1, <img src=x onerror=alert(1)>"
    assert lab.state.norm_vector == [3.0, -1.0, 0.5, 2.0]
    assert "&lt;img" in lab.vector_error.object and "<img" not in lab.vector_error.object


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
    assert view.state.corrupt == 2 and view.w_corrupt.value == 2


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
    assert "all match" in lab.worked_summary.object and "✗" not in lab.worked_summary.object


def test_missing_fixture_shows_a_notice_instead_of_crashing(monkeypatch, tmp_path: Path) -> None:
    """Without reference.json the worked-example panel says so plainly, and the rest of the lab works."""
    monkeypatch.setattr(state_module, "worked_example", lambda: worked_example(tmp_path / "reference.json"))
    view = DecoderLabExplorable(predict=False)
    view.__panel__()
    assert "were not found" in view.worked_summary.object and view.worked_detail.object == ""
    assert view.w_worked.disabled
    view.state.norm = "layernorm"
    assert "mean 0 and std 1" in view.invariants.object


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
    assert all(w.disabled for w in view.controls)
    assert not view.causal_results.visible and "causal test" not in view.live.object  # no spoiler
    assert view.state.prediction.commit(CORRECT_PREDICTION, "only attention mixes positions") is None
    assert not any(w.disabled for w in view.controls)
    assert view.causal_results.visible and "causal test PASS" in view.live.object
    assert "matches what the lab shows" in view.prediction_result.object
    unlocked = DecoderLabExplorable(predict=False)
    assert not any(w.disabled for w in unlocked.controls)


def test_sessions_share_no_widgets_models_or_state() -> None:
    """Two sessions each build their own state, widgets and figures."""
    a, b = DecoderLabExplorable(predict=False), DecoderLabExplorable(predict=False)
    assert a.state is not b.state and a.w_norm is not b.w_norm and a.delta_fig is not b.delta_fig
    a.state.norm = "layernorm"
    assert b.state.norm == "rmsnorm" and b.w_norm.value == "rmsnorm"


def test_state_alone_has_no_view() -> None:
    """The state computes every derived value on its own (no Panel objects needed)."""
    s = LabState()
    assert s.trace is not None and s.delta.shape == (4, 8) and len(s.depth) == 4 and s.norm_vector
