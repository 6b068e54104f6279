"""The block floor's payload and control path: the server keeps deciding what the browser may see and set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blocktrace.explorables.block_floor import FloorExplorable
from blocktrace.explorables.block_floor.divergence import stage_keys
from tests.drawn import meta, press, send


def test_a_locked_page_sends_no_value_of_either_trace() -> None:
    """Before the commit the payload holds the controls, the banner and a note, and not one number or sentence
    of either trace, even at stage 8 (which settles the bet) with a claim pressed."""
    view = FloorExplorable(query={"stage": "8", "tracked": "2"})
    press(view, "They never diverge")
    m = meta(view)
    assert m["locked"] is True and view.drawing.values.size == 0
    assert not {"orders", "settle", "limit"} & set(m) and m["claim"] is None
    assert m["disabled"] == ["claim", "never"]


def test_one_change_one_payload_and_the_ack() -> None:
    """A browser change is answered with one new payload whatever it set off (traces, claim cleared, options),
    carrying the number of the change it answers."""
    view = FloorExplorable(predict=False)
    sent: list[str] = []
    view.drawing.param.watch(lambda e: sent.append(e.new), "meta")
    send(view, "phrase", "the cat sat on the mat")
    assert len(sent) == 1 and json.loads(sent[0])["ack"] == view._sent_n
    assert [o[0] for o in meta(view)["options"]["tracked"]][-1] == "mat (slot p₅)"
    send(view, "floors", 3)
    assert len(sent) == 2 and meta(view)["bounds"]["stage"] == [1, 20]
    numbers: list = []
    view.drawing.param.watch(lambda e: numbers.append(e.new), "values")
    press(view, "This is the first divergence")  # only words change: the numbers are not sent again
    assert len(sent) == 3 and meta(view)["claim"] is not None and numbers == []
    send(view, "stage", 2)
    assert len(numbers) == 1


def test_the_numbers_sent_are_the_engines() -> None:
    """Each order's table, arrows and attention weights sit at the offsets the payload names, as computed."""
    view = FloorExplorable(predict=False)
    send(view, "stage", 5)
    s, m, values = view.state, meta(view), view.drawing.values
    keys = stage_keys(s.floors)
    for o, (trace, pos) in zip(m["orders"], ((s.original, s.tracked), (s.reversed_, s.mirror)), strict=True):
        for k, key in enumerate(keys):
            v = trace[key][pos]
            np.testing.assert_array_equal(values[o["table"] + 3 * k:o["table"] + 3 * k + 2], v)
            assert values[o["table"] + 3 * k + 2] == pytest.approx(np.linalg.norm(v))
        arrows = values[o["arrows"]:o["arrows"] + 2 * o["n_arrows"]]
        np.testing.assert_array_equal(arrows, [*trace[keys[4]][pos], *trace[keys[3]][pos]])
        n = len(trace.tokens)
        np.testing.assert_array_equal(values[o["pattern"]:o["pattern"] + n * n].reshape(n, n),
                                      trace["blocks.0.attn.pattern"][0])


def test_what_is_typed_travels_as_text_only() -> None:
    """A typed phrase is a word in the payload (drawn with textContent), and the JSON holds no <, > or &."""
    view = FloorExplorable(predict=False)
    send(view, "phrase", "<b>bold</b> & <script>x</script>")
    text = view.drawing.meta
    assert not {"<", ">", "&"} & set(text)
    assert meta(view)["orders"][0]["words"] == ["<b>bold</b>", "&", "<script>x</script>"]
