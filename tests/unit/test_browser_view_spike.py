"""The issue 39 spike's payload and control path: the server keeps deciding what the browser may see and set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blocktrace.explorables.components.numbers import norm
from blocktrace.explorables.transformer_block_trace.browser_view import TraceBrowserView
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS


def meta(view: TraceBrowserView) -> dict:
    return json.loads(view.canvas.meta)


def test_a_locked_page_sends_no_value_of_the_trace() -> None:
    """Before the commit the payload holds the controls and a note, and not one number of the trace."""
    view = TraceBrowserView()
    m = meta(view)
    assert m["locked"] is True and view.canvas.values.size == 0
    assert not {"rows", "offsets", "lost"} & set(m)


def test_the_numbers_sent_are_the_engines() -> None:
    """Each stage's vector and norm sit at the offsets the payload names, as the engine computed them."""
    view = TraceBrowserView(predict=False)
    m, values = meta(view), view.canvas.values
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
    view = TraceBrowserView(predict=False)
    before = view.state.param.values()
    view.canvas.sent = json.dumps(change)
    assert view.state.param.values().keys() == before.keys()
    assert view.state.attention_scale == before["attention_scale"] and view.state.trace is before["trace"]
    assert meta(view)["ack"] == 3


def test_the_locked_gate_holds_on_the_server() -> None:
    """While the prediction is not committed a change from the browser does not reach the state."""
    view = TraceBrowserView()
    view.canvas.sent = json.dumps({"name": "attention_scale", "value": 0.0, "n": 1})
    assert view.state.attention_scale == 1.0
    assert meta(view)["controls"]["attention_scale"] == 1.0 and meta(view)["ack"] == 1


def test_an_accepted_change_is_one_new_payload() -> None:
    """A slider change reaches the state and comes back as the new trace's payload."""
    view = TraceBrowserView(predict=False)
    view.canvas.sent = json.dumps({"name": "attention_scale", "value": 0.0, "n": 1})
    m = meta(view)
    assert view.state.attention_scale == 0.0 and m["controls"]["attention_scale"] == 0.0
    attn = view.canvas.values[m["offsets"]["blocks.0.attn_out"]:][:4]
    np.testing.assert_array_equal(attn, np.zeros(4))


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"name": 3, "value": 1}', '{"value": 1}'])
def test_a_malformed_message_is_dropped(text: str) -> None:
    """Anything but {"name": str, "value": ...} changes nothing and raises nothing."""
    view = TraceBrowserView(predict=False)
    before = view.canvas.meta
    view.canvas.sent = text
    assert view.canvas.meta == before
