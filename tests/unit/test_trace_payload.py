"""The block trace's payload and control path: the server keeps deciding what the browser may see and set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blocktrace.explorables.components.numbers import norm
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable


def meta(view: TraceExplorable) -> dict:
    return json.loads(view.drawing.meta)


def test_a_locked_page_sends_no_value_of_the_trace() -> None:
    """Before the commit the payload holds the controls and a note, and not one number of the trace."""
    view = TraceExplorable()
    m = meta(view)
    assert m["locked"] is True and view.drawing.values.size == 0
    assert not {"rows", "offsets", "lost", "words"} & set(m)


def test_the_numbers_sent_are_the_engines() -> None:
    """Each stage's vector and norm sit at the offsets the payload names, as the engine computed them."""
    view = TraceExplorable(predict=False)
    m, values = meta(view), view.drawing.values
    for n, (key, _label, _short, width) in enumerate(m["rows"]):
        vector = view.state.trace[key][0]
        assert width == vector.size
        np.testing.assert_array_equal(values[m["offsets"][key]:m["offsets"][key] + width], vector)
        assert values[m["offsets"]["norm"] + n] == norm(vector)
    assert [row[0] for row in m["rows"]] == list(ROW_KEYS)


@pytest.mark.parametrize("change", [
    {"name": "attention_scale", "value": 7.5, "n": 3},  # out of the slider's bounds
    {"name": "attention_scale", "value": "a lot", "n": 3},  # not a number
    {"name": "trace", "value": None, "n": 3},  # not a control
    {"name": "action", "value": "explode", "n": 3},  # not an action
])
def test_a_refused_change_keeps_the_state_and_is_answered(change: dict) -> None:
    """A change the state refuses leaves every control as it was, and the reply names it (ack) so the
    browser puts its input back."""
    view = TraceExplorable(predict=False)
    before = view.state.param.values()
    view.drawing.sent = json.dumps(change)
    assert view.state.param.values().keys() == before.keys()
    assert view.state.attention_scale == before["attention_scale"] and view.state.trace is before["trace"]
    assert meta(view)["ack"] == 3


def test_the_locked_gate_holds_on_the_server() -> None:
    """While the prediction is not committed a change from the browser does not reach the state."""
    view = TraceExplorable()
    view.drawing.sent = json.dumps({"name": "attention_scale", "value": 0.0, "n": 1})
    assert view.state.attention_scale == 1.0
    assert meta(view)["controls"]["attention_scale"] == 1.0 and meta(view)["ack"] == 1


def test_an_accepted_change_is_one_new_payload() -> None:
    """A slider change reaches the state and comes back as the new trace's payload."""
    view = TraceExplorable(predict=False)
    view.drawing.sent = json.dumps({"name": "attention_scale", "value": 0.0, "n": 1})
    m = meta(view)
    assert view.state.attention_scale == 0.0 and m["controls"]["attention_scale"] == 0.0
    attn = view.drawing.values[m["offsets"]["blocks.0.attn_out"]:][:4]
    np.testing.assert_array_equal(attn, np.zeros(4))


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"name": 3, "value": 1}', '{"value": 1}'])
def test_a_malformed_message_is_dropped(text: str) -> None:
    """Anything but {"name": str, "value": ...} changes nothing and raises nothing."""
    view = TraceExplorable(predict=False)
    before = view.drawing.meta
    view.drawing.sent = text
    assert view.drawing.meta == before


def test_the_norms_sent_are_the_engines() -> None:
    """This run's, the default block's and their difference's norms, stage by stage, as NumPy computes them."""
    view = TraceExplorable(query={"attention_scale": "0.5", "residual": "replace"}, predict=False)
    m, values = meta(view), view.drawing.values
    for n, key in enumerate(ROW_KEYS):
        now, then = view.state.trace[key][0], view.state.baseline[key][0]
        assert values[m["offsets"]["norm_base"] + n] == norm(then)
        assert values[m["offsets"]["norm_diff"] + n] == norm(now - then)


def test_a_malformed_change_is_dropped() -> None:
    """Text that is not a change object leaves the state and the payload as they were."""
    view = TraceExplorable(predict=False)
    before = view.drawing.meta
    for text in ("not json", "[1, 2]", '{"value": 1}', '{"name": 3, "value": 1}'):
        view.drawing.sent = text
    assert view.drawing.meta == before and view.state.attention_scale == 1.0


def test_the_payload_text_passes_panels_sanitizer_unchanged() -> None:
    """Typed markup and the words' "<" reach the browser as JSON escapes: no <, > or & in the text Panel's HTML
    sanitizer would rewrite, and the same strings once parsed."""
    view = TraceExplorable(predict=False)
    view.drawing.sent = json.dumps({"name": "input_text", "value": "<img src=x onerror=alert(1)> & 'q'", "n": 1})
    text = view.drawing.meta
    assert not set("<>&") & set(text) and not set("<>&") & set(view.drawing.spec)
    m = json.loads(text)
    assert m["controls"]["input_text"] == "<img src=x onerror=alert(1)> & 'q'" and "'<img'" in m["error"]
    assert any("< 0.05" in s for s in m["words"]["swiglu"])
