"""A control value no page sends (out of bounds, wrong type, not a change at all) is refused in one short log line,
no traceback; the decoder lab's drawn controls send their changes as its drawing's `sent` (drawn_view/draw.js)."""

from __future__ import annotations

import asyncio
import json
import time

from tests.app.bokeh_ws_client import Session, fetch_token
from tests.app.test_get_flood import LAB, the_drawing, until_built, ws_url

DEADLINE_S = 30.0
OUT_OF_RANGE = "refused a control change: Integer parameter 'LabState.B' must be at most 4, not 99."
WRONG_TYPE = "refused a websocket message from a browser: failed to validate DecoderLabDrawing"
MALFORMED = "dropped a malformed control change"


def log_lines_after(server, mark: int, wanted: str) -> list[str]:
    """The server's log lines after character `mark`, once one of them contains `wanted` (or the deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        lines = server.log()[mark:].splitlines()
        if any(wanted in line for line in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)  # polling the log file for the line, not waiting for it to be right


async def send_invalid(server, value, wanted: str) -> tuple[list[str], bool]:
    """Open the lab, send `value` as its drawing's control change; once the log has said so (or the deadline),
    send a valid B = 2. Returns the log lines written meanwhile and whether the valid change was answered."""
    base = server.base_url
    session = await Session.open(ws_url(base), await fetch_token(base + server.teacher_link(LAB)))
    try:
        await until_built(session)
        drawing = the_drawing(session.document)["id"]
        mark = len(server.log())
        await session.set(drawing, "sent", value)
        # Not at once: a second change before the first is applied could replace it.
        lines = await asyncio.get_running_loop().run_in_executor(None, log_lines_after, server, mark, wanted)
        await session.set(drawing, "sent", json.dumps({"name": "B", "value": 2, "n": 2}))
        while True:
            message = await session.read()
            if message.msgtype == "PATCH-DOC" and any(
                    e.get("attr") == "search" and "B=2" in str(e.get("new")) for e in message.content["events"]):
                return lines, True
    finally:
        await session.close_and_wait()


def check(server, value, wanted: str) -> None:
    lines, answered = asyncio.run(send_invalid(server, value, wanted))
    refused = [line for line in lines if wanted in line]
    assert len(refused) == 1, lines
    assert len(refused[0]) < 400 and "\n" not in refused[0]
    assert not any(line.startswith(("Traceback", "  File ")) for line in lines), lines  # no traceback, none forged
    assert answered  # the session goes on: a valid change after the refused one is applied


def test_an_out_of_range_value_is_one_short_line(server) -> None:
    """B = 99 from a slider bounded at 4: the state keeps its value, the log gets one line saying so."""
    check(server, json.dumps({"name": "B", "value": 99, "n": 1}), OUT_OF_RANGE)


def test_a_value_of_the_wrong_type_is_one_short_line(server) -> None:
    """A number where the component takes a text: Bokeh refuses the message, the log gets one line."""
    check(server, 5, WRONG_TYPE)


def test_a_change_that_is_no_change_is_one_short_line(server) -> None:
    """A text that is not a change (with a forged log line in it): dropped, in one line that does not repeat it."""
    # The forged line looks like a traceback's frame (not the word itself, which other tests of this shared
    # server look for in its log).
    check(server, 'abc\n  File "forged.py", line 1', MALFORMED)
    assert "forged.py" not in server.log()
