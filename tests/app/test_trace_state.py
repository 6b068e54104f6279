"""The block-trace explorable without a server: state, trace, Bokeh data sources and HTML panes."""

from __future__ import annotations

import json
import warnings
from html.parser import HTMLParser

import numpy as np
import panel as pn
import pytest

from blocktrace.app.cli import main as cli_main
from blocktrace.explorables.engine import ops
from blocktrace.explorables.transformer_block_trace import TraceExplorable, TraceState
from blocktrace.explorables.transformer_block_trace.state import DEFAULT_INPUT, ROW_KEYS

INPUT_LABEL = "Input vector"
SCALE_LABEL = "Attention update scale"
REPLACE_LABEL = "Replace instead of add residuals (broken)"
NORM_LABEL = "Normalisation"


# --- helpers ------------------------------------------------------------------------------------

class _TableReader(HTMLParser):
    """Rows of the first <table>: (row header text, cell texts, the <tr>'s class)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[str], str]] = []
        self._in_body = False
        self._cell: list[str] | None = None
        self._header = ""
        self._cells: list[str] = []
        self._class = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._header, self._cells, self._class = "", [], dict(attrs).get("class") or ""
        elif tag in ("th", "td") and self._in_body:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False
        elif tag == "th" and self._cell is not None:
            self._header, self._cell = "".join(self._cell).strip(), None
        elif tag == "td" and self._cell is not None:
            self._cells.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._in_body:
            self.rows.append((self._header, self._cells, self._class))

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_rows(markup: str) -> list[tuple[str, list[str], str]]:
    reader = _TableReader()
    reader.feed(markup)
    return reader.rows


def row_numbers(cells: list[str]) -> list[float]:
    """The filled cells of a stage-table row as floats (true minus signs read back as '-')."""
    return [float(c.replace("\u2212", "-")) for c in cells if c]


def explorable(**kwargs) -> TraceExplorable:
    """An explorable with the prediction gate off unless asked."""
    kwargs.setdefault("predict", False)
    return TraceExplorable(**kwargs)


def widget(e: TraceExplorable, label: str) -> pn.widgets.Widget:
    """The control with this visible label."""
    found = [w for w in e.controls if w.label == label]
    assert len(found) == 1, f"expected one control labelled {label!r}, found {len(found)}"
    return found[0]


def click(e: TraceExplorable, label: str) -> None:
    button = widget(e, label)
    button.clicks += 1


def html_panes(viewable) -> list[str]:
    """Every HTML pane's markup in a rendered layout."""
    return [p.object for p in viewable.select(pn.pane.HTML) if isinstance(p.object, str)]


