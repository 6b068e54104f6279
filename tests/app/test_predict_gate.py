"""The predict-first gate holds on the server: what a browser receives before the prediction is committed.

Read with the websocket client (tests/app/bokeh_ws_client.py): the document a page's websocket gets and
every patch after it, so nothing here depends on what a browser would choose to show.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest

from blocktrace.app.server.predict_links import (
    DEMO_HOURS,
    SIGNATURE_KEY,
    UNSIGNED_NOTICE,
    UNTIL_KEY,
    link_state,
    teacher_arguments,
)
from blocktrace.explorables.decoder_block_lab import DecoderLabExplorable
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.app.bokeh_ws_client import Session, fetch_token, models, ws_of
from tests.conftest import Server, start_server, stop_server

TRACE = "/explorables/transformer-block-trace"
FLOOR = "/explorables/block-floor"
LAB = "/explorables/decoder-block-lab"
ISSUE_LINK = TRACE + "?input=2,2,2,2&attention_scale=0&residual=replace"  # the answer, before: "input lost here"
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def stock_server(tmp_path_factory) -> Iterator[Server]:
    """A server on stock Panel, Bokeh and Tornado (--no-tuning): the gate must not rely on the tuning layer."""
    running = start_server(tmp_path_factory.mktemp("stock") / "server.log", "--no-tuning")
    yield running
    stop_server(running)


@pytest.fixture(params=["tuned", "no-tuning"])
def either_server(request, server, stock_server) -> Server:
    return server if request.param == "tuned" else stock_server


def name_of(model: dict) -> str:
    return model.get("name", "").split(".")[-1]


def column_lengths(data: object) -> list[int]:
    """Lengths of a ColumnDataSource's columns, as serialized (lists, or typed arrays with a shape)."""
    if isinstance(data, dict) and data.get("type") == "map":
        data = dict(data.get("entries", []))
    if not isinstance(data, dict):
        return []
    lengths = []
    for value in data.values():
        if isinstance(value, list):
            lengths.append(len(value))
        elif isinstance(value, dict):
            shape = value.get("shape") or [len(value.get("array", {}).get("data", "") or "x")]
            lengths.append(int(shape[0]))
    return lengths


def data_sent(sent: list[dict]) -> list[int]:
    """Every column length of every source in the document and in the patches after it."""
    lengths = []
    for content in sent:
        for model in models(content):
            if name_of(model) == "ColumnDataSource":
                lengths += column_lengths(model.get("attributes", {}).get("data"))
        for event in content.get("events", []):
            if event.get("kind") == "ModelChanged" and event.get("attr") == "data":
                lengths += column_lengths(event.get("new"))
            if event.get("kind") in ("ColumnDataChanged", "ColumnsStreamed"):
                lengths += column_lengths(event.get("data") or event.get("new"))
    return lengths


def text_sent(sent: list[dict]) -> str:
    """Everything sent, as text; HTML panes' markup unescaped (Panel escapes it once more than it is shown)."""
    return html.unescape(html.unescape(json.dumps(sent, ensure_ascii=False)))


def markup_sent(sent: list[dict]) -> str:
    """The HTML panes' markup in everything sent (not the stylesheets, which name every class)."""
    parts = [m.get("attributes", {}).get("text") for content in sent for m in models(content)
             if name_of(m) == "HTML"]
    parts += [e.get("new") for content in sent for e in content.get("events", [])
              if e.get("kind") == "ModelChanged" and e.get("attr") == "text"]
    return html.unescape(html.unescape("\n".join(p for p in parts if isinstance(p, str))))


async def open_and_collect(page_url: str) -> tuple[Session, list[dict]]:
    """Open the page's session as a browser does and read on until its figures (if any) have arrived."""
    session = await Session.open(ws_of(page_url), await fetch_token(page_url))
    return session, [session.document, *await session.filled()]


async def read_until(session: Session, sent: list[dict], done) -> bool:
    """Read patches into `sent` until done(sent) or the deadline; whether it got there."""
    deadline = time.monotonic() + DEADLINE_S
    while not done(sent):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            message = await asyncio.wait_for(session.read(), left)
        except TimeoutError:
            return False
        if message.msgtype == "PATCH-DOC":
            sent.append(message.content)
    return True


