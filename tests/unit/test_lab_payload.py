"""The decoder lab's payload and control path: the numbers drawn are the engine's, and the server keeps deciding
what the browser may see and set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blocktrace.explorables.components.numbers import NO_RMS, NO_RMS_NOTE
from blocktrace.explorables.decoder_block_lab import DecoderLabExplorable, LabState, plots
from blocktrace.explorables.decoder_block_lab.payload import CAUSAL_HELD, CHECKS_HELD, HEADS_HELD, payload
from blocktrace.explorables.decoder_block_lab.state import CORRECT_PREDICTION, VARIANTS
from blocktrace.explorables.engine.forward import block_keys
from tests.drawn import meta, press, send


def numbers_of(row: dict, values: np.ndarray) -> list[float]:
    """A drawn table row's numbers, in its cells' order."""
    return list(values[row["at"]:row["at"] + len(row["num"])])


def unlocked_payload(**changes) -> tuple[LabState, dict, np.ndarray]:
    s = LabState()
    s.param.update(**changes)
    assert s.prediction.commit(CORRECT_PREDICTION) is None
    text, values = payload(s, {})
    return s, json.loads(text), values


def test_before_the_commit_no_result_that_answers_the_prediction_leaves_the_server() -> None:
    """Locked: no invariant, attention weight, causal number or word (nor the mask's break-it symptom) is in the
    payload, not even with the mask off; each place says what will appear there instead."""
    view = DecoderLabExplorable(query={"causal": "off", "corrupt": "2"})
    m, values = meta(view), view.drawing.values
    assert m["locked"] is True and m["invariants"] is None and m["heads"] is None and m["causal"] is None
    assert m["held"] == [CHECKS_HELD, HEADS_HELD, CAUSAL_HELD]
    text = json.dumps({k: v for k, v in m.items() if k != "held"}, ensure_ascii=False)
    for word in ("PASS", "FAIL", "future positions", "invariants hold", "|Δ output|", "exactly 0", "max |Δ"):
        assert word not in text, word
    assert ["No causal mask", "Invariants and causal safety: shown once your prediction is committed."] \
        in m["symptoms"]
    s = view.state
    for h in range(s.heads):  # not one attention weight among the numbers
        pattern = plots.head_pattern(s, h).ravel()
        assert not any(np.array_equal(values[i:i + pattern.size], pattern) for i in range(values.size))
    assert not np.isin(s.delta[np.nonzero(s.delta)], values).any()
    send(view, "causal", True)  # a change while locked is refused and answered with the held value
    assert s.causal is False and meta(view)["controls"]["causal"] is False and meta(view)["locked"]
    assert s.prediction.commit(CORRECT_PREDICTION) is None
    m = meta(view)
    assert m["invariants"]["head"].endswith("hold") and len(m["heads"]) == s.heads and m["causal"]["badge"]


def test_the_numbers_drawn_are_the_engines() -> None:
    """The stage table, every head's weights, the norms' bars, the activation dots, |Δ output| and the depth
    curves sit at the offsets the payload names, as computed."""
    s, m, values = unlocked_payload(heads=2, T=6)
    keys = block_keys(s.trace.config)
    for row, local in zip(m["stages"]["rows"], keys, strict=True):
        v = s.trace["blocks.0." + local][0]
        while v.ndim > 1:
            v = v[0] if v.ndim > 2 else v[-1]
        shown = numbers_of(row, values)
        if NO_RMS in row["cells"]:
            np.testing.assert_array_equal(shown, v[:6])
        else:
            np.testing.assert_array_equal(shown[1:], v[:6])
    for h, head in enumerate(m["heads"]):
        n = s.T
        np.testing.assert_array_equal(values[head["pattern"]:head["pattern"] + n * n].reshape(n, n),
                                      s.trace["blocks.0.attn.pattern"][0, h])
    norms, rows = m["norms"], s.normalised()
    bars = values[norms["bars"]:norms["bars"] + 3 * norms["n"]].reshape(3, norms["n"])
    for k, name in enumerate(norms["series"]):
        np.testing.assert_array_equal(bars[k], rows[name])
    acts = m["acts"]
    _, points = plots.activation_data(s)
    np.testing.assert_array_equal(values[acts["points"]:acts["points"] + acts["m"]], points["x"])
    np.testing.assert_array_equal(values[acts["points"] + acts["m"]:acts["points"] + 2 * acts["m"]], points["y"])
    c = m["causal"]
    np.testing.assert_array_equal(values[c["delta"]:c["delta"] + c["T"] * c["d"]].reshape(c["T"], c["d"]), s.delta)
    for line, variant in zip(m["depth"]["lines"], VARIANTS, strict=True):
        profile = s.depth[variant]
        np.testing.assert_array_equal(values[line["rms"]:line["rms"] + line["n"]], profile["resid_rms"])
        np.testing.assert_array_equal(values[line["grad"]:line["grad"] + line["n"]], profile["grad_norm"])
        assert line["current"] == (variant == (s.placement, s.residual))
    causal_rows = c["table"]["rows"]
    per_pos = np.max(np.abs(s.corrupted.output[0] - s.trace.output[0]), axis=-1)
    np.testing.assert_array_equal([numbers_of(r, values)[0] for r in causal_rows], per_pos)


def test_masked_scores_have_no_rms_and_say_why() -> None:
    """With the mask on the scores hold −∞: their RMS is "—" with the house note, never ∞; without it, a number."""
    _, m, values = unlocked_payload()
    [scores] = [r for r in m["stages"]["rows"] if r["cells"][0] == "attn.scores"]
    assert scores["cells"][2] == NO_RMS and scores["aside"] == NO_RMS_NOTE and 2 not in scores["num"]
    _, m, values = unlocked_payload(causal=False)
    [scores] = [r for r in m["stages"]["rows"] if r["cells"][0] == "attn.scores"]
    assert 2 in scores["num"] and "aside" not in scores and np.isfinite(numbers_of(scores, values)[0])


def test_one_change_one_payload_and_the_ack() -> None:
    """A browser change is answered with one payload, whatever it set off, carrying the number of the change."""
    view = DecoderLabExplorable(predict=False)
    sent: list[str] = []
    view.drawing.param.watch(lambda e: sent.append(e.new), "meta")
    send(view, "T", 6)  # the trace, its corrupted twin and the depth stacks all follow
    assert len(sent) == 1 and json.loads(sent[0])["ack"] == view._sent_n
    assert meta(view)["bounds"]["corrupt"] == [0, 5] and len(meta(view)["labels"]) == 6
    numbers: list = []
    view.drawing.param.watch(lambda e: numbers.append(e.new), "values")
    send(view, "T", 99)  # refused by the parameter's bounds: answered, nothing recomputed
    assert len(sent) == 2 and view.state.T == 6 and meta(view)["controls"]["T"] == 6 and numbers == []
    press(view, "Zero vector")
    assert len(sent) == 3 and view.state.norm_text == "0, 0, 0, 0" and len(numbers) == 1


def test_bad_input_gets_a_message_beside_its_field_and_keeps_the_last_good_state() -> None:
    """A malformed vector, an empty one, NaN, a huge number or markup: a message next to the field, the last good
    value kept, and the message travels as text (no <, > or & in the JSON)."""
    view = DecoderLabExplorable(predict=False)
    s = view.state
    for bad in ("1, two", "", "<img src=x onerror=alert(1)>"):
        send(view, "norm_text", bad)
        m = meta(view)
        assert "Could not use this vector" in m["errors"]["norm_text"] and s.norm_vector == [3.0, -1.0, 0.5, 2.0]
        assert not {"<", ">", "&"} & set(view.drawing.meta)
    send(view, "norm_text", "1, " * 300)  # too long to read: refused before the state parses it
    assert "at most 400 characters" in meta(view)["errors"]["norm_text"]
    assert s.norm_text == "<img src=x onerror=alert(1)>" and s.norm_vector == [3.0, -1.0, 0.5, 2.0]
    send(view, "norm_text", "1, 2")
    assert "norm_text" not in meta(view)["errors"] and s.norm_vector == [1.0, 2.0]
    for bad in ("nan", "1e400", "5e6", "abc", "", "<b>1</b>", ["1"], None):
        send(view, "corrupt_value", bad)
        m = meta(view)
        assert m["errors"]["corrupt_value"].startswith("Could not use this value"), bad
        assert s.corrupt_value == 999.0 and m["controls"]["corrupt_value"] == "999"
    send(view, "corrupt_value", "−2.5")
    assert s.corrupt_value == -2.5 and "corrupt_value" not in meta(view)["errors"]
    locked = DecoderLabExplorable()  # locked: a typed value is refused with no word about it
    send(locked, "corrupt_value", "abc")
    assert meta(locked)["errors"] == {} and locked.state.corrupt_value == 999.0
    send(view, "corrupt", 7)  # beyond T = 4: refused
    assert s.corrupt == 2
    send(view, "nonsense", 1)
    send(view, "action", "nonsense")
    assert meta(view)["ack"] == view._sent_n


def test_break_it_switches_mirror_the_design_choices() -> None:
    """A Break-it switch sets the choice it mirrors, and shows it when the choice is set elsewhere."""
    view = DecoderLabExplorable(predict=False)
    send(view, "break_residual", True)
    send(view, "break_mask", True)
    assert view.state.residual == "replace" and view.state.causal is False
    send(view, "placement", "post")
    c = meta(view)["controls"]
    assert c["break_post"] is True and c["break_residual"] is True and c["break_mask"] is True
    send(view, "break_mask", "yes")  # not a switch's value: refused
    assert view.state.causal is False
    names = [item[0] for item in meta(view)["symptoms"]]
    assert names == ["Missing residual", "Norm after the addition", "No causal mask"]


def test_a_served_page_sends_its_controls_before_the_lab_is_built() -> None:
    """Until the page's browser is connected only the controls go: building says so, no numbers."""
    text, values = payload(LabState(deferred=True), {}, building=True)
    m = json.loads(text)
    assert m["building"] is True and values.size == 0 and "shapes" not in m


@pytest.mark.parametrize("query", [{"d": "512", "B": "4", "T": "8"}])
def test_sizes_beyond_the_budget_are_refused_beside_the_sizes(query) -> None:
    """Sizes that would cost too much give way to the last that fit, and the message says so."""
    view = DecoderLabExplorable(predict=False)
    for name, value in query.items():
        send(view, name, int(value))
    m = meta(view)
    assert "The lab keeps the last sizes that fit" in m["budget"]
    assert (view.state.d, view.state.B, view.state.T) != (512, 4, 8)