def snapshot(e: TraceExplorable) -> dict:
    """What the page shows, copied, to compare before and after a change."""
    return {
        "norm": dict(e.figures.norm_src.data),
        "comp": dict(e.figures.comp_src.data),
        "swiglu": dict(e.figures.swiglu_src.data),
        "table": e.stage_table.object,
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
    scale = widget(e, SCALE_LABEL)
    assert (scale.start, scale.end) == (0.0, 3.0)
    assert isinstance(widget(e, REPLACE_LABEL), pn.widgets.Checkbox)
    assert isinstance(widget(e, INPUT_LABEL), pn.widgets.TextInput)
    norm = widget(e, NORM_LABEL)
    assert set(norm.values) == {"rmsnorm", "layernorm"}
    assert any("mean-centred" in label.lower() for label in norm.labels)
    for label in ("Constant 2, 2, 2, 2", "Zero updates", "Reset"):
        assert isinstance(widget(e, label), pn.widgets.Button)


@pytest.mark.parametrize("text", ["2, 2, 2, 2", "[2 2 2 2]", "2;2;2;2", "\u22122, 2, 2, \u22122"])
def test_vector_field_accepts_the_lessons_formats(text: str) -> None:
    """Commas, brackets with spaces, semicolons and a Unicode minus all read as the same kind of vector."""
    e = explorable()
    widget(e, INPUT_LABEL).value = text
    assert e.state.input_error == ""
    np.testing.assert_array_equal(np.abs(e.state.trace["blocks.0.resid_pre"][0]), [2.0, 2.0, 2.0, 2.0])


# --- the identities the lesson teaches -----------------------------------------------------------

def test_scale_zero_zeroes_the_attention_row_and_keeps_the_input() -> None:
    """Attention update scale 0 (set through the slider) makes attn_out zero and resid_mid equal the input."""
    e = explorable()
    widget(e, SCALE_LABEL).value = 0.0
    s = e.state
    assert s.attention_scale == 0.0
    np.testing.assert_array_equal(s.trace["blocks.0.attn_out"], 0.0)
    np.testing.assert_array_equal(s.trace["blocks.0.resid_mid"], s.trace["blocks.0.resid_pre"])
    norms = dict(zip(e.figures.norm_src.data["stage"], e.figures.norm_src.data["norm"], strict=True))
    assert norms["attn update"] == 0.0
    assert norms["add 1"] == norms["input"]
    rows = table_rows(e.stage_table.object)
    assert row_numbers(rows[2][1]) == [0.0] * 5  # four components and the norm
    assert rows[3][1] == rows[0][1]  # after residual add 1 shows the input's cells
    s.inspect = "blocks.0.attn_out"
    assert e.figures.comp_src.data["value"] == [0.0, 0.0, 0.0, 0.0]


def test_replace_with_scale_zero_loses_the_input_at_the_first_residual() -> None:
    """Replace mode with scale 0 loses the input at resid_mid, and only that table row says so."""
    e = explorable()
    widget(e, REPLACE_LABEL).value = True
    widget(e, SCALE_LABEL).value = 0.0
    assert e.state.lost_at() == "blocks.0.resid_mid"
    rows = table_rows(e.stage_table.object)
    marked = [i for i, (header, _, _) in enumerate(rows) if "input lost here" in header]
    assert marked == [ROW_KEYS.index("blocks.0.resid_mid")]
    assert "lost" in rows[marked[0]][2].split()
    np.testing.assert_array_equal(e.state.trace["blocks.0.resid_mid"], 0.0)


def test_add_mode_marks_no_row_lost() -> None:
    """With residuals added the input is never lost, whatever the scale."""
    e = explorable()
    for scale in (0.0, 1.0, 3.0):
        widget(e, SCALE_LABEL).value = scale
        assert e.state.lost_at() is None
        assert "input lost here" not in e.stage_table.object


def test_zero_updates_preset_returns_the_input() -> None:
    """The zero-updates preset (button and method) makes the block's output equal its input."""
    e = explorable()
    click(e, "Zero updates")
    s = e.state
    assert (s.attention_scale, s.mlp_scale) == (0.0, 0.0)
    np.testing.assert_array_equal(s.trace["blocks.0.resid_post"], s.trace["blocks.0.resid_pre"])
    norms = e.figures.norm_src.data["norm"]
    assert norms[-1] == norms[0]
    assert e.figures.comp_src.data["value"] == [1.5, -0.5, 0.25, 2.0]  # the output stage, component by component
    state = TraceState()
    state.zero_updates()
    np.testing.assert_array_equal(state.trace["blocks.0.resid_post"], state.trace["blocks.0.resid_pre"])


def test_constant_vector_survives_rmsnorm_but_not_layernorm() -> None:
    """The lesson's constant 2, 2, 2, 2: RMSNorm gives [1, 1, 1, 1], mean-centred normalisation gives zeros."""
    e = explorable()
    click(e, "Constant 2, 2, 2, 2")
    np.testing.assert_allclose(e.state.trace["blocks.0.ln1.normalized"][0], [1.0, 1.0, 1.0, 1.0], rtol=1e-6)
    assert table_rows(e.stage_table.object)[1][1][:4] == ["+1.000"] * 4
    widget(e, NORM_LABEL).value = "layernorm"
    np.testing.assert_allclose(e.state.trace["blocks.0.ln1.normalized"][0], 0.0, atol=1e-12)
    assert table_rows(e.stage_table.object)[1][1][:4] == ["0.000"] * 4
    # Zeros in, zeros through the MLP: every SwiGLU series is zero and the output is the input.
    for series in ("s0", "s1", "s2", "s3"):
        np.testing.assert_allclose(e.figures.swiglu_src.data[series], 0.0, atol=1e-12)
    np.testing.assert_allclose(e.state.trace["blocks.0.resid_post"], e.state.trace["blocks.0.resid_pre"],
                               atol=1e-12)


def test_swiglu_source_holds_gate_silu_value_and_product() -> None:
    """The SwiGLU detail's series are gate, SiLU(gate), value and their product, unit by unit."""
    e = explorable()
    data = e.figures.swiglu_src.data
    gate = np.array(data["s0"])
    np.testing.assert_allclose(data["s1"], ops.silu(gate), rtol=1e-12)
    np.testing.assert_allclose(data["s3"], np.array(data["s1"]) * np.array(data["s2"]), rtol=1e-12)
    np.testing.assert_allclose(data["s3"], e.state.trace["blocks.0.mlp.hidden"][0], rtol=1e-12)


def test_sources_are_updated_in_place() -> None:
    """A change replaces the data of the same ColumnDataSources and panes; nothing is rebuilt."""
    e = explorable()
    before = (e.figures.norm_src, e.figures.comp_src, e.figures.swiglu_src, e.figures.norm_fig, e.stage_table)
    old_norms = list(e.figures.norm_src.data["norm"])
    widget(e, SCALE_LABEL).value = 2.5
    assert (e.figures.norm_src, e.figures.comp_src, e.figures.swiglu_src, e.figures.norm_fig, e.stage_table) == before
    assert e.figures.norm_src.data["norm"] != old_norms


def test_figures_built_after_a_change_match_figures_updated_by_it() -> None:
    """A served page builds its figures after loading: built late or updated in place, they show the same data."""
    early, late = explorable(), explorable()
    built = early.figures  # as on a page whose figures had arrived before the changes
    for e in (early, late):
        widget(e, INPUT_LABEL).value = "1, -2, 3, 0.5, 2, -1"
        widget(e, SCALE_LABEL).value = 0.5
        widget(e, REPLACE_LABEL).value = True
        e.state.inspect = "blocks.0.mlp.hidden"
    assert early.figures is built
    for name in ("norm_src", "norm_base", "comp_src", "swiglu_src"):
        assert getattr(early.figures, name).data == getattr(late.figures, name).data, name
    assert early.figures.norm_ref.location == late.figures.norm_ref.location
    for name in ("comp_fig", "swiglu_fig"):
        assert list(getattr(early.figures, name).x_range.factors) == list(getattr(late.figures, name).x_range.factors)


def test_reset_restores_every_default() -> None:
    """Reset puts every control back to its default."""
    e = explorable()
    widget(e, INPUT_LABEL).value = "1, 2, 3"
    widget(e, SCALE_LABEL).value = 2.0
    widget(e, REPLACE_LABEL).value = True
    widget(e, NORM_LABEL).value = "layernorm"
    click(e, "Reset")
    s = e.state
    assert (s.input_text, s.attention_scale, s.replace, s.norm) == (DEFAULT_INPUT, 1.0, False, "rmsnorm")
    assert widget(e, SCALE_LABEL).value == 1.0
    assert widget(e, INPUT_LABEL).value == DEFAULT_INPUT


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
    """An unreadable vector sets input_error naming the problem and leaves trace, sources and table as they were."""
    e = explorable()
    widget(e, INPUT_LABEL).value = "2, 2, 2, 2"
    trace, before = e.state.trace, snapshot(e)
    widget(e, INPUT_LABEL).value = text
    s = e.state
    assert s.trace is trace
    assert s.vector == [2.0, 2.0, 2.0, 2.0]
    assert named in s.input_error
    after = snapshot(e)
    for name in ("norm", "comp", "swiglu", "table"):
        assert after[name] == before[name], name
    for key in ROW_KEYS:
        np.testing.assert_array_equal(after["values"][key], before["values"][key])
    assert named in e.vector_error.object
    assert 'role="alert"' in e.vector_error.object
    widget(e, INPUT_LABEL).value = "1, 2"  # a good vector clears the message
    assert s.input_error == ""
    assert e.vector_error.object == ""


@pytest.mark.parametrize("text", ["<img src=x onerror=alert(1)>", "1, <b>2</b>", "<script>alert(1)</script>"])
def test_typed_html_is_shown_as_text(text: str) -> None:
    """HTML typed into the vector appears escaped in the error pane: never as markup."""
    e = explorable()
    widget(e, INPUT_LABEL).value = text
    markup = e.vector_error.object
    assert e.state.input_error
    for tag in ("<img", "<b>", "<script"):
        assert tag not in markup
    assert "&lt;" in markup
    for pane in html_panes(e.__panel__()):
        assert "<img" not in pane and "<script" not in pane


# --- URL state ----------------------------------------------------------------------------------

def test_url_state_restores_every_control() -> None:
    """input, attention_scale, residual and norm from the query string set the state and its widgets."""
    e = explorable(query={"input": "2;2;2;2", "attention_scale": "0.5", "residual": "replace", "norm": "layernorm"})
    s = e.state
    assert e.notices == []
    assert (s.input_text, s.attention_scale, s.replace, s.norm) == ("2;2;2;2", 0.5, True, "layernorm")
    assert s.vector == [2.0, 2.0, 2.0, 2.0]
    assert (widget(e, SCALE_LABEL).value, widget(e, REPLACE_LABEL).value) == (0.5, True)
    assert (widget(e, INPUT_LABEL).value, widget(e, NORM_LABEL).value) == ("2;2;2;2", "layernorm")
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
    """Two sessions' explorables have their own state, widgets and sources: changing one leaves the other."""
    a, b = explorable(), explorable()
    assert a.state is not b.state and a.state.prediction is not b.state.prediction
    assert not {id(w) for w in a.controls} & {id(w) for w in b.controls}
    for name in ("norm_src", "comp_src", "swiglu_src", "norm_fig", "comp_fig", "swiglu_fig"):
        assert getattr(a.figures, name) is not getattr(b.figures, name), name
    assert a.stage_table is not b.stage_table
    before = snapshot(b)
    widget(a, SCALE_LABEL).value = 0.0
    widget(a, REPLACE_LABEL).value = True
    widget(a, INPUT_LABEL).value = "2, 2, 2, 2"
    widget(a, NORM_LABEL).value = "layernorm"
    assert a.state.lost_at() == "blocks.0.resid_mid"
    after = snapshot(b)
    for name in ("norm", "comp", "swiglu", "table"):
        assert after[name] == before[name], name
    assert (b.state.attention_scale, b.state.replace, b.state.input_text, b.state.norm) == (
        1.0, False, DEFAULT_INPUT, "rmsnorm")
    assert widget(b, SCALE_LABEL).value == 1.0


# --- predict first --------------------------------------------------------------------------------

def _gate_widgets(e: TraceExplorable) -> tuple[pn.widgets.RadioBoxGroup, pn.widgets.Button]:
    layout = e.__panel__()
    (choice,) = layout.select(pn.widgets.RadioBoxGroup)
    (commit,) = [b for b in layout.select(pn.widgets.Button) if b.label == "Commit prediction"]
    return choice, commit


def test_prediction_gate_locks_then_unlocks() -> None:
    """Controls stay disabled until a chosen answer is committed; then all are enabled."""
    e = TraceExplorable()
    assert e.controls and all(w.disabled for w in e.controls)
    choice, commit = _gate_widgets(e)
    commit.clicks += 1  # nothing chosen yet: refused
    assert not e.state.prediction.committed
    assert all(w.disabled for w in e.controls)
    answer = e.state.prediction.choices["keep-erase"]
    choice.value = answer
    commit.clicks += 1
    assert e.state.prediction.committed and e.state.prediction.choice == "keep-erase"
    assert not any(w.disabled for w in e.controls)
    assert answer in e.live.object  # the prediction is shown beside the result


def test_committed_prediction_is_final() -> None:
    """A second commit is refused and the first answer stays."""
    e = TraceExplorable()
    p = e.state.prediction
    assert p.commit("zero-both", "my note") is None
    assert p.commit("keep-erase") is not None
    assert (p.choice, p.note) == ("zero-both", "my note")
    assert not any(w.disabled for w in e.controls)


def test_predict_off_unlocks_without_a_prediction() -> None:
    """?predict=off (predict=False) skips the gate: every control is enabled at once."""
    e = TraceExplorable(predict=False)
    assert e.state.prediction.skipped and not e.state.prediction.committed
    assert not any(w.disabled for w in e.controls)