def button_click(model_id: str) -> dict:
    return {"kind": "MessageSent", "msg_type": "bokeh_event",
            "msg_data": {"type": "event", "name": "button_click",
                         "values": {"type": "map", "entries": [["model", {"id": model_id}]]}}}


def the_model(sent: list[dict], name: str, **attributes) -> dict:
    found = [m for m in models(sent[0]) if name_of(m) == name
             and all(m.get("attributes", {}).get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, f"{len(found)} {name} models with {attributes}"
    return found[0]


def the_choices(sent: list[dict], label: str) -> tuple[dict, int]:
    """The prediction's radio group and the index of `label` in it."""
    for model in models(sent[0]):
        labels = model.get("attributes", {}).get("labels")
        if name_of(model) == "RadioGroup" and isinstance(labels, list) and label in labels:
            return model, labels.index(label)
    raise AssertionError(f"no radio group offers {label!r}")


# --- the browser-drawn block trace: one component, its payload (meta, values) and the browser's `sent` ---------

def the_drawing(sent: list[dict]) -> dict:
    """The drawing component's data model in the first document."""
    found = [m for m in models(sent[0]) if {"spec", "meta"} <= set(m.get("attributes", {}))]
    assert len(found) == 1, f"{len(found)} drawing components"
    return found[0]


def metas(sent: list[dict]) -> list[dict]:
    """Every `meta` the drawing component was given, in order: the document's, then each patch's."""
    drawing = the_drawing(sent)
    out = [drawing["attributes"]["meta"]]
    out += [e["new"] for content in sent[1:] for e in content.get("events", [])
            if e.get("kind") == "ModelChanged" and e.get("model", {}).get("id") == drawing["id"]
            and e.get("attr") == "meta"]
    return [json.loads(m) for m in out if m]


def values_sizes(sent: list[dict]) -> set[int]:
    """The sizes of every `values` array (the numbers drawn) the drawing component was given."""
    drawing = the_drawing(sent)
    arrays = [drawing["attributes"].get("values")]
    arrays += [e["new"] for content in sent[1:] for e in content.get("events", [])
               if e.get("kind") == "ModelChanged" and e.get("model", {}).get("id") == drawing["id"]
               and e.get("attr") == "values"]
    return {int((a.get("shape") or [0])[0]) for a in arrays if isinstance(a, dict)}


async def send_change(session: Session, sent: list[dict], name: str, value, n: int) -> None:
    """A control's change as the browser sends it (drawn_view/draw.js)."""
    await session.set(the_drawing(sent)["id"], "sent", json.dumps({"name": name, "value": value, "n": n}))


async def commit_over_the_websocket(session: Session, sent: list[dict]) -> None:
    radio, index = the_choices(sent, PREDICTION_CHOICES["keep-erase"])
    await session.set(radio["id"], "active", index)
    button = the_model(sent, "Button", label="Commit prediction")
    await session.send(button_click(button["id"]))


def test_a_state_link_shows_no_result_before_the_prediction_is_committed(either_server) -> None:
    """The issue's link sets the controls, but no trace value, chart number, word or verdict is sent until the
    prediction is committed; after the commit the same session receives them (so the check can fail)."""

    async def run() -> tuple[list[dict], list[dict], bool]:
        session, sent = await open_and_collect(either_server.url(ISSUE_LINK))
        before = list(sent)
        try:
            await commit_over_the_websocket(session, sent)
            # the trace's words and its numbers: one message, or two when Panel hands the events to Bokeh
            arrived = await read_until(session, sent, lambda s: metas(s)[-1].get("lost") == "blocks.0.resid_mid"
                                       and max(values_sizes(s)) > 0)
        finally:
            await session.close_and_wait()
        return before, sent, arrived

    before, after, arrived = asyncio.run(run())
    text = text_sent(before)
    [shown] = metas(before)
    assert shown["controls"]["attention_scale"] == 0 and shown["locked"] is True  # the link's value, held
    assert not {"rows", "offsets", "lost", "words"} & set(shown), "the trace's part was sent before the commit"
    assert "Output norm" not in text  # (the drawing script itself names "input lost here" and "stage-table")
    assert "once you commit your prediction" in text
    assert values_sizes(before) == {0}, "numbers of the trace were sent before the commit"
    assert set(data_sent(before)) <= {0}, "a plot's source carried data before the commit"
    assert arrived, "the trace never arrived after the commit"
    assert "Output norm" in text_sent(after) and max(values_sizes(after)) > 0


def test_a_change_to_a_locked_control_is_set_back_and_shows_nothing(either_server) -> None:
    """A websocket change to a locked control, and a press of a locked button, are refused by the server: the
    answer puts the browser's control back, and nothing of the trace is sent."""

    async def run() -> tuple[list[dict], list[dict], list[dict]]:
        session, sent = await open_and_collect(either_server.url(TRACE))
        try:
            assert metas(sent)[0]["locked"] is True and metas(sent)[0]["controls"]["mlp_scale"] == 1.0
            start = len(sent)
            await send_change(session, sent, "attention_scale", 0.0, 1)
            await read_until(session, sent, lambda s: metas(s)[-1]["ack"] == 1)
            first = metas(sent)[-1]
            assert len(sent) > start
            # The press's answer: acknowledged with the MLP scale as it was (were it refused silently, nothing:
            # then this waits out the deadline and the assertions below still hold).
            await send_change(session, sent, "action", "zero", 2)
            await read_until(session, sent, lambda s: metas(s)[-1]["ack"] == 2)
            return sent, [first], [metas(sent)[-1]]
        finally:
            await session.close_and_wait()

    sent, [after_slider], [after_press] = asyncio.run(run())
    assert after_slider["ack"] == 1 and after_slider["controls"]["attention_scale"] == 1.0, "not set back"
    assert after_press["controls"]["mlp_scale"] == 1.0, "a press of the locked Zero updates changed the MLP scale"
    assert all(m["locked"] and "rows" not in m for m in metas(sent))
    assert "Output norm" not in text_sent(sent) and values_sizes(sent) == {0}
    assert "Traceback" not in either_server.log()


def test_a_typed_predict_off_shows_the_gate_and_says_why(server) -> None:
    """predict=off without the teacher's signature (or with a wrong one, or another route's) keeps the gate."""
    forged = {"predict": "off", SIGNATURE_KEY: "0" * 32}
    other_route = teacher_arguments(FLOOR, server.secret())
    longer = {**teacher_arguments(TRACE, server.secret()), UNTIL_KEY: str(int(time.time()) + 10**8)}
    for query in ({"predict": "off"}, forged, other_route, longer):
        sent = collect(server.url(TRACE + "?" + urlencode(query)), "Attention update scale")
        text = text_sent(sent)
        assert metas(sent)[-1]["locked"] is True, query  # the drawn controls are disabled, and refused
        assert UNSIGNED_NOTICE in text and "Commit prediction" in text, query
        assert "rows" not in metas(sent)[-1] and values_sizes(sent) == {0} and "Output norm" not in text, query


def test_the_teachers_signed_link_opens_without_the_gate(server) -> None:
    """The signed predict=off unlocks every control at once and sends the trace; no notice."""
    for route, shows in ((TRACE, "Output norm"), (FLOOR, "The full floor for"), (LAB, "Invariants now")):
        sent = collect(server.url(server.teacher_link(route)), shows)
        text = text_sent(sent)
        assert UNSIGNED_NOTICE not in text, route
        # drawn in the browser: its controls and numbers come in the payload
        assert metas(sent)[-1]["locked"] is False and max(values_sizes(sent)) > 0, route


def test_the_floor_and_the_lab_send_no_result_before_the_commit(server) -> None:
    """Block floor at stage 8 (which settles the prediction) and the lab's causal test, invariants ("weights on
    future positions are exactly 0") and attention heatmaps send nothing before the commit."""
    floor = collect(server.url(FLOOR + "?stage=8&tracked=2"), "Stage 8 / 8")
    text = text_sent(floor)
    assert "Stage 8 settles the prediction" not in text and "The full floor for" not in text
    assert "differ at this stage" not in text and "row sums" not in text and "Query p" not in text
    assert "Check answer" not in text  # the checkpoints, whose feedback explains the bet, come after it
    # drawn in the browser: every payload locked, with no table, chart or sentence of either trace, no number
    assert all(m["locked"] and "orders" not in m and "settle" not in m for m in metas(floor))
    assert values_sizes(floor) == {0} and set(data_sent(floor)) <= {0}
    lab = collect(server.url(LAB + "?corrupt=2&corrupt_value=999"), "Shape of every tensor")  # not gated
    text = text_sent(lab)
    drawn = metas(lab)
    assert any("shapes" in m for m in drawn) and "Causal safety" in text
    # drawn in the browser: no payload carries the invariants, the heatmaps or the causal test, in words or numbers
    assert all(m["locked"] and m.get("invariants") is None and m.get("heads") is None and m.get("causal") is None
               for m in drawn)
    assert not re.search(r"causal test (PASS|FAIL)", text) and "max |Δ output|" not in text
    assert "future positions" not in text and "invariants hold" not in text and "Attention weights, head" not in text
    assert "once you commit your prediction" in text
    locked = DecoderLabExplorable(query={"corrupt": "2", "corrupt_value": "999"}).drawing.values.size
    assert values_sizes(lab) <= {0, locked}, "numbers beyond the locked panels' were sent"
    assert set(data_sent(lab)) <= {0}, "a plot's source carried data before the commit"


def test_the_teacher_page_lists_a_signed_link_per_explorable(server) -> None:
    """/teacher (with its password) links each explorable with predict=off and this server's signature."""
    password = server.teacher_password()
    auth = base64.b64encode(f"teacher:{password}".encode()).decode()
    request = urllib.request.Request(server.url("/teacher"), headers={"Authorization": f"Basic {auth}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        page = html.unescape(response.read().decode("utf-8"))
    for route in (TRACE, FLOOR, LAB):
        found = re.search(rf'href="{route}\?predict=off&{UNTIL_KEY}=(\d+)&{SIGNATURE_KEY}=([^&"]+)"', page)
        until = int(found.group(1))
        query = {"predict": "off", UNTIL_KEY: found.group(1), SIGNATURE_KEY: urllib.parse.unquote(found.group(2))}
        assert link_state(route, query, server.secret()) == "valid"
        assert 0 < until - time.time() <= DEMO_HOURS * 3600, "a demonstration's link runs out"
        amp = "(?:&amp;|&)"  # the snippet is shown as code: its own &amp; is escaped once more
        snippet = re.search(rf'{route}\?predict=off{amp}{UNTIL_KEY}=(\d+){amp}{SIGNATURE_KEY}=[^&"]+{amp}embed=1', page)
        assert int(snippet.group(1)) - time.time() > 300 * 86400, "an embed snippet lasts"


def test_an_expired_teacher_link_shows_the_gate_and_says_so(server) -> None:
    """A signed link past its time keeps the gate, with a note that it expired (not that it was typed)."""
    from blocktrace.app.server.predict_links import EXPIRED_NOTICE

    expired = teacher_arguments(TRACE, server.secret(), valid_s=-60)
    sent = collect(server.url(TRACE + "?" + urlencode(expired)), "Attention update scale")
    text = text_sent(sent)
    assert metas(sent)[-1]["locked"] is True
    assert EXPIRED_NOTICE in text and UNSIGNED_NOTICE not in text


def collect(page_url: str, shows: str) -> list[dict]:
    """What a session of the page is sent up to the moment it shows `shows` (the lab sends its panels
    after the page is up), the socket closed cleanly afterwards."""

    async def run() -> list[dict]:
        session, sent = await open_and_collect(page_url)
        try:
            assert await read_until(session, sent, lambda s: shows in text_sent(s)), f"{shows!r} never arrived"
        finally:
            await session.close_and_wait()
        return sent

    return asyncio.run(run())
