"""The predict-first gate in each explorable's state and views (no server): nothing of the gated experiment
is in the views before the prediction is committed, and the state refuses changes to locked controls."""

from __future__ import annotations

import json

import panel as pn

from blocktrace.app.server.predict_links import (
    DEMO_HOURS,
    SIGNATURE_KEY,
    UNTIL_KEY,
    link_state,
    signature,
    signed_off,
    teacher_arguments,
)
from blocktrace.explorables.block_floor.view import FloorExplorable
from blocktrace.explorables.components.downloads import Downloads
from blocktrace.explorables.components.embed import EmbedButton, gate_arguments
from blocktrace.explorables.decoder_block_lab.state import CORRECT_PREDICTION as LAB_ANSWER
from blocktrace.explorables.decoder_block_lab.view import DecoderLabExplorable
from blocktrace.explorables.transformer_block_trace.state import QUERY_KEYS
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable

ISSUE_QUERY = {"input": "2,2,2,2", "attention_scale": "0", "residual": "replace"}
SECRET = b"0123456789abcdef0123456789abcdef"
TRACE = "/explorables/transformer-block-trace"


def drawn(e: TraceExplorable) -> dict:
    """What the browser is given to draw: the payload's words and its numbers."""
    return json.loads(e.drawing.meta)


def send(e: TraceExplorable, name: str, value) -> None:
    """A change as the browser (or a crafted websocket message) sends it to the component."""
    e.drawing.sent = json.dumps({"name": name, "value": value, "n": 1})


def in_layout(e, viewable_type) -> list:
    return e.__panel__().select(viewable_type)


def no_file_before_the_commit(downloads: Downloads) -> bool:
    """The download buttons are hidden behind their note, and a click on each, as a crafted websocket message
    would send it (the `clicks` Panel syncs), makes no file."""
    for button in (downloads.csv, downloads.json, downloads.sheet):
        button._clicks += 1
    return (not downloads.buttons.visible and downloads.note.visible
            and [b.data for b in (downloads.csv, downloads.json, downloads.sheet)] == [None, None, None])


def test_a_link_sets_the_controls_but_the_trace_waits_for_the_commit() -> None:
    """The issue's link: controls as linked, no table, chart data, words, announcement or downloads until the
    commit."""
    e = TraceExplorable(query=ISSUE_QUERY)
    assert (e.state.attention_scale, e.state.replace, e.state.input_text) == (0.0, True, "2,2,2,2")
    m = drawn(e)
    assert m["locked"] and "once you commit" in m["note"]
    assert not {"rows", "offsets", "lost", "words", "d_mlp"} & set(m) and e.drawing.values.size == 0
    assert "Output norm" not in m["announce"]
    assert no_file_before_the_commit(e.downloads)
    assert e.state.prediction.commit("keep-erase") is None
    m = drawn(e)
    assert m["lost"] == "blocks.0.resid_mid" and "Output norm" in m["announce"]
    assert e.drawing.values.size > 0 and all(m["words"].values())
    assert e.downloads.buttons.visible and not e.downloads.note.visible
    e.downloads.csv._clicks += 1  # now a click makes the file
    assert e.downloads.csv.data.startswith("data:text/plain")


def test_the_state_sets_back_changes_to_locked_controls() -> None:
    """A locked control's value or a locked button's click (as a websocket message would send them) is refused,
    and a change that reaches the state some other way while locked is undone."""
    e = TraceExplorable()
    send(e, "attention_scale", 0.0)
    assert e.state.attention_scale == 1.0 and drawn(e)["controls"]["attention_scale"] == 1.0
    send(e, "action", "zero")
    send(e, "action", "constant")
    assert (e.state.attention_scale, e.state.mlp_scale, e.state.input_text) == (1.0, 1.0, "1.5, -0.5, 0.25, 2")
    e.state.attention_scale = 0.0  # past the component: the state itself sets it back
    e.state.input_text = "2, 2, 2, 2"
    assert (e.state.attention_scale, e.state.input_text) == (1.0, "1.5, -0.5, 0.25, 2")
    assert e.locked_controls.refused == 2
    assert drawn(e)["locked"] and e.drawing.values.size == 0
    e.state.prediction.commit("zero-both")
    send(e, "action", "zero")
    assert (e.state.attention_scale, e.state.mlp_scale) == (0.0, 0.0)
    assert e.locked_controls.refused == 2


