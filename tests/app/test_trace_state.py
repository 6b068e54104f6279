"""The block-trace explorable without a server: state, trace, and the payload the browser draws from."""

from __future__ import annotations

import json
import warnings

import numpy as np
import panel as pn
import pytest

from blocktrace.app.cli import main as cli_main
from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.engine import ops
from blocktrace.explorables.transformer_block_trace import TraceExplorable, TraceState
from blocktrace.explorables.transformer_block_trace.state import DEFAULT_INPUT, ROW_KEYS

INPUT_LABEL = "Input vector"
SCALE_LABEL = "Attention update scale"
REPLACE_LABEL = "Replace instead of add residuals (broken)"
NORM_LABEL = "Normalisation"


# --- helpers: the page as the browser gets it (the component's payload) and drives it (its `sent`) -------

def explorable(**kwargs) -> TraceExplorable:
    """An explorable with the prediction gate off unless asked."""
    kwargs.setdefault("predict", False)
    return TraceExplorable(**kwargs)


def control(e: TraceExplorable, label: str) -> dict:
    """The control the browser draws with this visible label."""
    found = [c for c in json.loads(e.drawing.spec)["controls"] if c["label"] == label]
    assert len(found) == 1, f"expected one control labelled {label!r}, found {len(found)}"
    return found[0]


def send(e: TraceExplorable, name: str, value) -> None:
    """One change as the browser sends it (drawn_view/draw.js): the server checks it before the state sees it."""
    e._sent_n = getattr(e, "_sent_n", 0) + 1
    e.drawing.sent = json.dumps({"name": name, "value": value, "n": e._sent_n})


def set_control(e: TraceExplorable, label: str, value) -> None:
    send(e, control(e, label)["name"], value)


def click(e: TraceExplorable, label: str) -> None:
    c = control(e, label)
    assert c["kind"] == "button"
    send(e, "action", c["name"])


def meta(e: TraceExplorable) -> dict:
    return json.loads(e.drawing.meta)


def value_of(e: TraceExplorable, label: str):
    """What the browser's control shows: the value the payload gives it."""
    return meta(e)["controls"][control(e, label)["name"]]


def block(e: TraceExplorable, name: str, size: int | None = None) -> list[float]:
    """A block of the numbers the browser draws, from its offset in the payload."""
    m, values = meta(e), e.drawing.values
    at = m["offsets"][name]
    if size is None:
        size = next(r[3] for r in m["rows"] if r[0] == name)
    return [float(v) for v in values[at:at + size]]


def table_rows(e: TraceExplorable) -> list[tuple[str, list[str], str]]:
    """The stage table as block_trace.js writes it: (row header, cell texts, the row's class)."""
    m = meta(e)
    width = max(r[3] for r in m["rows"])
    norms = block(e, "norm", len(m["rows"]))
    rows = []
    for n, (key, label, _short, size) in enumerate(m["rows"]):
        cells = [number(v, signed=True) for v in block(e, key)] + [""] * (width - size) + [number(norms[n])]
        header = label + ("input lost here" if key == m["lost"] else "")
        classes = " ".join(c for c, on in (("lost", key == m["lost"]), ("current", key == m["controls"]["inspect"]))
                           if on)
        rows.append((header, cells, classes))
    return rows


def norms(e: TraceExplorable) -> dict[str, float]:
    m = meta(e)
    return dict(zip((r[2] for r in m["rows"]), block(e, "norm", len(m["rows"])), strict=True))


def inspected(e: TraceExplorable) -> list[float]:
    return block(e, meta(e)["controls"]["inspect"])


def swiglu(e: TraceExplorable) -> dict[str, list[float]]:
    """The SwiGLU chart's four series, unit by unit."""
    m = meta(e)
    parts = block(e, "swiglu", 4 * m["d_mlp"])
    return {f"s{n}": parts[n * m["d_mlp"]:(n + 1) * m["d_mlp"]] for n in range(4)}


def row_numbers(cells: list[str]) -> list[float]:
    """The filled cells of a stage-table row as floats (true minus signs read back as '-')."""
    return [float(c.replace("\u2212", "-")) for c in cells if c]


def html_panes(viewable) -> list[str]:
    """Every HTML pane's markup in a rendered layout."""
    return [p.object for p in viewable.select(pn.pane.HTML) if isinstance(p.object, str)]


def snapshot(e: TraceExplorable) -> dict:
    """What the page shows, copied, to compare before and after a change."""
    m = meta(e)
    return {
        "numbers": e.drawing.values.copy(),
        "rows": m.get("rows"),
        "table": table_rows(e),
        "values": {k: e.state.trace[k].copy() for k in ROW_KEYS},
    }


