"""One slider change comes back as one PATCH-DOC message carrying every view it changed; the address bar follows
in one message of its own once the change has settled (url_state.py writes it once for a burst).

Panel sends changes made outside a batch one message per property, and each message costs the
server a walk over every model of the session; with 100 students that was most of its time.
"""

from __future__ import annotations

import asyncio
import json

from tests.app.bokeh_ws_client import Session, fetch_token, models, ws_of

ROUTE = "/explorables/transformer-block-trace"


async def change_and_collect(page_url: str, value: float) -> list:
    session = await Session.open(ws_of(page_url), await fetch_token(page_url))
    try:
        await session.filled()  # whatever the page leaves for after load (the drawn block trace: nothing)
        drawing = next(m for m in models(session.document) if {"spec", "meta"} <= set(m.get("attributes", {})))
        change = {"name": "attention_scale", "value": value, "n": 1}  # the browser-drawn slider (draw.js)
        await session.set(drawing["id"], "sent", json.dumps(change))
        messages = []
        while True:
            message = await session.read()
            if message.msgtype != "PATCH-DOC":
                continue
            messages.append(message)
            kinds = {(e.get("kind"), e.get("attr")) for e in message.content["events"]}
            if ("ModelChanged", "search") in kinds:  # the address bar: the last thing a change sets
                return messages
    finally:
        session.close()


def test_a_slider_change_is_answered_by_a_single_message(server):
    messages = asyncio.run(change_and_collect(server.url(server.teacher_link(ROUTE)), 0.35))
    assert len(messages) == 2, [sorted({e.get("attr") or e.get("kind") for e in m.content["events"]})
                                for m in messages]
    address = messages[1].content["events"]
    assert [e.get("kind") for e in address if e.get("attr") == "search"] == ["ModelChanged"]
    assert "attention_scale=0.35" in next(e["new"] for e in address if e.get("attr") == "search")
    events = messages[0].content["events"]
    assert not any(e.get("attr") == "search" for e in events)
    changed = {e.get("attr"): e.get("new") for e in events if e.get("kind") == "ModelChanged"}
    assert {"meta", "values", "texts"} <= set(changed)  # the payload's words and numbers, the diagram's cards
    meta = json.loads(changed["meta"])
    assert meta["controls"]["attention_scale"] == 0.35 and meta["ack"] == 1 and meta["words"]["norm"]
    assert changed["values"]["shape"][0] > 0  # every number drawn, in the same message