def test_the_floor_shows_no_trace_claim_or_checkpoint_before_the_bet() -> None:
    """At stage 8 the floor's settling sentence, tables, plots, claims and checkpoints wait for the bet."""
    view = FloorExplorable(query={"stage": "8"})
    emitted = []
    view.emit = lambda kind, payload: emitted.append(kind)
    m = drawn(view)
    assert m["locked"] and "settle" not in m and "orders" not in m and view.drawing.values.size == 0
    assert "once you commit your prediction" in m["note"]
    assert "differ" not in m["banner"][1] and "Same vectors" not in m["banner"][1]
    send(view, "action", "claim")  # a press of the disabled button, as a websocket message can make it
    assert view.state.claim_result is None and emitted == []
    send(view, "stage", 3)
    assert view.state.stage == 8 and drawn(view)["controls"]["stage"] == 8
    assert no_file_before_the_commit(view.downloads) and "Check answer" not in [
        b.label for b in in_layout(view, pn.widgets.Button)]
    assert view.state.bet.commit("kept-added") is None
    m = drawn(view)
    assert "Stage 8 settles the prediction" in m["settle"][0] and m["orders"][0]["labels"]
    assert view.drawing.values.size > 0
    assert "Check answer" in [b.label for b in in_layout(view, pn.widgets.Button)]
    send(view, "action", "claim")
    assert view.state.claim_result is not None and emitted == ["claim"]


def test_the_lab_sends_no_causal_result_before_the_prediction() -> None:
    """The lab's causal test (map data, badge, table, its words, the Break-it verdict), invariants and heatmaps
    wait for the commit; a change sent while locked is refused; the downloads give no file."""
    view = DecoderLabExplorable(query={"causal": "off"})
    m = drawn(view)
    assert m["causal"] is None and m["invariants"] is None and m["heads"] is None
    assert "once your prediction is committed" in m["held"][2]
    assert ["No causal mask", "Invariants and causal safety: shown once your prediction is committed."] \
        in m["symptoms"]
    assert no_file_before_the_commit(view.downloads)
    send(view, "causal", True)
    assert view.state.causal is False and drawn(view)["controls"]["causal"] is False
    view.state.causal = True  # past the component: the state itself sets it back
    assert view.state.causal is False and view.locked_controls.refused == 1
    assert view.state.prediction.commit(LAB_ANSWER) is None
    m = drawn(view)
    assert m["causal"]["table"]["rows"] and m["causal"]["T"] * m["causal"]["d"] > 0
    assert m["causal"]["badge"][0] == "fail" and any(k == "No causal mask" and "Causal safety: " in v
                                                     for k, v in m["symptoms"])


def test_a_signature_opens_one_route_of_one_server() -> None:
    """Only this secret's signature for this route switches the gate off; nothing does without a secret."""
    args = teacher_arguments(TRACE, SECRET)
    assert signed_off(TRACE, args, SECRET)
    assert not signed_off("/explorables/block-floor", args, SECRET)
    assert not signed_off(TRACE, args, b"another secret of 32 bytes......")
    assert not signed_off(TRACE, args, None)
    assert not signed_off(TRACE, {"predict": "off"}, SECRET)
    assert not signed_off(TRACE, {**args, SIGNATURE_KEY: args[SIGNATURE_KEY][:-1]}, SECRET)
    assert not signed_off(TRACE, {**args, "predict": "on"}, SECRET)
    assert signature(TRACE, SECRET, int(args[UNTIL_KEY])) == args[SIGNATURE_KEY]
    later = {**args, UNTIL_KEY: str(int(args[UNTIL_KEY]) + 86400)}
    assert not signed_off(TRACE, later, SECRET), "the time is signed: a link cannot be stretched"


def test_a_teacher_link_works_until_its_time_and_no_longer() -> None:
    """A demonstration link opens the page for DEMO_HOURS, then keeps the gate; a time from far beyond any
    link this server makes is refused too."""
    clock = [1_000_000.0]
    args = teacher_arguments(TRACE, SECRET, now=lambda: clock[0])
    assert link_state(TRACE, args, SECRET, now=lambda: clock[0]) == "valid"
    clock[0] += DEMO_HOURS * 3600 - 1
    assert signed_off(TRACE, args, SECRET, now=lambda: clock[0])
    clock[0] += 1
    assert link_state(TRACE, args, SECRET, now=lambda: clock[0]) == "expired"
    far = teacher_arguments(TRACE, SECRET, valid_s=10 * 365 * 86400, now=lambda: clock[0])
    assert link_state(TRACE, far, SECRET, now=lambda: clock[0]) == "expired"
    for bad in ("", "-5", "1e9", "٣٣", "9" * 40):
        assert link_state(TRACE, {**args, UNTIL_KEY: bad}, SECRET) == "unsigned", bad


def test_a_gated_pages_embed_snippet_keeps_the_gate() -> None:
    """The Embed button of a page whose gate is on gives snippets that ask for a prediction too."""
    e = TraceExplorable()
    assert gate_arguments(e.state.prediction) == {} and gate_arguments(None) == {}
    button = EmbedButton(e.state, QUERY_KEYS, TRACE, "Trace", e.state.prediction)
    button.button.clicks += 1
    texts = button.dialog.texts
    assert button.dialog.opened == 1
    assert "predict=off" not in texts["iframe"] + texts["script"]
    assert "asks for a prediction first" in texts["gate_note"]