# --- building ---------------------------------------------------------------------------------

def test_building_the_explorable_emits_no_warnings() -> None:
    """Building a session's explorable raises no warnings (pytest runs with -W error)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TraceExplorable()


def test_controls_have_the_lessons_labels() -> None:
    """The controls carry exactly the labels the lesson names, with the slider running 0 to 3."""
    e = explorable()
    scale = control(e, SCALE_LABEL)
    assert (scale["kind"], scale["min"], scale["max"]) == ("range", 0.0, 3.0)
    assert control(e, REPLACE_LABEL)["kind"] == "checkbox"
    assert control(e, INPUT_LABEL)["kind"] == "text"
    norm = control(e, NORM_LABEL)
    assert {value for _, value in norm["options"]} == {"rmsnorm", "layernorm"}
    assert any("mean-centred" in label.lower() for label, _ in norm["options"])
    for label in ("Constant 2, 2, 2, 2", "Zero updates", "Reset"):
        assert control(e, label)["kind"] == "button"


@pytest.mark.parametrize("text", ["2, 2, 2, 2", "[2 2 2 2]", "2;2;2;2", "\u22122, 2, 2, \u22122"])
def test_vector_field_accepts_the_lessons_formats(text: str) -> None:
    """Commas, brackets with spaces, semicolons and a Unicode minus all read as the same kind of vector."""
    e = explorable()
    set_control(e, INPUT_LABEL, text)
    assert e.state.input_error == ""
    np.testing.assert_array_equal(np.abs(e.state.trace["blocks.0.resid_pre"][0]), [2.0, 2.0, 2.0, 2.0])


# --- the identities the lesson teaches -----------------------------------------------------------

def test_scale_zero_zeroes_the_attention_row_and_keeps_the_input() -> None:
    """Attention update scale 0 (set through the slider) makes attn_out zero and resid_mid equal the input."""
    e = explorable()
    set_control(e, SCALE_LABEL, 0.0)
    s = e.state
    assert s.attention_scale == 0.0
    np.testing.assert_array_equal(s.trace["blocks.0.attn_out"], 0.0)
    np.testing.assert_array_equal(s.trace["blocks.0.resid_mid"], s.trace["blocks.0.resid_pre"])
    shown = norms(e)
    assert shown["attn update"] == 0.0
    assert shown["add 1"] == shown["input"]
    rows = table_rows(e)
    assert row_numbers(rows[2][1]) == [0.0] * 5  # four components and the norm
    assert rows[3][1] == rows[0][1]  # after residual add 1 shows the input's cells
    set_control(e, "Stage to inspect", "blocks.0.attn_out")
    assert inspected(e) == [0.0, 0.0, 0.0, 0.0]


def test_replace_with_scale_zero_loses_the_input_at_the_first_residual() -> None:
    """Replace mode with scale 0 loses the input at resid_mid, and only that table row says so."""
    e = explorable()
    set_control(e, REPLACE_LABEL, True)
    set_control(e, SCALE_LABEL, 0.0)
    assert e.state.lost_at() == "blocks.0.resid_mid"
    rows = table_rows(e)
    marked = [i for i, (header, _, _) in enumerate(rows) if "input lost here" in header]
    assert marked == [ROW_KEYS.index("blocks.0.resid_mid")]
    assert "lost" in rows[marked[0]][2].split()
    np.testing.assert_array_equal(e.state.trace["blocks.0.resid_mid"], 0.0)


def test_add_mode_marks_no_row_lost() -> None:
    """With residuals added the input is never lost, whatever the scale."""
    e = explorable()
    for scale in (0.0, 1.0, 3.0):
        set_control(e, SCALE_LABEL, scale)
        assert e.state.lost_at() is None
        assert meta(e)["lost"] is None
        assert not any("input lost here" in header for header, _, _ in table_rows(e))


def test_zero_updates_preset_returns_the_input() -> None:
    """The zero-updates preset (button and method) makes the block's output equal its input."""
    e = explorable()
    click(e, "Zero updates")
    s = e.state
    assert (s.attention_scale, s.mlp_scale) == (0.0, 0.0)
    np.testing.assert_array_equal(s.trace["blocks.0.resid_post"], s.trace["blocks.0.resid_pre"])
    shown = norms(e)
    assert shown["output"] == shown["input"]
    assert inspected(e) == [1.5, -0.5, 0.25, 2.0]  # the output stage, component by component
    state = TraceState()
    state.zero_updates()
    np.testing.assert_array_equal(state.trace["blocks.0.resid_post"], state.trace["blocks.0.resid_pre"])


