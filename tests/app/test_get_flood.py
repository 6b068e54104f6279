"""Ten heavy GETs from one laptop do not freeze another student (issue 16, point 2).

The lab's work waits for the page's browser, the link's sizes are held to the budget, and an address
with pages not yet loaded gets its next pages built only once their browser is there. Latency figures
(before and after) come from benchmarks/get_flood.py; here only what happens is asserted.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlencode

from tornado.httpclient import AsyncHTTPClient, HTTPRequest

from blocktrace.explorables.components.figures import DrawnAfterLoad
from tests.app.bokeh_ws_client import Session, models, token_in

LAB = "/explorables/decoder-block-lab"
HEAVY = "?B=4&T=8&d=512&heads=8&expansion=8&mlp=gelu&blocks=48"
FLOODER = {"X-Forwarded-For": "192.168.16.66"}  # lan_server reads the client's address from this header
STUDENT = {"X-Forwarded-For": "192.168.16.23"}


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + LAB + "/ws"


def pending(content: dict) -> set[str]:
    return {m["id"] for m in models(content) if DrawnAfterLoad.PENDING in (m.get("attributes", {}).get("css_classes")
                                                                          or [])}


def drawings(contents: list[dict]) -> list[dict]:
    """The lab's drawing component (its controls and panels, drawn by the browser) wherever it came: in the page's
    document, or in a patch that filled a place of it."""
    return [m for content in contents for m in models(content) if {"spec", "meta"} <= set(m.get("attributes", {}))]


def the_drawing(document: dict) -> dict:
    [found] = drawings([document])
    return found


def drawn_metas(document: dict, patches: list[dict]) -> list[dict]:
    """Every payload the drawing was given (none while the page has no drawing yet), in order."""
    found = drawings([document, *patches])
    if not found:
        return []
    drawing = found[0]
    out = [drawing["attributes"]["meta"]]
    out += [e["new"] for content in patches for e in content.get("events", [])
            if e.get("kind") == "ModelChanged" and e.get("model", {}).get("id") == drawing["id"]
            and e.get("attr") == "meta"]
    return [json.loads(m) for m in out]


async def until_built(session: Session, texts: tuple[str, ...] = ()) -> dict:
    """Read the page's patches until every place still to be filled has been and the lab is built (a payload
    with its panels, not "building"), with the `texts` in it; that payload. Each read is bounded by the
    client's timeout."""
    waiting = pending(session.document)
    assert waiting, "the page arrives with places for what is built once it is loaded"
    patches: list[dict] = []

    def done() -> bool:
        metas = drawn_metas(session.document, patches)
        return bool(not waiting and metas and not metas[-1].get("building")
                    and all(t in json.dumps(metas[-1], ensure_ascii=False) for t in texts))

    while not done():
        message = await session.read()
        if message.msgtype == "PATCH-DOC":
            patches.append(message.content)
            waiting |= pending(message.content)
            waiting -= {e["model"]["id"] for e in message.content["events"]
                        if e.get("kind") == "ModelChanged" and e.get("attr") == "css_classes"
                        and DrawnAfterLoad.PENDING not in e["new"]}
    return drawn_metas(session.document, patches)[-1]


async def flood_then_change(base: str, student_link: str) -> dict:
    client = AsyncHTTPClient(force_instance=True)
    try:
        page = await client.fetch(HTTPRequest(base + student_link, headers=STUDENT, request_timeout=60))
        student = await Session.open(ws_url(base), token_in(page.body.decode("utf-8")))
        assert (await until_built(student))["controls"]["T"] == 4
        heavy = [await client.fetch(HTTPRequest(base + LAB + HEAVY, headers=FLOODER, request_timeout=60))
                 for _ in range(10)]
        change = json.dumps({"name": "T", "value": 6, "n": 1})  # as the drawn slider sends it
        await student.set(the_drawing(student.document)["id"], "sent", change)
        answered = False
        while not answered:  # bounded by the client's read timeout
            message = await student.read()
            answered = message.msgtype == "PATCH-DOC" and any(
                e.get("attr") == "search" and "T=6" in str(e.get("new")) for e in message.content["events"])
        await student.close_and_wait()
        last = await Session.open(ws_url(base), token_in(heavy[-1].body.decode("utf-8")))
        pulled = drawn_metas(last.document, [])
        built = await until_built(last, texts=("multiply-adds per change", "last sizes that fit"))
        await last.close_and_wait()
        return {"statuses": [r.code for r in heavy], "answered": answered, "pulled": pulled, "built": built}
    finally:
        client.close()


def test_ten_heavy_gets_cost_a_frame_each_and_another_students_change_is_answered(lan_server) -> None:
    """The heavy pages are served, but their lab is neither computed nor built until a browser loads one,
    and then at the default sizes with the refusal beside the controls; the other student is answered."""
    found = asyncio.run(flood_then_change(lan_server.base_url, lan_server.teacher_link(LAB)))
    assert found["statuses"] == [200] * 10
    assert found["answered"]
    # the page came without the lab in it: no drawing yet, or its controls alone with nothing computed
    assert all(m["building"] is True and "shapes" not in m for m in found["pulled"])
    built = found["built"]
    assert built["controls"]["B"] == 1 and "shapes" in built  # the budget's defaults, not the link's B = 4
    assert "multiply-adds per change" in built["budget"] and "last sizes that fit" in built["budget"]


def test_a_class_behind_one_address_still_gets_every_page(lan_server) -> None:
    """Thirty pages from one NAT address at once: all are served, and a browser loading the last one gets
    the whole lab (built once it is there)."""

    async def class_arrives() -> tuple[list[int], list[dict]]:
        client = AsyncHTTPClient(force_instance=True)
        laptop = {"X-Forwarded-For": "192.168.16.100"}
        try:
            pages = await asyncio.gather(*(client.fetch(HTTPRequest(
                lan_server.base_url + LAB + "?" + urlencode({"T": 5}), headers=laptop, request_timeout=60))
                for _ in range(30)))
            session = await Session.open(ws_url(lan_server.base_url), token_in(pages[-1].body.decode("utf-8")))
            built = await until_built(session)
            await session.close_and_wait()
            return [p.code for p in pages], built
        finally:
            client.close()

    codes, built = asyncio.run(class_arrives())
    assert codes == [200] * 30
    assert built["controls"]["T"] == 5 and len(built["labels"]) == 5
