"""The block trace's first document carries what is used first; the share card follows once the page has loaded."""

from __future__ import annotations

import asyncio
import base64
import collections
import gzip
import json

import numpy as np

from blocktrace.explorables.transformer_block_trace.payload import trace_part
from blocktrace.explorables.transformer_block_trace.state import TraceState
from tests.app.bokeh_ws_client import Session, fetch_token, models, ws_of

ROUTE = "/explorables/transformer-block-trace"


def name_of(model: dict) -> str:
    return model["name"].rsplit(".", 1)[-1]


def texts(content: dict) -> str:
    return "\n".join(str(m.get("attributes", {}).get("text", "")) for m in models(content))


async def first_and_after_load(page_url: str) -> tuple[dict, list[dict]]:
    """The PULL-DOC reply, and the patches that fill the places it left (read until none is pending)."""
    session = await Session.open(ws_of(page_url), await fetch_token(page_url))
    try:
        return session.document, await session.filled()
    finally:
        await session.close_and_wait()


def array_of(attribute: dict) -> np.ndarray:
    """A NumPy array as the document carries it (an ndarray whose bytes the client inlined as base64)."""
    raw = base64.b64decode(attribute["array"]["data"])
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return np.frombuffer(raw, dtype=attribute["dtype"]).reshape(attribute["shape"])


def test_the_first_document_leaves_the_share_card_for_after_load(server):
    """The first document holds the gate, the diagram and the drawing component with its whole payload (its
    controls, the stage rows, every chart's words and numbers); the share card's downloads follow once the page
    has loaded."""
    first, patches = asyncio.run(first_and_after_load(server.url(server.teacher_link(ROUTE))))
    kinds = collections.Counter(name_of(m) for m in models(first))
    assert kinds["FloorDiagram1"] == 1 and kinds["TraceDrawing1"] == 1
    drawing = next(m for m in models(first) if name_of(m) == "TraceDrawing1")["attributes"]
    controls = {c["label"]: c["kind"] for c in json.loads(drawing["spec"])["controls"]}
    assert controls["Attention update scale"] == controls["MLP update scale"] == "range"
    assert controls["Input vector"] == "text"
    meta = json.loads(drawing["meta"])
    assert len(meta["rows"]) == 8 and all(meta["words"].values())
    # Everything the charts and lower tables draw is there at once, and it is the engine's trace of the page's state
    expected_meta, expected_values = trace_part(TraceState())
    assert meta["rows"] == expected_meta["rows"] and meta["words"] == expected_meta["words"]
    np.testing.assert_array_equal(array_of(drawing["values"]), expected_values)
    assert kinds["FileDownload"] == 0 and kinds["Figure"] == 0
    assert "Save and share" not in texts(first)
    after = collections.Counter(name_of(m) for patch in patches for m in models(patch))
    assert after["FileDownload"] == 3
    assert "Save and share" in "\n".join(texts(patch) for patch in patches)