def test_constant_vector_survives_rmsnorm_but_not_layernorm() -> None:
    """The lesson's constant 2, 2, 2, 2: RMSNorm gives [1, 1, 1, 1], mean-centred normalisation gives zeros."""
    e = explorable()
    click(e, "Constant 2, 2, 2, 2")
    np.testing.assert_allclose(e.state.trace["blocks.0.ln1.normalized"][0], [1.0, 1.0, 1.0, 1.0], rtol=1e-6)
    assert table_rows(e)[1][1][:4] == ["+1.000"] * 4
    set_control(e, NORM_LABEL, "layernorm")
    np.testing.assert_allclose(e.state.trace["blocks.0.ln1.normalized"][0], 0.0, atol=1e-12)
    assert table_rows(e)[1][1][:4] == ["0.000"] * 4
    # Zeros in, zeros through the MLP: every SwiGLU series is zero and the output is the input.
    for series in swiglu(e).values():
        np.testing.assert_allclose(series, 0.0, atol=1e-12)
    np.testing.assert_allclose(e.state.trace["blocks.0.resid_post"], e.state.trace["blocks.0.resid_pre"],
                               atol=1e-12)


def test_swiglu_series_hold_gate_silu_value_and_product() -> None:
    """The SwiGLU detail's series are gate, SiLU(gate), value and their product, unit by unit."""
    e = explorable()
    data = swiglu(e)
    gate = np.array(data["s0"])
    np.testing.assert_allclose(data["s1"], ops.silu(gate), rtol=1e-12)
    np.testing.assert_allclose(data["s3"], np.array(data["s1"]) * np.array(data["s2"]), rtol=1e-12)
    np.testing.assert_allclose(data["s3"], e.state.trace["blocks.0.mlp.hidden"][0], rtol=1e-12)


def test_a_change_is_one_payload_to_the_same_component() -> None:
    """A change replaces the payload of the same component: nothing is rebuilt, and meta and values change
    together."""
    e = explorable()
    drawing, old = e.drawing, e.drawing.values
    old_norms = block(e, "norm", len(ROW_KEYS))
    set_control(e, SCALE_LABEL, 2.5)
    assert e.drawing is drawing
    assert e.drawing.values is not old
    assert block(e, "norm", len(ROW_KEYS)) != old_norms


def test_the_payload_is_the_same_however_the_state_was_reached() -> None:
    """Two pages brought to the same settings by different paths send the same payload."""
    early, late = explorable(), explorable()
    set_control(early, SCALE_LABEL, 2.0)
    for e in (early, late):
        set_control(e, INPUT_LABEL, "1, -2, 3, 0.5, 2, -1")
        set_control(e, SCALE_LABEL, 0.5)
        set_control(e, REPLACE_LABEL, True)
        set_control(e, "Stage to inspect", "blocks.0.mlp.hidden")
    np.testing.assert_array_equal(early.drawing.values, late.drawing.values)
    a, b = meta(early), meta(late)
    assert {k: v for k, v in a.items() if k != "ack"} == {k: v for k, v in b.items() if k != "ack"}


def test_reset_restores_every_default() -> None:
    """Reset puts every control back to its default."""
    e = explorable()
    set_control(e, INPUT_LABEL, "1, 2, 3")
    set_control(e, SCALE_LABEL, 2.0)
    set_control(e, REPLACE_LABEL, True)
    set_control(e, NORM_LABEL, "layernorm")
    click(e, "Reset")
    s = e.state
    assert (s.input_text, s.attention_scale, s.replace, s.norm) == (DEFAULT_INPUT, 1.0, False, "rmsnorm")
    assert value_of(e, SCALE_LABEL) == 1.0
    assert value_of(e, INPUT_LABEL) == DEFAULT_INPUT


# --- the same numbers as the command line --------------------------------------------------------

CLI_CASES = [
    pytest.param({}, [], id="defaults"),
    pytest.param({"attention_scale": 0.0}, ["--attention-scale", "0"], id="scale-0"),
    pytest.param({"input_text": "2, 2, 2, 2", "norm": "layernorm"}, ["--norm", "layernorm"], id="constant-layernorm"),
    pytest.param({"replace": True, "attention_scale": 2.5}, ["--residual", "replace", "--attention-scale", "2.5"],
                 id="replace-2.5"),
    pytest.param({"input_text": "[0.3 \u22121.2 4 0.5 2 \u22120.25]", "mlp_scale": 0.5},
                 ["--mlp-scale", "0.5"], id="width-6-mlp-0.5"),
    pytest.param({"input_text": ", ".join(str(i - 8) for i in range(16)), "attention_scale": 3.0},
                 ["--attention-scale", "3"], id="width-16"),
]


