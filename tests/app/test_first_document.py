"""The block trace's first document carries what is used first; the rest follows once the page has loaded."""

from __future__ import annotations

import asyncio
import collections

from tests.app.bokeh_ws_client import Session, fetch_token, models

ROUTE = "/explorables/transformer-block-trace"


def name_of(model: dict) -> str:
    return model["name"].rsplit(".", 1)[-1]


def texts(content: dict) -> str:
    return "\n".join(str(m.get("attributes", {}).get("text", "")) for m in models(content))


async def first_and_after_load(page_url: str) -> tuple[dict, list[dict]]:
    """The PULL-DOC reply, and the patches that fill the places it left (read until none is pending)."""
    ws_url = page_url.split("?")[0].replace("http://", "ws://", 1) + "/ws"
    session = await Session.open(ws_url, await fetch_token(page_url))
    try:
        return session.document, await session.filled()
    finally:
        await session.close_and_wait()


def test_the_first_document_leaves_the_share_card_tables_and_text_alternatives_for_after_load(server):
    """Controls, stage table and diagram are in the first document; downloads, the lower tables, the text
    alternatives and the figures are not, and all of them arrive once the page has loaded."""
    first, patches = asyncio.run(first_and_after_load(server.url(server.teacher_link(ROUTE))))
    kinds = collections.Counter(name_of(m) for m in models(first))
    assert kinds["Slider"] == 2 and kinds["TextInput"] >= 1 and kinds["FloorDiagram1"] == 1
    assert "stage-table" in texts(first)
    assert kinds["FileDownload"] == 0 and kinds["Figure"] == 0
    for later in ("baseline-table", "swiglu-table", "alt-text", "Inside SwiGLU", "Save and share"):
        assert later not in texts(first), later
    after = collections.Counter(name_of(m) for patch in patches for m in models(patch))
    assert after["FileDownload"] == 3 and after["Figure"] == 3
    sent = "\n".join(texts(patch) for patch in patches)
    for later in ("baseline-table", "swiglu-table", "alt-text", "Inside SwiGLU", "Save and share"):
        assert later in sent, later
