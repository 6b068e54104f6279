"""A minimal Bokeh websocket client for server tests: open a session, pull its document, send changes.

It speaks the protocol as BokehJS does (ACK, PULL-DOC, PATCH-DOC; document_ready once "rendered"),
with Bokeh's own message classes. Every read is bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import re
from collections.abc import Iterator
from typing import Any

from bokeh.client.websocket import WebSocketClientConnectionWrapper
from bokeh.protocol import Protocol
from bokeh.protocol.message import Message
from bokeh.protocol.messages.patch_doc import patch_doc
from bokeh.protocol.receiver import Receiver
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.websocket import websocket_connect

import blocktrace.explorables.components.floor_diagram  # noqa: F401  (custom components read in a document)
import blocktrace.explorables.transformer_block_trace.view  # noqa: F401

PROTOCOL = Protocol()
READ_TIMEOUT_S = 30.0
_TOKEN = re.compile(r'"token"\s*:\s*"([^"]+)"')


def token_in(page_html: str) -> str:
    """The session token a served page hands its browser (Bokeh's render item in the page)."""
    found = _TOKEN.search(page_html)
    assert found, "no session token in the page"
    return found.group(1)


async def fetch_token(page_url: str, headers: dict[str, str] | None = None) -> str:
    """GET a page as a browser does and return its session token (the server signs sessions, so a client
    cannot make its own)."""
    response = await AsyncHTTPClient().fetch(HTTPRequest(page_url, headers=headers or {}, request_timeout=60))
    return token_in(response.body.decode("utf-8"))


def ws_of(page_url: str) -> str:
    """The websocket of a page: http://host/path?query -> ws://host/path/ws (the query stays with the page)."""
    return page_url.split("?")[0].rstrip("/").replace("http://", "ws://", 1) + "/ws"


def page_of(ws_url: str) -> str:
    """The page whose websocket this is: ws://host/path/ws?query -> http://host/path?query."""
    address, sep, query = ws_url.replace("ws://", "http://", 1).partition("?")
    return address.removesuffix("/ws") + sep + query


def models(node: Any) -> Iterator[dict]:
    """Every serialized model (a dict with "type": "object") inside a PULL-DOC reply's content."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "id" in node:
            yield node
        for value in node.values():
            yield from models(value)
    elif isinstance(node, list):
        for value in node:
            yield from models(value)


def inline_buffers(node: Any, buffers: dict[str, bytes]) -> None:
    """Put each binary buffer a message refers to ({"type": "bytes", "data": {"id": …}}) into its content as
    gzipped base64, the inline form Bokeh's deserializer reads without the buffers."""
    if isinstance(node, dict):
        data = node.get("data")
        if node.get("type") == "bytes" and isinstance(data, dict) and data.get("id") in buffers:
            node["data"] = base64.b64encode(gzip.compress(buffers[data["id"]])).decode("ascii")
        for value in node.values():
            inline_buffers(value, buffers)
    elif isinstance(node, list):
        for value in node:
            inline_buffers(value, buffers)


class Session:
    def __init__(self, ws) -> None:
        self.ws = ws
        self.sock = WebSocketClientConnectionWrapper(ws)
        self.receiver = Receiver(PROTOCOL)
        self.document: dict = {}

    @classmethod
    async def open(cls, ws_url: str, token: str | None = None, headers: dict[str, str] | None = None) -> Session:
        """Connect with a page's session token (as BokehJS does); without one, GET the page for a token.
        `headers` (a browser's cookie, say) go with the websocket's request, and with the page's if GET here."""
        token = token or await fetch_token(page_of(ws_url), headers=headers)
        ws = await websocket_connect(HTTPRequest(ws_url, headers=headers or {}), subprotocols=["bokeh", token])
        session = cls(ws)
        ack = await session.read()
        assert ack.msgtype == "ACK", ack.msgtype
        await PROTOCOL.create("PULL-DOC-REQ").send(session.sock)
        while (reply := await session.read()).msgtype != "PULL-DOC-REPLY":
            pass
        session.document = reply.content
        await session.send({"kind": "MessageSent", "msg_type": "bokeh_event",
                            "msg_data": {"type": "event", "name": "document_ready",
                                         "values": {"type": "map", "entries": []}}})
        return session

    async def filled(self) -> list[dict]:
        """Read until every place the first document left for after load (DrawnAfterLoad) has lost its
        pending class and holds its content; the PATCH-DOC contents read on the way (none if the page left no
        place). Panel 1.9 sends both in one message; 1.10 sends them one per change, the class first."""
        from blocktrace.explorables.components.figures import DrawnAfterLoad

        pending = {m["id"] for m in models(self.document)
                   if DrawnAfterLoad.PENDING in (m.get("attributes", {}).get("css_classes") or [])}
        empty = set(pending)
        patches = []
        while pending or empty:
            message = await self.read()
            if message.msgtype != "PATCH-DOC":
                continue
            patches.append(message.content)
            for event in message.content["events"]:
                if event.get("kind") != "ModelChanged":
                    continue
                place, attr, new = event["model"]["id"], event.get("attr"), event.get("new")
                if attr == "css_classes" and DrawnAfterLoad.PENDING not in new:
                    pending.discard(place)
                elif attr in ("children", "objects") and new:
                    empty.discard(place)
        return patches

    def find(self, name: str, **attributes: Any) -> dict:
        """The one model of this type whose attributes include the given ones."""
        found = [m for m in models(self.document) if m.get("name", "").split(".")[-1] == name
                 and all(m.get("attributes", {}).get(k) == v for k, v in attributes.items())]
        assert len(found) == 1, f"{len(found)} {name} models with {attributes}"
        return found[0]

    async def read(self) -> Message:
        while True:
            fragment = await asyncio.wait_for(self.ws.read_message(), READ_TIMEOUT_S)
            assert fragment is not None, "the server closed the websocket"
            message = await self.receiver.consume(fragment)
            if message is not None:
                if message.buffers:  # a NumPy array's bytes (the drawing component's numbers): inline, as base64
                    inline_buffers(message.content, {b.id: b.to_bytes() for b in message.buffers})
                return message

    async def send(self, *events: dict) -> None:
        await patch_doc(patch_doc.create_header(), {}, {"events": list(events)}).send(self.sock)

    async def set(self, model_id: str, attr: str, value: Any) -> None:
        await self.send({"kind": "ModelChanged", "model": {"id": model_id}, "attr": attr, "new": value})

    def close(self) -> None:
        self.ws.close()

    async def close_and_wait(self) -> None:
        """Close, and read on until the server's side has closed too (no socket left for the GC to find)."""
        self.ws.close()
        while await asyncio.wait_for(self.ws.read_message(), READ_TIMEOUT_S) is not None:
            pass


def pull_document(page_url: str, token: str | None = None) -> dict:
    """The document a served page's websocket gets (the PULL-DOC reply's content), the socket closed
    cleanly afterwards. `page_url` is the page's http address (with its query); `token` a page's session
    token, or None to GET the page for a fresh session."""
    ws_url = ws_of(page_url)

    async def pull() -> dict:
        client = await Session.open(ws_url, token or await fetch_token(page_url))
        try:
            return client.document
        finally:
            await client.close_and_wait()

    return asyncio.run(pull())