@pytest.mark.parametrize(("settings", "flags"), CLI_CASES)
def test_numbers_match_blocktrace_trace(settings: dict, flags: list[str], capsys: pytest.CaptureFixture) -> None:
    """Every stage equals `blocktrace trace --preset single-token --input … --json` with the same settings."""
    state = TraceState(**settings)
    assert state.input_error == ""
    argv = ["trace", "--preset", "single-token", "--input", state.input_text, *flags, "--json"]
    assert cli_main(argv) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["config"] == state.trace.config.as_dict()
    assert [stage["key"] for stage in exported["stages"]] == state.trace.keys()
    for stage in exported["stages"]:
        values = np.array(stage["values"], dtype=float)  # null (a masked score) would read as NaN
        np.testing.assert_array_equal(values, state.trace[stage["key"]], err_msg=stage["key"])
        assert stage["label"] == state.trace.stage(stage["key"]).label


# --- bad input ---------------------------------------------------------------------------------

BAD_VECTORS = [
    pytest.param("1, abc", "abc", id="word"),
    pytest.param("", "empty", id="empty"),
    pytest.param("nan, 1, 2", "NaN", id="nan"),
    pytest.param("1e400, 1", "too large", id="overflow"),
    pytest.param("3", "1 components", id="one-number"),
    pytest.param(", ".join(["1"] * 17), "17 components", id="17-numbers"),
]


@pytest.mark.parametrize(("text", "named"), BAD_VECTORS)
def test_bad_vector_keeps_the_last_good_trace(text: str, named: str) -> None:
    """An unreadable vector sets input_error naming the problem and leaves the trace and every number the page
    draws as they were; the message goes to the vector's field."""
    e = explorable()
    set_control(e, INPUT_LABEL, "2, 2, 2, 2")
    trace, before = e.state.trace, snapshot(e)
    set_control(e, INPUT_LABEL, text)
    s = e.state
    assert s.trace is trace
    assert s.vector == [2.0, 2.0, 2.0, 2.0]
    assert named in s.input_error
    after = snapshot(e)
    np.testing.assert_array_equal(after["numbers"], before["numbers"])
    assert (after["rows"], after["table"]) == (before["rows"], before["table"])
    for key in ROW_KEYS:
        np.testing.assert_array_equal(after["values"][key], before["values"][key])
    m = meta(e)
    assert named in m["error"] and m["error_field"] == "input_text"
    assert "The last good vector is still traced" in m["error"]
    set_control(e, INPUT_LABEL, "1, 2")  # a good vector clears the message
    assert s.input_error == ""
    assert meta(e)["error"] == ""


@pytest.mark.parametrize("text", ["<img src=x onerror=alert(1)>", "1, <b>2</b>", "<script>alert(1)</script>"])
def test_typed_html_is_sent_as_text(text: str) -> None:
    """HTML typed into the vector goes to the browser only as a JSON string (block_trace.js sets it with
    textContent; tests/browser checks no element appears), and into no HTML pane."""
    e = explorable()
    set_control(e, INPUT_LABEL, text)
    assert e.state.input_error
    m = meta(e)
    assert m["controls"]["input_text"] == text
    assert m["error"].startswith("Could not use this vector: ")
    for pane in html_panes(e.__panel__()):
        assert "<img" not in pane and "<script" not in pane and "<b>" not in pane


# --- URL state ----------------------------------------------------------------------------------

def test_url_state_restores_every_control() -> None:
    """input, attention_scale, residual and norm from the query string set the state and its widgets."""
    e = explorable(query={"input": "2;2;2;2", "attention_scale": "0.5", "residual": "replace", "norm": "layernorm"})
    s = e.state
    assert e.notices == []
    assert (s.input_text, s.attention_scale, s.replace, s.norm) == ("2;2;2;2", 0.5, True, "layernorm")
    assert s.vector == [2.0, 2.0, 2.0, 2.0]
    assert (value_of(e, SCALE_LABEL), value_of(e, REPLACE_LABEL)) == (0.5, True)
    assert (value_of(e, INPUT_LABEL), value_of(e, NORM_LABEL)) == ("2;2;2;2", "layernorm")
    assert s.trace.config.attention_scale == 0.5
    assert s.trace.config.residual == "replace"
    assert s.trace.config.norm == "layernorm"


@pytest.mark.parametrize(("key", "value", "param", "default"), [
    ("attention_scale", "banana", "attention_scale", 1.0),
    ("attention_scale", "9", "attention_scale", 1.0),
    ("attention_scale", "-1", "attention_scale", 1.0),
    ("attention_scale", "nan", "attention_scale", 1.0),
    ("attention_scale", "inf", "attention_scale", 1.0),
    ("residual", "oops", "replace", False),
    ("norm", "batchnorm", "norm", "rmsnorm"),
    ("input", "1, abc", "input_text", DEFAULT_INPUT),
    ("input", "1", "input_text", DEFAULT_INPUT),
])
def test_invalid_url_values_fall_back_with_a_notice(key: str, value: str, param: str, default) -> None:
    """An unusable query value leaves the default in place and adds a visible notice naming the key."""
    e = explorable(query={key: value})
    assert getattr(e.state, param) == default
    assert len(e.notices) == 1
    assert key in e.notices[0]
    assert e.state.input_error == ""
    assert any("bt-notice" in pane and key in pane for pane in html_panes(e.__panel__()))


def test_url_notices_show_values_as_text() -> None:
    """A query value holding HTML is quoted in the notice as text, never rendered."""
    e = explorable(query={"residual": "<img src=x onerror=alert(1)>"})
    panes = html_panes(e.__panel__())
    assert any("&lt;img" in pane for pane in panes)
    assert not any("<img" in pane for pane in panes)


# --- sessions ----------------------------------------------------------------------------------

def test_two_explorables_share_nothing() -> None:
    """Two sessions' explorables have their own state and component: changing one leaves the other."""
    a, b = explorable(), explorable()
    assert a.state is not b.state and a.state.prediction is not b.state.prediction
    assert a.drawing is not b.drawing and a.gate is not b.gate
    before = snapshot(b)
    set_control(a, SCALE_LABEL, 0.0)
    set_control(a, REPLACE_LABEL, True)
    set_control(a, INPUT_LABEL, "2, 2, 2, 2")
    set_control(a, NORM_LABEL, "layernorm")
    assert a.state.lost_at() == "blocks.0.resid_mid"
    after = snapshot(b)
    np.testing.assert_array_equal(after["numbers"], before["numbers"])
    assert (after["rows"], after["table"]) == (before["rows"], before["table"])
    assert (b.state.attention_scale, b.state.replace, b.state.input_text, b.state.norm) == (
        1.0, False, DEFAULT_INPUT, "rmsnorm")
    assert value_of(b, SCALE_LABEL) == 1.0


# --- predict first --------------------------------------------------------------------------------

def _gate_widgets(e: TraceExplorable) -> tuple[pn.widgets.RadioBoxGroup, pn.widgets.Button]:
    layout = e.__panel__()
    (choice,) = layout.select(pn.widgets.RadioBoxGroup)
    (commit,) = [b for b in layout.select(pn.widgets.Button) if b.label == "Commit prediction"]
    return choice, commit


def test_prediction_gate_locks_then_unlocks() -> None:
    """Controls stay locked (drawn disabled, refused by the server) until a chosen answer is committed; then all
    work."""
    e = TraceExplorable()
    assert meta(e)["locked"] is True and e.drawing.values.size == 0
    set_control(e, SCALE_LABEL, 0.0)
    assert e.state.attention_scale == 1.0 and value_of(e, SCALE_LABEL) == 1.0  # the browser's slider goes back
    choice, commit = _gate_widgets(e)
    commit.clicks += 1  # nothing chosen yet: refused
    assert not e.state.prediction.committed
    assert meta(e)["locked"] is True
    answer = e.state.prediction.choices["keep-erase"]
    choice.value = answer
    commit.clicks += 1
    assert e.state.prediction.committed and e.state.prediction.choice == "keep-erase"
    assert meta(e)["locked"] is False
    set_control(e, SCALE_LABEL, 0.0)
    assert e.state.attention_scale == 0.0
    assert answer in meta(e)["verdict"][0]  # the prediction is shown beside the result


def test_committed_prediction_is_final() -> None:
    """A second commit is refused and the first answer stays."""
    e = TraceExplorable()
    p = e.state.prediction
    assert p.commit("zero-both", "my note") is None
    assert p.commit("keep-erase") is not None
    assert (p.choice, p.note) == ("zero-both", "my note")
    assert meta(e)["locked"] is False


def test_predict_off_unlocks_without_a_prediction() -> None:
    """?predict=off (predict=False) skips the gate: every control is enabled at once."""
    e = TraceExplorable(predict=False)
    assert e.state.prediction.skipped and not e.state.prediction.committed
    assert meta(e)["locked"] is False
